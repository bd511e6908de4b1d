"""The hardened git launcher: every git process ketch starts on its own goes through here.

A repository's own configuration (``.git/config``, a worktree config, the files those
include, an embedded bare repository's ``config``) can name programs that git runs on an
ordinary read: clean/smudge/process filters, an fsmonitor hook, external diff drivers,
textconv, a pager, hooks, an editor, a gpg program for signatures, and, through a lazy
fetch in a partial clone, ssh commands, credential helpers, upload-pack and remote
helpers. git cannot be told to ignore the repository's config wholesale, so each launch:

* starts from a small allowlisted environment (no ``GIT_*`` from the caller except where
  the user's own global/system config lives, no ``PAGER``/``EDITOR``/``SSH_ASKPASS``, no
  secrets), with ``GIT_ALLOW_PROTOCOL`` naming no real transport (every fetch, push or
  remote helper is refused, whatever ``protocol.*.allow`` says);
* passes fixed overrides for the keys whose names are known (``core.fsmonitor``,
  ``core.hooksPath``, ``core.pager``, editors, ``core.askPass``, ``credential.helper``,
  ``log.showSignature``, submodule recursion, ``safe.bareRepository``, …);
* lists every configured key name (all scopes, includes followed) and overrides each one
  that names a program under a name chosen by the config (``filter.<name>.clean``,
  ``pager.<cmd>``, ``credential.<url>.helper``, ``gpg.<format>.program``, …);
* refuses a ``core.worktree`` that moves the work tree away from the folder holding
  ``.git`` (a config could otherwise point git's reads at the user's home).

Overrides travel as ``GIT_CONFIG_COUNT``/``GIT_CONFIG_KEY_n``/``GIT_CONFIG_VALUE_n`` (the
command-line scope, which wins over every file and reaches the git processes git itself
starts). Diff drivers and textconv cannot be switched off by a value, so the callers pass
``--no-ext-diff --no-textconv`` (``DIFF_FLAGS``). ``launch`` is the one place a git process
is started, so a sandbox can wrap it: ``run_git`` for the user's repositories, ``run_own_store``
for a repository ketch made itself (the checkpoint store, driven with ``GIT_DIR``), which gets
the same environment and fixed overrides (a nested repository a git inside it might enter
is held to them too). ``tests/test_git_spawns.py`` fails on any git started elsewhere.
"""

from __future__ import annotations

import os
import selectors
import signal
import subprocess
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

DIFF_FLAGS = ("--no-ext-diff", "--no-textconv")
"""Flags for every command that can produce a diff: no external diff, no textconv."""
SUBMODULE_FLAGS = ("--ignore-submodules=dirty",)
"""For status and diff: do not start a git inside each submodule (its own config would apply)."""
NO_PROGRAM = "/dev/null"
"""Value for keys that must name a program: exec of /dev/null fails, nothing runs."""
NO_TRANSPORT = "ketch-no-transport"
"""``GIT_ALLOW_PROTOCOL``: a list naming no real transport, so git allows none."""

FIXED_OVERRIDES: tuple[tuple[str, str], ...] = (
    ("core.fsmonitor", "false"),
    ("core.hooksPath", NO_PROGRAM),
    ("core.pager", "cat"),
    ("core.editor", ":"),
    ("sequence.editor", ":"),
    ("core.askPass", ""),
    ("core.sshCommand", NO_PROGRAM),
    ("core.attributesFile", NO_PROGRAM),
    ("core.alternateRefsCommand", ""),
    ("credential.helper", ""),
    ("gpg.program", NO_PROGRAM),
    ("log.showSignature", "false"),
    ("status.submoduleSummary", "false"),
    ("diff.submodule", "short"),
    ("submodule.recurse", "false"),
    ("protocol.allow", "never"),
    ("safe.bareRepository", "explicit"),
    ("core.quotePath", "false"),
    ("color.ui", "never"),
)

