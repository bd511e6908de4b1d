"""File reads and writes through the editor (``ketch acp``, a client offering ``fs``): the
file tools see its unsaved buffers and their writes land in its undo history."""

from __future__ import annotations

from pathlib import Path
from typing import Any


class EditorFiles:
    """File reads and writes through the client (its unsaved buffers, its undo history)."""

    def __init__(self, conn: Any, session_id: str, *, read: bool, write: bool) -> None:
        self._conn, self._session_id = conn, session_id
        self.can_read, self.can_write = read, write

    async def read(self, path: Path, *, line: int | None = None, limit: int | None = None) -> str | None:
        if not self.can_read:
            return None
        response = await self._conn.read_text_file(session_id=self._session_id, path=str(path), line=line, limit=limit)
        return response.content

    async def write(self, path: Path, content: str) -> bool:
        if not self.can_write:
            return False
        await self._conn.write_text_file(session_id=self._session_id, path=str(path), content=content)
        return True
