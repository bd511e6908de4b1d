"""One directory of the workspace walk, read beneath the workspace in one step: its entries
and its ignore files, through one descriptor opened by ``tools.beneath`` (so a directory
swapped for a symlink meanwhile lists nothing rather than what lies outside)."""

from __future__ import annotations

import os
import stat
from typing import TYPE_CHECKING

from pydantic_ai.exceptions import ToolFailed

import ketch.tools.beneath as beneath

if TYPE_CHECKING:  # pathspec (~30 ms of imports) comes in with the first ignore file read
    from pathspec import GitIgnoreSpec

IGNORE_FILE_NAMES = (".gitignore", ".ignore")
"""Per-directory ignore files, in increasing precedence (``.ignore`` wins, as in rg)."""


def _read_rule_file(dirfd: int, rel: str) -> list[str]:
    """The lines of an ignore file relative to an open directory (none when it cannot be read)."""
    parts = rel.split("/")
    try:
        fd = os.dup(dirfd)
    except OSError:
        return []
    try:
        for part in parts[:-1]:
            nxt = os.open(part, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=fd)
            os.close(fd)
            fd = nxt
        file_fd = os.open(parts[-1], os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK, dir_fd=fd)
    except OSError:
        return []
    finally:
        os.close(fd)  # the descriptor reached so far, also when a step is missing (no .git)
    with os.fdopen(file_fd, "rb") as handle:
        if not stat.S_ISREG(os.fstat(file_fd).st_mode):
            return []
        return handle.read(4 * 1024 * 1024).decode("utf-8", "replace").splitlines()


def _rules_from(dirfd: int, *, include_git_exclude: bool) -> GitIgnoreSpec | None:
    lines: list[str] = []
    sources = [*((".git/info/exclude",) if include_git_exclude else ()), *IGNORE_FILE_NAMES]
    for source in sources:
        lines.extend(_read_rule_file(dirfd, source))
    patterns = [line for line in lines if line.strip() and not line.startswith("#")]
    if not patterns:
        return None
    from pathspec import GitIgnoreSpec

    return GitIgnoreSpec.from_lines(patterns)


def list_beneath(
    root: str, rel: str, *, include_git_exclude: bool
) -> tuple[GitIgnoreSpec | None, list[tuple[str, bool, bool]]] | None:
    """(ignore rules, sorted (name, is symlink, is directory) entries) of the directory ``rel``
    beneath ``root``, read through one descriptor opened beneath it (None when it cannot be)."""
    try:
        dirfd = beneath.open_dir(root, rel, readable=True)
    except (OSError, ToolFailed):
        return None
    try:
        rules = _rules_from(dirfd, include_git_exclude=include_git_exclude)
        out: list[tuple[str, bool, bool]] = []
        with os.scandir(dirfd) as scan:
            for entry in scan:
                try:
                    out.append((entry.name, entry.is_symlink(), entry.is_dir(follow_symlinks=False)))
                except OSError:
                    continue
    except OSError:
        return None
    finally:
        os.close(dirfd)
    out.sort()
    return rules, out


def load_rules(directory: str, *, include_git_exclude: bool = False) -> GitIgnoreSpec | None:
    """Compile the ignore files of one directory (None when there are none); the directory is
    opened without following a symlink at its last step."""
    try:
        dirfd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    except OSError:
        return None
    try:
        return _rules_from(dirfd, include_git_exclude=include_git_exclude)
    finally:
        os.close(dirfd)