# Keys whose middle part is chosen by the config, by (section, variable) -> neutral value.
_NAMED_PROGRAM_KEYS: dict[tuple[str, str], str] = {
    ("filter", "clean"): "",
    ("filter", "smudge"): "",
    ("filter", "process"): "",
    ("filter", "required"): "false",
    ("credential", "helper"): "",
    ("gpg", "program"): NO_PROGRAM,
    ("pager", ""): "false",
    ("protocol", "allow"): "never",
}
"""``diff.<driver>.command``/``textconv`` are absent: an empty value makes git fail instead of
skipping them; ``DIFF_FLAGS`` switch them off. ``remote.<name>.uploadpack``/``vcs`` are absent:
git uses the first value given, so an override cannot win; ``GIT_ALLOW_PROTOCOL`` refuses
every transport before any of them runs."""

_ENV_KEEP = {"PATH", "HOME", "USER", "LOGNAME", "LANG", "LANGUAGE", "TZ", "TMPDIR", "XDG_CONFIG_HOME",
             "GIT_CONFIG_NOSYSTEM", "GIT_CONFIG_GLOBAL", "GIT_CONFIG_SYSTEM"}
"""Caller variables a git read keeps (plus ``LC_*``): the user's own config stays in force."""


class GitLaunchError(Exception):
    """git could not be started, did not finish in time, or the repository is refused."""


@dataclass(frozen=True)
class GitResult:
    returncode: int
    stdout: bytes
    stderr: bytes
    truncated: bool = False
    """stdout reached the byte cap; git was stopped there."""


def base_env() -> dict[str, str]:
    """The environment of every git read, before the config overrides are added."""
    env = {k: v for k, v in os.environ.items() if k in _ENV_KEEP or k.startswith("LC_")}
    env.update(
        LC_ALL="C", GIT_TERMINAL_PROMPT="0", GIT_OPTIONAL_LOCKS="0", GIT_PAGER="cat", PAGER="cat", GIT_EDITOR=":",
        GIT_ATTR_NOSYSTEM="1", GIT_ALLOW_PROTOCOL=NO_TRANSPORT, GIT_PROTOCOL_FROM_USER="0",
    )
    return env


def neutral_value(key: str) -> str | None:
    """The override for one configured key name, or None when the key runs nothing."""
    section, _, rest = key.partition(".")
    subsection, _, variable = rest.rpartition(".")
    section, variable = section.lower(), variable.lower()
    if section == "pager":
        return "false"
    if not subsection:
        return None
    if section == "gpg" and variable in ("program", "defaultkeycommand"):
        return NO_PROGRAM
    return _NAMED_PROGRAM_KEYS.get((section, variable))


def with_overrides(env: dict[str, str], overrides: Sequence[tuple[str, str]]) -> dict[str, str]:
    """``env`` plus ``overrides`` in git's command-line config scope."""
    env = dict(env)
    for index, (key, value) in enumerate(overrides):
        env[f"GIT_CONFIG_KEY_{index}"] = key
        env[f"GIT_CONFIG_VALUE_{index}"] = value
    env["GIT_CONFIG_COUNT"] = str(len(overrides))
    return env


def launch(argv: Sequence[str], env: dict[str, str], *, cwd: str | None = None, stdin: bool = False) -> subprocess.Popen[bytes]:
    """Start one git process (the only place ketch does): no shell, own session, stdin a pipe
    only when the caller feeds it (else ``/dev/null``)."""
    if not argv or os.path.basename(argv[0]) != "git" and "git" not in argv:
        raise GitLaunchError(f"not a git command: {list(argv)[:1]}")
    try:
        return subprocess.Popen(
            list(argv), stdin=subprocess.PIPE if stdin else subprocess.DEVNULL, stdout=subprocess.PIPE,
            stderr=subprocess.PIPE, env=env, cwd=cwd, start_new_session=True,
        )
    except FileNotFoundError as exc:
        raise GitLaunchError("git is not installed or not on PATH.") from exc
    except OSError as exc:
        raise GitLaunchError(f"git could not be started: {exc.strerror or exc}.") from exc


