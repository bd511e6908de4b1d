"""The sandbox policy: one object that answers "what may a command (or ketch) change?".

Writable roots are the workspace, the ``--add-dir`` directories, the tool caches the user
listed and ``sandbox.writable``; ``/tmp`` is private to each command. Inside the writable
roots the run-later places of ``sandbox/run_later.py`` that exist stay read-only (``.git``,
``.ketch``, workflows, ``.envrc``, ``.gitattributes`` anywhere in the tree, ...). Everything
else on the file system can be read and not written. The network is on or off.

``SandboxPolicy.write_verdict`` is the same answer for ketch's own file tools, so the shell
and ``write_file`` agree on what may change.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Literal

from ketch.sandbox.run_later import RUN_LATER_DIRS, RUN_LATER_NAMES, is_run_later

Mode = Literal["read-only", "workspace-write", "full-access"]
MODES: tuple[str, ...] = ("read-only", "workspace-write", "full-access")
WriteVerdict = Literal["writable", "run_later", "read_only", "outside"]

TOOL_CACHES: dict[str, tuple[str, ...]] = {
    "pip": ("~/.cache/pip",),
    "uv": ("~/.cache/uv",),
    "npm": ("~/.npm",),
    "yarn": ("~/.cache/yarn", "~/.yarn"),
    "pnpm": ("~/.local/share/pnpm", "~/.cache/pnpm"),
    "cargo": ("~/.cargo/registry", "~/.cargo/git"),
    "go": ("~/go/pkg/mod", "~/.cache/go-build"),
    "maven": ("~/.m2/repository",),
    "gradle": ("~/.gradle/caches",),
    "pytest": ("~/.cache/pytest",),
}
"""Names ``sandbox.caches`` accepts and the directories each one makes writable."""

HOME_RUN_LATER: tuple[str, ...] = (
    ".ssh", ".gnupg", ".aws", ".netrc", ".pypirc", ".npmrc", ".gitconfig", ".config/git",
    ".bashrc", ".bash_profile", ".bash_login", ".bash_logout", ".profile", ".zshrc", ".zprofile", ".zshenv",
    ".config/fish", ".config/autostart", ".config/systemd", ".local/bin", ".config/ketch",
)  # fmt: skip
"""Places in the home directory that hold credentials or run code later: read-only when a
writable root is the home directory or holds it (ketch started in ``~``)."""

NESTED_SCAN_DIRS = 20_000
"""Directories the start-up scan for nested run-later names visits at most."""
NESTED_SCAN_SECONDS = 1.0
MAX_CARVE_OUTS = 256
"""Read-only carve-outs kept at most (each is one bind mount)."""


def _real(path: Path | str) -> Path:
    return Path(os.path.realpath(os.path.expanduser(str(path))))


def _inside(path: Path, root: Path) -> bool:
    return path == root or root in path.parents


@dataclass(frozen=True)
class SandboxPolicy:
    mode: Mode
    workspace: Path
    writable: tuple[Path, ...]
    """Every writable root, resolved (the workspace first)."""
    read_only: tuple[Path, ...] = ()
    """Existing run-later paths inside the writable roots, resolved."""
    network: bool = False
    notes: tuple[str, ...] = field(default=(), compare=False)
    """What the policy could not do completely (a capped scan, a missing directory)."""

    @property
    def confined(self) -> bool:
        return self.mode != "full-access"

    def roots_for_writes(self) -> tuple[Path, ...]:
        """The roots commands may write: none in read-only mode."""
        return () if self.mode == "read-only" else self.writable

    def read_only_view(self) -> SandboxPolicy:
        """The same policy with nothing writable (for the read-only git tools)."""
        return replace(self, mode="read-only", network=False)

    def with_network(self, network: bool) -> SandboxPolicy:
        return replace(self, network=network)

    def refreshed(self, added: Sequence[Path] = ()) -> SandboxPolicy:
        """The policy with the run-later places at each writable root looked up again, so a
        ``.git`` or ``.envrc`` created since start is read-only for the next command; ``added``
        directories (``/add-dir`` during the session) become writable roots."""
        roots = list(self.writable)
        for directory in added:
            real = _real(directory)
            if real.is_dir() and real != Path("/") and real not in roots:
                roots.append(real)
        found = set(self.read_only)
        for root in roots:
            found.update(_top_level_run_later(root))
        found.update(_own_dirs_within(roots))
        return replace(self, writable=tuple(roots), read_only=_within(found, roots))

    def write_verdict(self, path: Path | str) -> WriteVerdict:
        """What a write to ``path`` (already resolved by the workspace jail) is under this policy."""
        target = _real(path)
        if self.mode == "full-access":
            rel = _relative_to_any(target, self.writable)
            return "run_later" if rel is not None and is_run_later(rel) else "writable"
        if self.mode == "read-only":
            return "read_only"
        if not any(_inside(target, root) for root in self.writable):
            return "outside"
        if any(_inside(target, ro) for ro in self.read_only):
            return "run_later"
        rel = _relative_to_any(target, self.writable)
        if rel is not None and is_run_later(rel):  # not there yet, but a run-later place all the same
            return "run_later"
        return "writable"

    def describe(self) -> list[str]:
        """Lines for ``/sandbox`` and ``ketch sandbox check``."""
        lines = [f"mode: {self.mode}", f"network: {'on' if self.network else 'off'}"]
        if self.mode == "full-access":
            lines.append("commands run unconfined: they may change anything the user may")
            return lines
        roots = self.roots_for_writes()
        lines.append("writable: " + (", ".join(str(r) for r in roots) if roots else "nothing") + ("" if not roots else ", a private /tmp"))
        if self.read_only and roots:
            shown = [str(p) for p in self.read_only[:12]]
            more = len(self.read_only) - len(shown)
            lines.append("read-only inside: " + ", ".join(shown) + (f" and {more} more" if more > 0 else ""))
        lines.append("readable: the whole file system")
        lines.extend(self.notes)
        return lines


def _relative_to_any(target: Path, roots: Iterable[Path]) -> str | None:
    for root in roots:
        if _inside(target, root):
            return target.relative_to(root).as_posix()
    return None


def _within(paths: Iterable[Path], roots: Sequence[Path]) -> tuple[Path, ...]:
    """The paths that lie inside a writable root (elsewhere everything is read-only anyway)."""
    return tuple(sorted(p for p in set(paths) if any(_inside(p, r) for r in roots) and p not in roots))


def _top_level_run_later(root: Path) -> list[Path]:
    found: list[Path] = []
    for rel in (*RUN_LATER_DIRS, *RUN_LATER_NAMES):
        candidate = root / rel
        if os.path.exists(candidate):  # a symlink counts as where it leads (bind mounts follow it too)
            found.append(_real(candidate))
    return found


def _nested_run_later(root: Path, notes: list[str]) -> list[Path]:
    """Run-later names below the top level (``sub/.gitattributes``, a nested ``.git``), bounded."""
    found: list[Path] = []
    deadline = time.monotonic() + NESTED_SCAN_SECONDS
    visited = 0
    stack = [root]
    names = {n.lower() for n in RUN_LATER_NAMES} | {".git"}
    while stack:
        current = stack.pop()
        visited += 1
        if visited > NESTED_SCAN_DIRS or time.monotonic() > deadline:
            notes.append(f"the scan for nested run-later files under {root} stopped early; deeper ones stay writable")
            break
        try:
            entries = list(os.scandir(current))
        except OSError:
            continue
        for entry in entries:
            path = Path(entry.path)
            if entry.name.lower() in names and current != root:
                if os.path.exists(path):
                    found.append(_real(path))
                continue
            if current == root and is_run_later(entry.name):
                continue  # the top level is handled by _top_level_run_later
            if entry.is_dir(follow_symlinks=False):
                stack.append(path)
    return found


def _own_dirs_within(roots: Sequence[Path]) -> list[Path]:
    """ketch's own config and data directories, wherever they are configured to live, when a
    writable root holds them: they run code later (the config's hooks and MCP servers, the
    compiled dataclass code read at every start) and hold the session store, so a sandboxed
    command must not write them even where it may write the folder around them."""
    from ketch.config.dirs import user_config_dir, user_data_dir

    found = []
    for own in (user_config_dir(), user_data_dir()):
        real = _real(own)
        if os.path.exists(real) and any(_inside(real, root) for root in roots):
            found.append(real)
    return found


def build_policy(
    mode: Mode,
    workspace: Path,
    *,
    added_dirs: Sequence[Path] = (),
    writable: Sequence[str] = (),
    caches: Sequence[str] = (),
    network: bool = False,
    scan_nested: bool = True,
) -> SandboxPolicy:
    """The policy of a session. Missing extra directories are left out with a note."""
    notes: list[str] = []
    ws = _real(workspace)
    if ws == Path("/") and mode == "workspace-write":
        raise ValueError("the workspace is / itself, so workspace-write would make everything writable; start ketch in a project directory or pass --sandbox full-access")
    roots: list[Path] = [ws]
    extra = [*added_dirs, *writable]
    for name in caches:
        if name not in TOOL_CACHES:
            raise ValueError(f"unknown tool cache {name!r} in sandbox.caches; known: {', '.join(sorted(TOOL_CACHES))}")
        extra.extend(TOOL_CACHES[name])
    for entry in extra:
        real = _real(entry)
        if not real.is_dir():
            notes.append(f"writable directory {entry} does not exist; left out")
            continue
        if real == Path("/"):
            raise ValueError("sandbox.writable cannot make / writable; use --sandbox full-access instead")
        if real not in roots:
            roots.append(real)
    read_only: set[Path] = set()
    for root in roots:
        read_only.update(_top_level_run_later(root))
    home = _real("~")
    if any(_inside(home, root) for root in roots):
        read_only.update(_real(home / name) for name in HOME_RUN_LATER if os.path.exists(home / name))
    read_only.update(_own_dirs_within(roots))
    if scan_nested:
        read_only.update(_nested_run_later(ws, notes))
    ordered = list(_within(read_only, roots))
    if len(ordered) > MAX_CARVE_OUTS:
        notes.append(f"{len(ordered) - MAX_CARVE_OUTS} nested run-later paths beyond the first {MAX_CARVE_OUTS} stay writable")
        ordered = ordered[:MAX_CARVE_OUTS]
    return SandboxPolicy(mode=mode, workspace=ws, writable=tuple(roots), read_only=tuple(ordered), network=network, notes=tuple(notes))


def with_nested_run_later(policy: SandboxPolicy) -> SandboxPolicy:
    """``policy`` with the nested run-later paths of its workspace carved out too (bounded scan)."""
    notes = list(policy.notes)
    found = _within([*policy.read_only, *_nested_run_later(policy.workspace, notes)], policy.writable)
    if len(found) > MAX_CARVE_OUTS:
        notes.append(f"{len(found) - MAX_CARVE_OUTS} nested run-later paths beyond the first {MAX_CARVE_OUTS} stay writable")
        found = found[:MAX_CARVE_OUTS]
    return replace(policy, read_only=found, notes=tuple(notes))
