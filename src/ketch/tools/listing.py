"""The listing tools: list_dir (one directory) and glob (files by name pattern), both through
the gitignore-aware walker of the workspace jail and both bounded in what they return and
in how far they count."""

from __future__ import annotations

import os

from pydantic_ai import RunContext
from pydantic_ai.exceptions import ToolFailed

from ketch.tools.base import ToolDeps
from ketch.tools.workspace import Workspace, compile_glob, glob_matches

LIST_LIMIT = 1000
GLOB_LIMIT = 1000
GLOB_COUNT_LIMIT = 100_000
"""glob stops walking (and counting) once this many files match."""


async def list_dir(ctx: RunContext[ToolDeps], path: str = ".") -> str:
    """List one directory: sub-directories end with '/'. Ignored files (.gitignore) are left out.

    Args:
        path: Directory, relative to the workspace root or absolute.
    """
    workspace: Workspace = ctx.deps.workspace
    resolved = workspace.resolve(path, must_exist=True)
    shown = workspace.relative(resolved)
    if not resolved.is_dir():
        raise ToolFailed(f"{shown} is a file, not a directory; use read_file.")
    entries = list(
        workspace.iter_paths(resolved, include_hidden=True, include_dirs=True, max_depth=1, limit=LIST_LIMIT + 1)
    )
    names = sorted((os.path.basename(p) + ("/" if os.path.isdir(p) else "") for p in entries[:LIST_LIMIT]),
                   key=lambda n: (not n.endswith("/"), n))
    if not names:
        return f"{shown}/ is empty (or holds only ignored files)."
    header = f"{shown}/" if shown != "." else "./"
    lines = [header, *(f"  {name}" for name in names)]
    if len(entries) > LIST_LIMIT:
        lines.append(f"(listing stopped at {LIST_LIMIT} entries)")
    return "\n".join(lines)


async def glob(ctx: RunContext[ToolDeps], pattern: str, path: str = ".") -> str:
    """Find files by name pattern, e.g. '**/*.py', 'src/**/test_*.py' or '*.{ts,tsx}'.

    A pattern without '/' matches file names at any depth. Ignored files are skipped.

    Args:
        pattern: Glob pattern, relative to ``path``.
        path: Directory to search from, relative to the workspace root or absolute.
    """
    workspace: Workspace = ctx.deps.workspace
    base = workspace.resolve(path, must_exist=True)
    if not base.is_dir():
        raise ToolFailed(f"{workspace.relative(base)} is not a directory.")
    compiled = compile_glob(pattern)
    hidden = any(part.startswith(".") and part not in (".", "..") for part in pattern.split("/"))
    prefix = len(str(base).rstrip(os.sep)) + 1
    found: list[str] = []
    total = 0
    stopped = False
    for file_path in workspace.iter_paths(base, include_hidden=hidden):
        if glob_matches(compiled, pattern, file_path[prefix:]):
            total += 1
            if len(found) < GLOB_LIMIT:
                found.append(workspace.relative(file_path))
            elif total >= GLOB_COUNT_LIMIT:
                stopped = True
                break
    if not found:
        return f"No files match {pattern!r} under {workspace.relative(base)}."
    found.sort()
    if total > len(found):
        more = f"{total - len(found)}" + ("+" if stopped else "")
        found.append(f"({more} more files not shown; narrow the pattern)")
    return "\n".join(found)
