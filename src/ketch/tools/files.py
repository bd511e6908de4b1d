"""File tools: read_file, write_file, edit_file (list_dir and glob are in ``listing``).

Every path goes through the workspace jail first. Writes are atomic (a temporary file in
the same directory, then a rename) and keep the file's mode. ``edit_file`` takes either one
exact replacement (``old_string``/``new_string``) or a list of them in ``edits``, applied in
order to the same text and written only if every one of them applies; a miss reports the
closest lines of the file. ``preview_edit``/``preview_write`` compute the diff a proposed
call would make, without writing, for approval prompts.
"""

from __future__ import annotations

import difflib
import os
import stat
from pathlib import Path
from typing import Any, BinaryIO

from pydantic_ai import RunContext
from pydantic_ai.exceptions import ToolFailed

from ketch.sandbox.runtime import check_file_write
from ketch.tools.arg_shapes import Edit  # its own small module: pydantic parses the file of its docstrings
from ketch.tools.bounded import bounded_lines, cut_note
from ketch.tools.diagnostics import after_edit
from ketch.tools.workspace import Workspace
from ketch.tools.base import ToolDeps, ToolSpec
import ketch.tools.beneath as beneath
from ketch.tools.disk import BINARY_SNIFF_BYTES, MAX_LINE_CHARS, exists, is_binary, open_regular, read_text, write_atomic  # noqa: F401 - open_regular: search
from ketch.tools.editor_io import EDITOR_READ_LINES, editor_of, numbered_editor_text, read_current, write_text
from ketch.tools.listing import GLOB_COUNT_LIMIT, GLOB_LIMIT, LIST_LIMIT, glob, list_dir  # noqa: F401 - the tool list below; tests import them here



# ------------------------------------------------------------------ pure helpers


def unified_diff(old: str, new: str, path: str) -> str:
    """A unified diff (3 lines of context) from ``old`` to ``new``; empty when equal."""
    lines = difflib.unified_diff(
        old.splitlines(keepends=True), new.splitlines(keepends=True), f"a/{path}", f"b/{path}"
    )
    return "".join(line if line.endswith("\n") else line + "\n\\ No newline at end of file\n" for line in lines)


def diff_counts(diff: str) -> tuple[int, int]:
    """(added, removed) line counts of a unified diff."""
    added = removed = 0
    for line in diff.splitlines():
        if line.startswith("+") and not line.startswith("+++"):
            added += 1
        elif line.startswith("-") and not line.startswith("---"):
            removed += 1
    return added, removed


def _closest_lines(text: str, needle: str) -> str:
    """Describe the window of ``text`` most like ``needle``, with line numbers."""
    lines = text.splitlines()
    wanted = needle.splitlines() or [needle]
    size = len(wanted)
    if not lines:
        return "The file is empty."
    target = "\n".join(wanted)
    matcher = difflib.SequenceMatcher(autojunk=False)
    matcher.set_seq2(target)
    scored: list[tuple[float, int]] = []
    for start in range(max(1, len(lines) - size + 1)):
        matcher.set_seq1("\n".join(lines[start : start + size]))
        scored.append((matcher.quick_ratio(), start))
    scored.sort(reverse=True)
    best_ratio, best_start = 0.0, 0
    for _, start in scored[:50]:
        matcher.set_seq1("\n".join(lines[start : start + size]))
        ratio = matcher.ratio()
        if ratio > best_ratio:
            best_ratio, best_start = ratio, start
    window = lines[best_start : best_start + size]
    numbered = "\n".join(f"{best_start + i + 1:>6}\t{line}" for i, line in enumerate(window))
    last = best_start + len(window)
    return f"Closest match (lines {best_start + 1}-{last}, {best_ratio:.0%} similar):\n{numbered}"


def _line_numbers_of(text: str, needle: str, limit: int = 10) -> list[int]:
    numbers: list[int] = []
    index = text.find(needle)
    while index != -1 and len(numbers) < limit:
        numbers.append(text.count("\n", 0, index) + 1)
        index = text.find(needle, index + max(1, len(needle)))
    return numbers


def apply_edits(text: str, edits: list[Edit] | list[dict[str, Any]], shown: str) -> str:
    """Apply exact replacements in order; raise ToolFailed naming the first that fails."""
    crlf = "\r\n" in text and "\n" not in text.replace("\r\n", "")
    for number, edit in enumerate(edits, start=1):
        label = f"Edit {number}: " if len(edits) > 1 else ""
        old, new = edit.get("old_string", ""), edit.get("new_string", "")
        if crlf and "\r\n" not in old:
            old, new = old.replace("\n", "\r\n"), new.replace("\n", "\r\n")
        if old == new:
            raise ToolFailed(f"{label}old_string and new_string are identical; nothing to change.")
        if not old:
            if text:
                raise ToolFailed(f"{label}old_string is empty; give the exact text to replace in {shown}.")
            text = new
            continue
        count = text.count(old)
        if count == 0:
            raise ToolFailed(
                f"{label}old_string was not found in {shown}; it must match exactly, whitespace included.\n"
                + _closest_lines(text, old)
            )
        if count > 1 and not edit.get("replace_all", False):
            where = ", ".join(str(n) for n in _line_numbers_of(text, old))
            raise ToolFailed(
                f"{label}old_string occurs {count} times in {shown} (lines {where}); include more "
                "surrounding text to make it unique, or set replace_all."
            )
        text = text.replace(old, new)
    return text


