"""Paths that make a repository run code later: the one list the gate and the sandbox share.

A write to one of these does nothing visible now, but a later ``git`` command, shell start,
editor, CI run or ketch start in that folder would run what was written: git hooks and
config, ketch's own project config, attribute filters, direnv files, CI workflows, editor
task files, pre-commit and agent hook settings. Writes to them ask even under an allow rule
(only ``--yolo`` skips the prompt), and the sandbox keeps them read-only.

Paths are relative to a workspace root, in POSIX form (``a/b``), as written or as resolved.
"""

from __future__ import annotations

from pathlib import PurePosixPath

# Directories under the workspace root whose whole content runs later.
RUN_LATER_DIRS: tuple[str, ...] = (
    ".git",
    ".ketch",
    ".claude",
    ".github/workflows",
    ".github/actions",
    ".gitlab",
    ".circleci",
    ".husky",
    ".devcontainer",
    ".vscode",
    ".idea",
    ".zed",
    ".direnv",
)

# File names that run later wherever they stand in the tree.
RUN_LATER_NAMES: frozenset[str] = frozenset(
    {
        ".gitattributes",
        ".gitmodules",
        ".envrc",
        ".env.local",
        ".gitlab-ci.yml",
        ".pre-commit-config.yaml",
        ".mcp.json",
        ".ketchrc",
    }
)


def is_run_later(relpath: str) -> bool:
    """True when a workspace-relative path is, or lies inside, a run-later place.

    Matching ignores case, since macOS and Windows file systems do (``.GIT/config`` is
    ``.git/config`` there), and treats any ``.git`` component as git's own directory
    (a nested repository's hooks run just the same).
    """
    parts = [p for p in PurePosixPath(relpath.replace("\\", "/")).parts if p not in ("", ".", "/")]
    if not parts:
        return False
    lowered = [p.lower() for p in parts]
    if ".git" in lowered:
        return True
    if lowered[-1] in RUN_LATER_NAMES:
        return True
    joined = "/".join(lowered)
    for d in RUN_LATER_DIRS:
        if joined == d or joined.startswith(d + "/"):
            return True
    return False
