"""Edits as an editor reviews them (``ketch acp``): whole-file diffs against the text the
editor holds.

A permission request for ``write_file`` or ``edit_file`` carries the change it would make,
computed against the editor's buffer (read through ``fs/read_text_file`` when the client offers
it, else the file on disk). When an edit has run, its result carries the whole file before and
after, with its location, the "before" taken when the call started.
"""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Any

EDIT_TOOLS = frozenset({"write_file", "edit_file"})


async def current_text(session: Any, path: Path) -> str | None:
    """The file's text as the editor holds it (its unsaved buffer first); None when there is none."""
    from ketch.tools.disk import exists, read_text

    workspace = session.workspace
    place = workspace.where(path)
    if not exists(place):
        return None
    editor = session.deps.extras.get("editor_fs")
    if editor is not None and editor.can_read:
        text = await editor.read(path)
        if text is not None:
            return text
    return read_text(place, workspace.relative(path))


def _target(session: Any, args: dict[str, Any]) -> Path | None:
    """The file an edit call names, inside the workspace jail; None when it names none."""
    from pydantic_ai.exceptions import ToolFailed

    path = args.get("path")
    if not isinstance(path, str) or not path:
        return None
    try:
        return session.workspace.resolve(path)
    except ToolFailed:
        return None


async def planned_change(session: Any, name: str, args: dict[str, Any]) -> tuple[Path, str | None, str] | None:
    """(file, its text now, its text after) for an edit call not yet run; None when it would fail."""
    from pydantic_ai.exceptions import ToolFailed
    from ketch.tools.files import _edits_from_args, apply_edits

    path = _target(session, args) if name in EDIT_TOOLS else None
    if path is None:
        return None
    try:
        old = await current_text(session, path)
        if name == "write_file":
            content = args.get("content")
            return (path, old, content) if isinstance(content, str) else None
        return path, old, apply_edits(old or "", _edits_from_args(args), session.workspace.relative(path))
    except (ToolFailed, OSError):
        return None


class EditReview:
    """The "before" of each edit call of one session, from its start to its result."""

    def __init__(self) -> None:
        self._before: dict[str, tuple[Path, str | None]] = {}

    async def started(self, session: Any, event: Any) -> None:
        path = _target(session, event.args) if event.name in EDIT_TOOLS else None
        if path is not None:
            with contextlib.suppress(Exception):  # unreadable now: the result carries no diff
                self._before[event.call_id] = (path, await current_text(session, path))

    async def finished(self, session: Any, event: Any) -> Any:
        """The whole-file diff of a finished edit, or None (not an edit, failed, unchanged)."""
        import acp

        before = self._before.pop(event.call_id, None)
        if before is None or event.is_error:
            return None
        path, old = before
        try:
            new = await current_text(session, path)
        except Exception:  # noqa: BLE001 - the file went away meanwhile
            return None
        if new is None or new == old:
            return None
        return acp.tool_diff_content(str(path), new, old)


def diff_for_request(change: tuple[Path, str | None, str] | None) -> tuple[list[Any], list[Any]]:
    """(content, locations) of a permission request for an edit."""
    import acp
    from acp.schema import ToolCallLocation

    if change is None:
        return [], []
    path, old, new = change
    return [acp.tool_diff_content(str(path), new, old)], [ToolCallLocation(path=str(path))]