def _edits_from_args(args: dict[str, Any]) -> list[dict[str, Any]]:
    edits = args.get("edits") or []
    single = {k: args[k] for k in ("old_string", "new_string", "replace_all") if k in args}
    if edits and (single.get("old_string") or single.get("new_string")):
        raise ToolFailed("Give either old_string/new_string or edits, not both.")
    if edits:
        return [dict(e) for e in edits]
    if "old_string" not in single and "new_string" not in single:
        raise ToolFailed("Nothing to edit: give old_string and new_string, or a list of edits.")
    return [single]


def _planned_edit(workspace: Workspace, args: dict[str, Any]) -> tuple[Path, str, str, bool]:
    """(path, old text, new text, existed) for an edit_file call, without writing."""
    path = workspace.resolve(str(args.get("path", "")))
    shown = workspace.relative(path)
    place = workspace.where(path)
    existed = exists(place)
    old = read_text(place, shown) if existed else ""
    edits = _edits_from_args(args)
    if not existed and any(e.get("old_string") for e in edits):
        raise ToolFailed(f"{shown} does not exist; create it with write_file.")
    return path, old, apply_edits(old, edits, shown), existed


def preview_edit(workspace: Workspace, args: dict[str, Any]) -> str:
    """The diff an ``edit_file`` call would make, or one line saying why it would fail."""
    try:
        path, old, new, _ = _planned_edit(workspace, args)
    except ToolFailed as exc:
        return f"(this edit would fail: {exc.message.splitlines()[0]})"
    return unified_diff(old, new, workspace.relative(path))


def preview_write(workspace: Workspace, args: dict[str, Any]) -> str:
    """The diff a ``write_file`` call would make, or one line saying why it would fail."""
    try:
        path = workspace.resolve(str(args.get("path", "")))
        shown = workspace.relative(path)
        place = workspace.where(path)
        old = read_text(place, shown) if exists(place) else ""
    except ToolFailed as exc:
        return f"(this write would fail: {exc.message.splitlines()[0]})"
    return unified_diff(old, str(args.get("content", "")), shown)


def _change_summary(verb: str, shown: str, old: str, new: str, existed: bool) -> str:
    count = new.count("\n") + (1 if new and not new.endswith("\n") else 0)
    lines = f"{count} line" + ("" if count == 1 else "s")
    if not existed:
        size = len(new.encode("utf-8"))
        return f"Created {shown} ({lines}, {size} byte{'' if size == 1 else 's'})."
    if old == new:
        return f"{shown} unchanged: the new content is identical."
    added, removed = diff_counts(unified_diff(old, new, shown))
    return f"{verb} {shown}: +{added} -{removed} ({lines} now)."


# ------------------------------------------------------------------------ tools


async def read_file(ctx: RunContext[ToolDeps], path: str, offset: int = 1, limit: int | None = None) -> str:
    """Read a text file, returning numbered lines (number, tab, text).

    Args:
        path: File path, relative to the workspace root or absolute.
        offset: First line to return (1-based).
        limit: Number of lines to return; all remaining lines when omitted.
    """
    workspace: Workspace = ctx.deps.workspace
    resolved = workspace.resolve(path, must_exist=True)
    shown = workspace.relative(resolved)
    place = workspace.where(resolved)
    if offset < 1:
        raise ToolFailed("offset is 1-based; use 1 for the first line.")
    if limit is not None and limit < 1:
        raise ToolFailed("limit must be at least 1.")
    cap = ctx.deps.settings.read_max_bytes
    editor = editor_of(ctx)
    if editor is not None and editor.can_read:
        # the editor is asked for the lines wanted only (one more, to know whether more follow)
        wanted = (limit if limit is not None else EDITOR_READ_LINES) + 1
        text = await editor.read(resolved, line=offset, limit=wanted) or ""
        return numbered_editor_text(text, shown, offset, wanted - 1, cap)
    try:
        with open_regular(place, shown) as binary:
            return _numbered_lines(binary, shown, offset, limit, cap)
    except IsADirectoryError:
        raise ToolFailed(f"{shown} is a directory; use list_dir to see what is in it.") from None
    except OSError as exc:
        raise ToolFailed(f"Cannot read {shown}: {exc.strerror or exc}.") from exc


