"""File reads and writes through the editor (``ketch acp`` with a client that offers its file
system): reads see its unsaved buffers, writes land in its undo history. The file tools call
these and fall back to the disk when there is no editor (the terminal)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic_ai import RunContext
from pydantic_ai.exceptions import ToolFailed

from ketch.tools.base import ToolDeps
from ketch.tools.disk import MAX_LINE_CHARS, read_text, write_atomic


def editor_of(ctx: RunContext[ToolDeps]) -> Any:
    """The editor's files (``ketch acp`` with a client that offers fs): reads see its unsaved
    buffers and writes land in its undo history. None in the terminal."""
    return ctx.deps.extras.get("editor_fs")


async def read_current(ctx: RunContext[ToolDeps], resolved: Path, shown: str) -> str:
    editor = editor_of(ctx)
    if editor is not None and editor.can_read:
        text = await editor.read(resolved)
        if text is not None:
            return text
    return read_text(ctx.deps.workspace.where(resolved), shown)


async def write_text(ctx: RunContext[ToolDeps], resolved: Path, shown: str, text: str) -> None:
    editor = editor_of(ctx)
    try:
        if editor is not None and editor.can_write and await editor.write(resolved, text):
            return
        write_atomic(ctx.deps.workspace.where(resolved), text, shown)
    except OSError as exc:
        raise ToolFailed(f"Cannot write {shown}: {exc.strerror or exc}.") from exc


EDITOR_READ_LINES = 2000
"""Lines asked of the editor when the model gave no limit (a read from disk is bounded by bytes)."""


def numbered_editor_text(text: str, shown: str, offset: int, limit: int, cap: int) -> str:
    """``read_file`` over the editor's copy of a file: ``text`` is what the editor sent for the
    range asked (the lines from ``offset``, at most ``limit`` and one more), bounded like a
    read from disk."""
    lines = text[: cap * 2].splitlines()
    if not lines:
        if offset > 1:
            raise ToolFailed(f"offset {offset} is past the end of {shown}.")
        return f"({shown} is empty)"
    out: list[str] = []
    used = 0
    for index, line in enumerate(lines[:limit]):
        number = offset + index
        if len(line) > MAX_LINE_CHARS:
            line = line[:MAX_LINE_CHARS] + f" … [{len(line) - MAX_LINE_CHARS} more characters]"
        entry = f"{number:>6}\t{line}"
        used += len(entry) + 1
        if used > cap and out:
            out.append(f"(more lines follow; continue with offset={number})")
            return "\n".join(out)
        out.append(entry)
    if len(lines) > limit:
        out.append(f"(more lines follow; continue with offset={offset + limit})")
    return "\n".join(out)