def stop(process: subprocess.Popen[bytes]) -> None:
    """Kill git and anything it started (its own process group)."""
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def _collect(process: subprocess.Popen[bytes], timeout_s: float, max_bytes: int) -> GitResult:
    """Read both pipes until EOF, ``max_bytes`` of stdout, or the deadline (then kill)."""
    assert process.stdout is not None and process.stderr is not None
    chunks: dict[int, list[bytes]] = {1: [], 2: []}
    sizes = {1: 0, 2: 0}
    deadline = time.monotonic() + timeout_s
    truncated = timed_out = False
    with selectors.DefaultSelector() as selector:
        selector.register(process.stdout, selectors.EVENT_READ, 1)
        selector.register(process.stderr, selectors.EVENT_READ, 2)
        while selector.get_map():
            left = deadline - time.monotonic()
            if left <= 0:
                timed_out = True
                break
            for key, _ in selector.select(min(left, 1.0)):
                data = os.read(key.fd, 65536)
                if not data:
                    selector.unregister(key.fileobj)
                    continue
                limit = max_bytes if key.data == 1 else 65536
                room = limit - sizes[key.data]
                if room > 0:
                    chunks[key.data].append(data[:room])
                    sizes[key.data] += min(room, len(data))
                if key.data == 1 and len(data) > room:
                    truncated = True
            if truncated:
                break
    if truncated or timed_out:
        stop(process)
    process.stdout.close()
    process.stderr.close()
    code = process.wait()
    if timed_out:
        raise GitLaunchError(f"did not finish in {timeout_s:.0f} s")
    return GitResult(code, b"".join(chunks[1]), b"".join(chunks[2]), truncated)


def _run(argv: Sequence[str], env: dict[str, str], timeout_s: float, max_bytes: int,
         on_start: Callable[[subprocess.Popen[bytes]], None] | None = None) -> GitResult:
    process = launch(argv, env)
    if on_start is not None:
        on_start(process)
    try:
        return _collect(process, timeout_s, max_bytes)
    except BaseException:
        stop(process)
        raise


def _repo_overrides(root: str, env: dict[str, str], timeout_s: float,
                    on_start: Callable[[subprocess.Popen[bytes]], None] | None = None) -> list[tuple[str, str]]:
    """Overrides for every configured key that names a program; checks ``core.worktree``."""
    listed = _run(["git", "-C", root, "config", "--list", "--null", "--name-only", "--includes"],
                  env, timeout_s, 4 * 1024 * 1024, on_start)
    if listed.returncode != 0:  # unreadable config: do not run git on a config not listed
        lines = listed.stderr.decode("utf-8", "replace").strip().splitlines()
        reason = lines[0].removeprefix("fatal: ").removeprefix("error: ") if lines else "its config cannot be read"
        raise GitLaunchError(f"the repository's git config could not be read ({reason})")
    keys = [k for k in listed.stdout.decode("utf-8", "surrogateescape").split("\0") if k]
    overrides: list[tuple[str, str]] = []
    for key in dict.fromkeys(keys):
        value = neutral_value(key)
        if value is not None:
            overrides.append((key, value))
    if any(k.lower() == "core.worktree" for k in keys):
        _check_worktree(root, env, timeout_s)
    return overrides


def _holder_of_dot_git(root: str) -> str | None:
    """The nearest folder at or above ``root`` holding a ``.git`` entry (git's own discovery)."""
    here = os.path.realpath(root)
    while True:
        if os.path.lexists(os.path.join(here, ".git")):
            return here
        parent = os.path.dirname(here)
        if parent == here:
            return None
        here = parent


def in_a_repository(root: Path | str) -> bool:
    """Whether a ``.git`` entry lies at or above ``root``: without one git finds no work tree
    there (a git read's environment carries no ``GIT_DIR``), so a caller that only reads a
    work tree can skip starting git (two processes) outside a repository."""
    return _holder_of_dot_git(str(root)) is not None


def _check_worktree(root: str, env: dict[str, str], timeout_s: float) -> None:
    shown = _run(["git", "-C", root, "rev-parse", "--show-toplevel"], env, timeout_s, 65536)
    if shown.returncode != 0:
        return  # not a work tree: the command fails on its own
    top = os.path.realpath(shown.stdout.decode("utf-8", "surrogateescape").strip())
    if top != _holder_of_dot_git(root):
        raise GitLaunchError(
            f"the repository's config sets core.worktree to {top}, not the folder holding .git; "
            "ketch's git tools do not read a work tree moved elsewhere (unset core.worktree)"
        )