def _numbered_lines(binary: BinaryIO, shown: str, offset: int, limit: int | None, cap: int) -> str:
    """Lines ``offset``.. of the open file, numbered; at most ``cap`` characters of output.

    The read stops at the size the file had when it was opened and never holds more than
    one cut line (``MAX_LINE_CHARS``) at a time, whatever the file holds.
    """
    size = os.fstat(binary.fileno()).st_size
    ranged = offset > 1 or limit is not None
    if size > cap and not ranged:
        raise ToolFailed(
            f"{shown} is {size:,} bytes, over the {cap:,}-byte read limit; read part of it with offset and limit."
        )
    if is_binary(binary.read(BINARY_SNIFF_BYTES)):
        raise ToolFailed(f"{shown} is a binary file ({size:,} bytes); read_file only shows text.")
    binary.seek(0)
    out: list[str] = []
    used = 0
    number = 0
    stopped_at: int | None = None
    more_note = "(more lines follow; continue with offset={})"
    end = size or cap  # a file that says it is empty (procfs, some FUSE) is read up to the cap
    for number, line in enumerate(bounded_lines(binary, end, MAX_LINE_CHARS * 4), start=1):
        if number < offset:
            continue
        text = line.data.decode("utf-8", "replace")
        if len(text) > MAX_LINE_CHARS or line.rest or not line.rest_known:
            text = text[:MAX_LINE_CHARS] + cut_note(max(0, len(text) - MAX_LINE_CHARS), line)
        entry = f"{number:>6}\t{text}"
        used += len(entry) + 1
        if used > cap and out:
            stopped_at = number
            break
        out.append(entry)
        if limit is not None and number == offset + limit - 1:
            if not line.rest_known:  # do not scan the rest of a huge line only to find the next one
                more_note = "(line {} was cut; any further lines start after it)"
                stopped_at = number + 1
            elif binary.tell() < end:
                stopped_at = number + 1
            break
    if number == 0:
        return f"({shown} is empty)"
    if offset > number:
        raise ToolFailed(f"offset {offset} is past the end of {shown}, which has {number} lines.")
    if stopped_at is not None:
        out.append(more_note.format(stopped_at if "offset" in more_note else number))
    return "\n".join(out)


async def write_file(ctx: RunContext[ToolDeps], path: str, content: str) -> str:
    """Write a whole file, creating it and its parent directories if needed.

    Args:
        path: File path, relative to the workspace root or absolute.
        content: The complete new content of the file.
    """
    workspace: Workspace = ctx.deps.workspace
    resolved = workspace.resolve(path)
    shown = workspace.relative(resolved)
    check_file_write(ctx.deps.settings, resolved, shown)
    existed = exists(workspace.where(resolved))
    old = await read_current(ctx, resolved, shown) if existed else ""
    if old != content or not existed:
        await write_text(ctx, resolved, shown, content)
    summary = _change_summary("Wrote", shown, old, content, existed)
    return summary + await after_edit(ctx, resolved, shown, old if existed else None, content)


async def edit_file(
    ctx: RunContext[ToolDeps],
    path: str,
    old_string: str = "",
    new_string: str = "",
    replace_all: bool = False,
    edits: list[Edit] | None = None,
) -> str:
    """Replace exact text in a file. old_string must occur exactly once unless replace_all is set.

    For several changes to one file, pass ``edits`` instead of old_string/new_string: they
    apply in order, and the file is written only if all of them succeed.

    Args:
        path: File path, relative to the workspace root or absolute.
        old_string: Exact text to replace, including indentation and line breaks.
        new_string: Replacement text.
        replace_all: Replace every occurrence of old_string.
        edits: Several replacements to apply in order (instead of old_string/new_string).
    """
    args: dict[str, Any] = {"path": path, "edits": edits}
    if not edits:
        args.update(old_string=old_string, new_string=new_string, replace_all=replace_all)
    editor = editor_of(ctx)
    if editor is not None and editor.can_read:  # the edit applies to the editor's buffer, not the disk
        resolved = ctx.deps.workspace.resolve(path)
        shown = ctx.deps.workspace.relative(resolved)
        existed = exists(ctx.deps.workspace.where(resolved))
        if existed:
            old = await read_current(ctx, resolved, shown)
            new = apply_edits(old, _edits_from_args(args), shown)
        else:
            resolved, old, new, existed = _planned_edit(ctx.deps.workspace, args)
    else:
        resolved, old, new, existed = _planned_edit(ctx.deps.workspace, args)
    shown = ctx.deps.workspace.relative(resolved)
    check_file_write(ctx.deps.settings, resolved, shown)
    await write_text(ctx, resolved, shown, new)
    summary = _change_summary("Edited", shown, old, new, existed)
    return summary + await after_edit(ctx, resolved, shown, old if existed else None, new)


TOOLS: list[ToolSpec] = [
    ToolSpec("read_file", read_file, "read", "path"),
    ToolSpec("write_file", write_file, "write", "path"),
    ToolSpec("edit_file", edit_file, "write", "path"),
    ToolSpec("list_dir", list_dir, "read", "path"),
    ToolSpec("glob", glob, "read", "pattern"),
]
