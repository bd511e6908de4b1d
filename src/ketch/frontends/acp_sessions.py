"""The sessions of ``ketch acp`` by id: made, loaded, resumed, forked, listed, closed and deleted.

``session/new`` answers from the configuration alone (the id, the modes, the pickers), and the
ketch ``Session`` is built in the background: nothing it needs (the model's SDK, a provider)
can hold the editor up. Every request on a session waits for its build. A new session's row is
written at once, so an editor can load it before its first prompt, from this process or a
later one. A mixin of ``KetchAgent``.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
from datetime import datetime, timezone
from typing import Any

from ketch.frontends.acp_config import Pickers, restore_settings
from ketch.frontends.acp_diffs import EditReview
from ketch.frontends.acp_events import LiveCalls


def warm_imports() -> None:
    """What building a session imports, loaded off the event loop (a worker thread)."""
    import ketch.core.session  # noqa: F401
    import ketch.frontends.assemble  # noqa: F401
    import ketch.providers.models  # noqa: F401


class SessionTable:
    """Sessions by id, with the builds still under way (needs ``KetchAgent``'s attributes)."""

    args: argparse.Namespace
    conn: Any
    client_caps: Any
    sessions: dict[str, Any]
    pickers: dict[str, Pickers]
    building: dict[str, asyncio.Task[Any]]
    reviews: dict[str, EditReview]
    live: dict[str, LiveCalls]

    # ------------------------------------------------------------------ building
    def _session_args(self, cwd: str, extra_dirs: list[str] | None, resume: str | None) -> argparse.Namespace:
        args = argparse.Namespace(**vars(self.args))
        args.cwd = cwd
        args.add_dir = [*getattr(self.args, "add_dir", []), *(extra_dirs or [])]
        args.resume = resume
        args.continue_ = False
        args.prompt = None
        return args

    async def _build(self, args: argparse.Namespace) -> Any:
        from acp import RequestError

        from ketch.protocol.exceptions import ConfigError
        from ketch.frontends.acp_files import EditorFiles
        from ketch.frontends.assemble import build_session

        try:
            session = await build_session(args, interactive=True, titles=True)
        except ConfigError as exc:
            raise RequestError.invalid_params({"message": str(exc)}) from None
        fs = getattr(self.client_caps, "fs", None) if self.client_caps is not None else None
        session.deps.extras["editor_fs"] = EditorFiles(
            self.conn, session.session_id,
            read=bool(getattr(fs, "read_text_file", False)), write=bool(getattr(fs, "write_text_file", False)),
        )
        live = self.live[session.session_id] = LiveCalls()
        if bool(getattr(self.client_caps, "terminal", False)):  # commands run where the editor shows them
            from ketch.frontends.acp_terminal import EditorTerminals

            session.deps.extras["editor_terminal"] = EditorTerminals(self.conn, lambda: session.session_id, live.in_terminal)
        self.sessions[session.session_id] = session
        self.reviews[session.session_id] = EditReview()
        pickers = self.pickers[session.session_id] = Pickers(session, self.args)
        pickers.load_lists(self.conn, lambda: session.session_id)
        return session

    async def _build_new(self, args: argparse.Namespace) -> Any:
        await asyncio.to_thread(warm_imports)
        session = await self._build(args)
        if session.store is not None:
            await asyncio.to_thread(session.store.keep_reserved, session.session_id)
        asyncio.get_running_loop().create_task(self._advertise(session))  # type: ignore[attr-defined]
        return session

    async def _ready(self, session_id: str) -> Any:
        """The session, once built; an error for an id this ketch does not have open."""
        from acp import RequestError

        session = self.sessions.get(session_id)
        if session is not None:
            return session
        task = self.building.get(session_id)
        if task is None:
            raise RequestError.invalid_params({"message": f"no session {session_id} open in this ketch"})
        try:
            return await asyncio.shield(task)
        except RequestError:
            raise
        except Exception as exc:  # noqa: BLE001 - a session that could not be built
            raise RequestError.internal_error({"message": f"session {session_id} could not start: {exc}"}) from None

    async def _open(self, session_id: str, cwd: str, extra_dirs: list[str] | None, mcp_servers: Any) -> Any:
        """An open session, or the stored one built (its mode, model and thinking level restored)."""
        from acp import RequestError

        if not session_id or not session_id.strip():
            raise RequestError.invalid_params({"message": "give the id of a stored ketch session"})
        if session_id in self.sessions or session_id in self.building:
            return await self._ready(session_id)
        args = self._session_args(cwd, extra_dirs, session_id)
        args.acp_mcp_servers = _mcp_servers(mcp_servers)
        self.building[session_id] = asyncio.get_running_loop().create_task(self._build(args))
        try:
            session = await self._ready(session_id)
        finally:
            self.building.pop(session_id, None)  # built (now in sessions) or failed (may be tried again)
        await restore_settings(session, self.pickers[session_id])
        return session

    # ------------------------------------------------------------------ the protocol's methods
    async def new_session(self, cwd: str, mcp_servers: Any = None, additional_directories: list[str] | None = None,
                          **_: Any) -> Any:
        from acp.schema import NewSessionResponse

        from ketch.frontends.acp_config import early_options, settle_quickly
        from ketch.state.store import new_session_id

        args = self._session_args(cwd, additional_directories, None)
        args.acp_mcp_servers = _mcp_servers(mcp_servers)
        config, variant, conn = settle_quickly(args)
        args.new_session_id = session_id = new_session_id()
        self.building[session_id] = asyncio.get_running_loop().create_task(self._build_new(args))
        return NewSessionResponse(session_id=session_id, modes=self._modes(config, variant.name),
                                  config_options=early_options(config, variant, conn))

    async def load_session(self, cwd: str, session_id: str, mcp_servers: Any = None,
                           additional_directories: list[str] | None = None, **_: Any) -> Any:
        from acp.schema import LoadSessionResponse

        session = await self._open(session_id, cwd, additional_directories, mcp_servers)
        await self._replay(session)  # type: ignore[attr-defined]
        await self._send_title(session)
        asyncio.get_running_loop().create_task(self._advertise(session))  # type: ignore[attr-defined]
        return LoadSessionResponse(modes=self._modes(session.config, session.variant.name),
                                   config_options=await self.pickers[session_id].options())

    async def resume_session(self, cwd: str, session_id: str, mcp_servers: Any = None,
                             additional_directories: list[str] | None = None, **_: Any) -> Any:
        from acp.schema import ResumeSessionResponse

        session = await self._open(session_id, cwd, additional_directories, mcp_servers)
        await self._send_title(session)
        asyncio.get_running_loop().create_task(self._advertise(session))  # type: ignore[attr-defined]
        return ResumeSessionResponse(modes=self._modes(session.config, session.variant.name),
                                     config_options=await self.pickers[session_id].options())

    async def list_sessions(self, cursor: str | None = None, cwd: str | None = None, **_: Any) -> Any:
        """The stored sessions holding a message (of ``cwd`` when given), newest first."""
        from acp import RequestError
        from acp.schema import ListSessionsResponse, SessionInfo

        from ketch.state.resume import open_store

        if cursor is not None:
            raise RequestError.invalid_params({"message": "ketch lists every session in one page: no cursor to follow"})
        store = await asyncio.to_thread(open_store)
        try:
            rows = await asyncio.to_thread(store.list_sessions, cwd, None)
        finally:
            store.close()
        return ListSessionsResponse(sessions=[
            SessionInfo(session_id=row.id, cwd=row.cwd, title=row.title or None,
                        updated_at=datetime.fromtimestamp(row.updated, timezone.utc).isoformat())
            for row in rows
        ])

    async def close_session(self, session_id: str, **_: Any) -> Any:
        """Stop the session's work and let it go (it stays stored, and can be loaded again)."""
        from acp.schema import CloseSessionResponse

        session = await self._ready(session_id)
        await self.cancel(session_id)  # type: ignore[attr-defined]
        self.sessions.pop(session_id, None)
        self.building.pop(session_id, None)
        pickers = self.pickers.pop(session_id, None)
        if pickers is not None:
            pickers.cancel()
        with contextlib.suppress(Exception):
            await session.aclose()
        return CloseSessionResponse()

    async def delete_session(self, session_id: str, **_: Any) -> Any:
        """Remove a stored session for good (``session/delete``): closed here first if it is
        open; refused while another ketch holds it open; an id must match exactly."""
        from acp import RequestError
        from acp.schema import DeleteSessionResponse

        from ketch.state.resume import open_store
        from ketch.state.session_lock import acquire
        from ketch.state.store import StoreError

        if session_id in self.sessions or session_id in self.building:
            await self.close_session(session_id)
        store = await asyncio.to_thread(open_store)
        try:
            row = await asyncio.to_thread(store.get_session, session_id)
            if row is None or row.id != session_id:
                raise RequestError.invalid_params({"message": f"no stored ketch session {session_id}"})
            try:
                lock = await asyncio.to_thread(acquire, store.path.parent, session_id)
            except StoreError as exc:  # open in another ketch (the terminal, another editor)
                raise RequestError.invalid_params({"message": str(exc)}) from None
            try:
                await asyncio.to_thread(store.delete_session, session_id)
            finally:
                lock.release()
        finally:
            store.close()
        return DeleteSessionResponse()

    async def fork_session(self, cwd: str, session_id: str, mcp_servers: Any = None,
                           additional_directories: list[str] | None = None, **_: Any) -> Any:
        """A new session holding a copy of a stored one's conversation and settings (``session/fork``,
        as ``--resume ID --fork``); the original is untouched and stays open where it is."""
        from acp import RequestError
        from acp.schema import ForkSessionResponse

        from ketch.state.resume import open_store
        from ketch.state.store import StoreError

        if session_id in self.building:  # a new session's row is written once it is built
            await self._ready(session_id)
        store = await asyncio.to_thread(open_store)
        try:
            row = await asyncio.to_thread(store.get_session, session_id)
            if row is None or row.id != session_id:
                raise RequestError.invalid_params({"message": f"no stored ketch session {session_id} to fork"})
            try:
                forked = await asyncio.to_thread(store.fork, session_id)
            except StoreError as exc:
                raise RequestError.invalid_params({"message": str(exc)}) from None
        finally:
            store.close()
        session = await self._open(forked, cwd, additional_directories, mcp_servers)
        await self._send_title(session)
        asyncio.get_running_loop().create_task(self._advertise(session))  # type: ignore[attr-defined]
        return ForkSessionResponse(session_id=forked, modes=self._modes(session.config, session.variant.name),
                                   config_options=await self.pickers[forked].options())

    # ------------------------------------------------------------------ what the editor shows
    def _modes(self, config: Any, current: str) -> Any:
        from acp.schema import SessionMode, SessionModeState

        from ketch.core.agents import BUILTIN_AGENTS

        names = list(dict.fromkeys([*BUILTIN_AGENTS, *(config.agents or {})]))
        return SessionModeState(
            current_mode_id=current,
            available_modes=[SessionMode(id=n, name=n, description=_mode_description(n)) for n in names],
        )

    async def _send_title(self, session: Any) -> None:
        """The session's stored title (as the terminal names it), as a session info update."""
        from acp.schema import SessionInfoUpdate

        row = None
        if session.store is not None and not session.store.is_reserved(session.session_id):
            row = session.store.get_session(session.session_id)
        await self.conn.session_update(session_id=session.session_id, update=SessionInfoUpdate(
            session_update="session_info_update", title=(row.title if row is not None else "") or None))


def _mode_description(name: str) -> str:
    return {"build": "the default: reads, edits and runs commands (asking as configured)",
            "plan": "read-only: explores and plans, changes nothing"}.get(name, "a custom agent from config")


def _mcp_servers(servers: Any) -> dict[str, Any]:
    """The client's MCP servers as ketch config entries (started like configured ones)."""
    out: dict[str, Any] = {}
    for server in servers or []:
        if getattr(server, "command", None):
            out[server.name] = {"command": server.command, "args": list(server.args or []),
                                "env": {e.name: e.value for e in (server.env or [])}}
        elif getattr(server, "url", None):
            out[server.name] = {"url": server.url, "headers": {h.name: h.value for h in (getattr(server, "headers", None) or [])}}
    return out
