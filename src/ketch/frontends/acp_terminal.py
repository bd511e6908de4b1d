"""Terminals the editor creates for the shell tool's commands (``ketch acp``, a client that
offers ``terminal``): created, polled, waited for, killed and released through the client, and
shown in the tool call as the terminal itself (live in the editor's panel)."""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Any


class EditorTerminal:
    """One terminal of the editor, running one command."""

    def __init__(self, conn: Any, session_id: str, terminal_id: str) -> None:
        self._conn, self._session_id, self.terminal_id = conn, session_id, terminal_id

    async def output(self) -> str:
        response = await self._conn.terminal_output(session_id=self._session_id, terminal_id=self.terminal_id)
        if not isinstance(response.output, str):
            raise ValueError("the editor's terminal output is not text")
        return response.output

    async def wait_for_exit(self) -> tuple[int | None, str | None]:
        response = await self._conn.wait_for_terminal_exit(session_id=self._session_id, terminal_id=self.terminal_id)
        return response.exit_code, response.signal

    async def kill(self) -> None:
        with contextlib.suppress(Exception):  # gone already: nothing left to kill
            await self._conn.kill_terminal(session_id=self._session_id, terminal_id=self.terminal_id)

    async def release(self) -> None:
        with contextlib.suppress(Exception):
            await self._conn.release_terminal(session_id=self._session_id, terminal_id=self.terminal_id)


class EditorTerminals:
    """Creates the editor's terminals for one session's commands."""

    def __init__(self, conn: Any, session_id: Any, mark: Any) -> None:
        self._conn, self._session_id, self._mark = conn, session_id, mark

    async def create(self, call_id: str, argv: list[str], cwd: Path, output_cap: int) -> EditorTerminal:
        import acp

        sid = self._session_id()
        response = await self._conn.create_terminal(session_id=sid, command=argv[0], args=argv[1:], cwd=str(cwd),
                                                    output_byte_limit=output_cap)
        terminal = EditorTerminal(self._conn, sid, response.terminal_id)
        self._mark(call_id, response.terminal_id)
        await self._conn.session_update(session_id=sid, update=acp.update_tool_call(
            call_id, status="in_progress", content=[acp.tool_terminal_ref(response.terminal_id)]))
        return terminal
