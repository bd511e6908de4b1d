"""The Landlock fallback: the same write policy where user namespaces are not available.

Landlock only grants: a rule on a directory covers everything beneath it, and nothing can
take a subtree back. So a writable root that holds read-only carve-outs is granted entry
by entry: each sibling of a carve-out is granted, the carve-out is not, and a directory
that holds a carve-out deeper down is opened up the same way. What that costs: a new file
or directory cannot be created directly in such a directory (the workspace root, usually),
since granting that would grant it inside ``.git`` too; existing files there stay writable.
Symlinks among those entries are not granted (a grant follows the link).

``/tmp`` cannot be made private without a mount namespace: each session gets its own
temporary directory instead (``TMPDIR`` points there), and ``/tmp`` itself is read-only.
There is no PID namespace either: the launcher (``landlock_exec.py``) is a subreaper that
kills whatever the command leaves behind.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence
from pathlib import Path

from ketch.sandbox.policy import SandboxPolicy

MAX_GRANTS = 4096
"""Rules per ruleset at most (one per entry next to a carve-out)."""


def abi_version() -> int:
    """The kernel's Landlock ABI, 0 where there is none (or not Linux)."""
    if not sys.platform.startswith("linux"):
        return 0
    from ketch.sandbox.landlock_exec import abi_version as query

    try:
        return query()
    except (OSError, AttributeError):
        return 0


def _inside(path: Path, root: Path) -> bool:
    return path == root or root in path.parents


def grants(policy: SandboxPolicy, tmpdir: Path | str) -> list[tuple[str, bool]]:
    """(path, is_dir) pairs that reproduce the policy's writes with allow-only rules."""
    out: list[tuple[str, bool]] = [(str(tmpdir), True)]
    for root in policy.roots_for_writes():
        carve = [p for p in policy.read_only if _inside(p, root)]
        _grant_tree(root, carve, out)
        if len(out) > MAX_GRANTS:
            raise ValueError(f"more than {MAX_GRANTS} Landlock rules would be needed under {root}")
    return out


def _grant_tree(directory: Path, carve: Sequence[Path], out: list[tuple[str, bool]]) -> None:
    if not carve:
        out.append((str(directory), True))
        return
    try:
        entries = list(os.scandir(directory))
    except OSError:
        return
    for entry in entries:
        path = Path(entry.path)
        if path in carve or entry.is_symlink():
            continue
        inner = [c for c in carve if _inside(c, path)]
        if entry.is_dir(follow_symlinks=False):
            _grant_tree(path, inner, out)
        elif entry.is_file(follow_symlinks=False):
            out.append((str(path), False))


def argv(policy: SandboxPolicy, command: Sequence[str], *, seccomp_file: Path | str, tmpdir: Path | str) -> list[str]:
    """The argv that runs ``command`` under ``policy`` with Landlock and the seccomp filter."""
    helper = Path(__file__).with_name("landlock_exec.py")
    out = [sys.executable, "-I", "-S", str(helper), "--seccomp", str(seccomp_file), "--tmpdir", str(tmpdir)]
    out += ["--network", "1" if policy.network else "0"]
    for path, is_dir in grants(policy, tmpdir):
        out += ["--dir" if is_dir else "--file", path]
    return [*out, "--", *command]