def git_command(root: Path | str, args: Sequence[str], *, timeout_s: float = 10.0,
                on_start: Callable[[subprocess.Popen[bytes]], None] | None = None) -> tuple[list[str], dict[str, str]]:
    """The argv and environment of a hardened ``git <args>`` at ``root``."""
    root = str(root)
    env = with_overrides(base_env(), FIXED_OVERRIDES)
    overrides = [*FIXED_OVERRIDES, *_repo_overrides(root, env, timeout_s, on_start)]
    return ["git", "-C", root, "--no-pager", *args], with_overrides(base_env(), overrides)


def run_git(root: Path | str, args: Sequence[str], *, timeout_s: float, max_bytes: int = 64 * 1024 * 1024,
            on_start: Callable[[subprocess.Popen[bytes]], None] | None = None,
            wrap: Callable[[list[str]], list[str]] | None = None) -> GitResult:
    """Run hardened ``git <args>`` at ``root``: stdout capped at ``max_bytes``, killed at ``timeout_s``.

    ``wrap`` turns the command's argv into the one to execute (the OS sandbox); the config
    listing before it runs no program and is not wrapped.
    """
    started = time.monotonic()
    argv, env = git_command(root, args, timeout_s=timeout_s, on_start=on_start)
    if wrap is not None:
        argv = wrap(argv)
    left = max(0.1, timeout_s - (time.monotonic() - started))
    return _run(argv, env, left, max_bytes, on_start)


def own_store_env(git_dir: Path | str, work_tree: Path | str | None, extra: dict[str, str] | None = None) -> dict[str, str]:
    """The environment of git on a store ketch made: the reads' small environment, no user
    or system config at all (the store's own file says everything), and the fixed overrides."""
    env = base_env()
    env.pop("GIT_CONFIG_SYSTEM", None)
    private_home = str(Path(git_dir) / "xdg")
    env.update(GIT_CONFIG_NOSYSTEM="1", GIT_CONFIG_GLOBAL=os.devnull, XDG_CONFIG_HOME=private_home, HOME=private_home)
    if work_tree is not None:
        env.update(GIT_DIR=str(git_dir), GIT_WORK_TREE=str(work_tree))
    env.update({k: v for k, v in (extra or {}).items() if k == "GIT_INDEX_FILE"})  # a scratch index
    return with_overrides(env, FIXED_OVERRIDES)


def _finish(process: subprocess.Popen[bytes], args: Sequence[str], input: bytes | None, timeout_s: float) -> GitResult:
    """Feed ``input``, wait at most ``timeout_s``; a git that overruns is killed with what it started."""
    try:
        out, err = process.communicate(input, timeout=timeout_s)
    except subprocess.TimeoutExpired:
        stop(process)
        process.communicate()
        raise GitLaunchError(f"git {args[0] if args else ''} did not finish in {timeout_s:.0f} s") from None
    except BaseException:
        stop(process)
        raise
    return GitResult(process.returncode, out, err)


def run_own_store(git_dir: Path | str, work_tree: Path | str | None, args: Sequence[str], *,
                  cwd: Path | str, input: bytes | None = None, timeout_s: float = 300.0,
                  extra_env: dict[str, str] | None = None) -> GitResult:
    """``git <args>`` on ketch's own store ``git_dir`` (``work_tree`` None: no ``GIT_DIR`` yet,
    as for ``init``), fed ``input``; killed with what it started at ``timeout_s``."""
    process = launch(["git", *args], own_store_env(git_dir, work_tree, extra_env), cwd=str(cwd), stdin=input is not None)
    return _finish(process, args, input, timeout_s)


def run_fetch_store(git_dir: Path | str, args: Sequence[str], *, protocols: Sequence[str], cwd: Path | str,
                    timeout_s: float = 120.0) -> GitResult:
    """``git <args>`` on a scratch bare store ketch made to fetch one pinned commit: the own
    store's environment and overrides, with ``GIT_ALLOW_PROTOCOL`` naming only ``protocols``
    (so no ssh, ext:: or remote helper), no credentials and no prompt."""
    env = own_store_env(git_dir, None)
    env.update(GIT_DIR=str(git_dir), GIT_ALLOW_PROTOCOL=":".join(protocols))
    process = launch(["git", *args], env, cwd=str(cwd))
    return _finish(process, args, None, timeout_s)
