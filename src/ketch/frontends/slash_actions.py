"""Core-side slash commands: what ``/model``, ``/resume``, ``/fork`` … do to the session.

The UI (``ui/slash.py``) shows panels it can build from ``SessionStatus`` itself and hands
every other command here through ``AppConfig.on_command(name, args)``; the text returned
is printed into the transcript. Errors are raised as exceptions with a one-line message
(the UI prints ``/name failed: …``). Commands run between turns: the UI queues them
behind a running turn. It is one thing at this length: the table of what each slash
command does to the session. What a command changes is sent as an operation
(``core.operations``) through ``Session.apply``; nothing here sets the session's attributes.
"""

from __future__ import annotations

import asyncio
import dataclasses
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from ketch.protocol import operations as op
from ketch.protocol.exceptions import ConfigError
from ketch.frontends.slash_background import BackgroundCommandsSlash
from ketch.frontends.slash_extensions import ExtensionCommands
from ketch.sandbox.panel import session_panel_text

MODEL_LIST_TIMEOUT_S = 3.0


def _list_models(conn: Any) -> list[str]:
    """The models a connection lists, or none when it does not answer in time."""
    from ketch.config.presets import ModelListError, fetch_models

    try:
        return list(fetch_models(conn.base_url, conn.wire, conn.api_key, timeout=MODEL_LIST_TIMEOUT_S))
    except ModelListError:
        return []


async def resumed_transcript(session: Any) -> list[Any]:
    """The session's stored conversation as replay items (``ui/replay.py`` prints them)."""
    from ketch.frontends.replay import replay_items

    stored: list[dict[str, Any]] = []
    if session.store is not None:
        try:
            stored = await asyncio.to_thread(session.store.load_events, session.session_id)
        except Exception:  # noqa: BLE001 - without events the results are rebuilt from the messages
            stored = []
    return replay_items(session.session_id, session.messages, stored)


class SlashActions(ExtensionCommands, BackgroundCommandsSlash):
    """Runs the core's slash commands on the live session (``get_session()``)."""

    def __init__(self, get_session: Callable[[], Any], args: Any, cwd: Path) -> None:
        self._get_session = get_session
        self._adhoc: Any = None
        """The ad-hoc ``--base-url`` connection the session started with (kept across switches)."""
        self.args = args
        self.cwd = cwd
        self._handlers: dict[str, Callable[[str], Awaitable[str | None]]] = {
            "model": self.model, "think": self.think, "agent": self.agent, "clear": self.clear,
            "compact": self.compact, "resume": self.resume, "sessions": self.sessions, "fork": self.fork,
            "export": self.export, "memory": self.memory, "skills": self.skills, "mcp": self.mcp,
            "commit": self.commit, "registry": self.registry, "repair": self.repair,
            "sandbox": self.sandbox, "approval": self.approval, "bashes": self.bashes,
        }

    @property
    def session(self) -> Any:
        session = self._get_session()
        if session is None:
            raise ConfigError("the session is still loading")
        return session

    @property
    def names(self) -> frozenset[str]:
        """The commands this table runs (an editor advertises them)."""
        return frozenset(self._handlers)

    async def run(self, name: str, args: str) -> str | None:
        """Run ``/name args``; returns the text to print."""
        handler = self._handlers.get(name)
        if handler is None:
            return f"/{name} is not available here."
        return await handler(args.strip())

    async def choices(self, name: str) -> list[str]:
        """Options for the picker of ``/model``, ``/think``, ``/agent`` and ``/resume``."""
        session = self.session
        if name == "think":
            from ketch.config.settings import THINK_LEVELS

            return list(THINK_LEVELS)
        if name == "agent":
            from ketch.core.agents import agent_names

            return agent_names(session.config)
        if name == "resume":
            rows = await asyncio.to_thread(session.store.list_sessions, str(self.cwd))
            return [_session_line(row) for row in rows if row.id != session.session_id]
        if name == "model":
            return await self._model_choices(session)
        if name == "model-offline":
            return await self._model_choices(session, listed=False)
        return session.background_lines() if name == "bashes" else []

    # -- sandbox and approval modes ------------------------------------------------------
    async def sandbox(self, arg: str) -> str:
        """``/sandbox``: the panel; ``/sandbox MODE``: switch the mode for the session."""
        if not arg:
            return await session_panel_text(self.session)
        try:
            return str(self.session.apply(op.SetSandboxMode(arg.lower())))
        except ValueError as exc:
            raise ConfigError(str(exc)) from None

    async def approval(self, arg: str) -> str:
        """``/approval``: the mode in force; ``/approval MODE``: switch it for the session."""
        from ketch.gate.approval import describe_mode

        session = self.session
        if not arg:
            return f"approval mode: {describe_mode(session.gate.approval)} (shift-tab cycles ask, auto, plan)"
        try:
            return str(session.apply(op.SetApprovalMode(arg.lower())))
        except ValueError as exc:
            raise ConfigError(str(exc)) from None

    # -- model, thinking, agent ---------------------------------------------------------
    async def model(self, arg: str) -> str:
        session = self.session
        if not arg:
            return f"Model: {session.model_ref}"
        conn = await asyncio.to_thread(self._resolve_model, session, arg)
        from ketch.providers.models import build_model

        from ketch.providers.base_url import forgiving_connection
        from ketch.providers.models import model_settings
        from ketch.providers.thinking import thinking_notice

        conn, url_notice = forgiving_connection(conn)
        from ketch.providers.groq import compound_connection, switch_refusal

        if compound_connection(conn):  # it takes none of this session's tools and searches on its own
            raise ValueError(switch_refusal(conn.ref))
        search, search_note = self._search_for(session, conn)
        wire = search.wire if search is not None else conn.wire  # hosted search may need Responses
        profile = search.model_profile() if search is not None else None
        model = await asyncio.to_thread(lambda: build_model(conn, wire, profile=profile))  # may import another SDK module
        old = session.model
        session.apply(op.SetModel(model, conn, search))
        level = session.config.think
        session.apply(op.SetThinking(level, model_settings(level, wire=wire, model=model, conn=conn)))  # the level, honestly, for this model
        await close_model(old)
        notes = [n for n in (url_notice, thinking_notice(level, model, conn, wire), search_note, _online_note(conn)) if n]
        return "\n".join([f"Model: {conn.ref} (the conversation so far is kept)", *notes])

    def _search_for(self, session: Any, conn: Any) -> tuple[Any, str]:
        """The search decision for ``conn`` as the session's start would make it, and a line when
        it differs from the current one (hosted search gained or lost)."""
        current = getattr(session, "web_search", None)
        if current is None:
            return None, ""
        from ketch.websearch.wiring import session_search

        search = session_search(session.config, conn, interactive=current.surface == "tui",
                                flag=bool(getattr(self.args, "web_search", False)), tool_ceiling=session.variant.tools)
        had, has = current.route.native_tool is not None, search.route.native_tool is not None
        if had and not has:
            return search, f"web search: off with this model ({search.route.reason})"
        if has and not had:
            return search, "web search: on, run by the model's provider"
        return search, ""

    def _resolve_model(self, session: Any, ref: str) -> Any:
        conn = session.connection
        name, sep, model_name = ref.partition(":")
        if conn is not None and conn.name == "adhoc" and self._adhoc is None:
            self._adhoc = conn
        if self._adhoc is not None and (name == "adhoc" or (not sep and conn is not None and conn.name == "adhoc")):
            # the ad-hoc --base-url endpoint the session started with: any model on it, from anywhere
            new_name = model_name if sep else ref
            from ketch.config.limits import limit_fields

            return dataclasses.replace(self._adhoc, model_name=new_name, meta=session.config.models.get(new_name),
                                       **limit_fields(session.config, "adhoc", new_name))  # this model's window
        from ketch.config.settings import resolve_connection

        return resolve_connection(session.config, ref)

    async def _model_choices(self, session: Any, *, listed: bool = True) -> list[str]:
        """The configured models, the session's, and (``listed``: over the network) what every connection lists."""
        config, conn = session.config, session.connection
        if conn is not None and conn.name == "adhoc" and self._adhoc is None:
            self._adhoc = conn
        refs = [session.model_ref, config.model or "", *config.models, *(a.model or "" for a in config.agents.values())]
        connections: dict[str, Any] = {}
        if self._adhoc is not None:
            refs.append(f"adhoc:{self._adhoc.model_name}")
            connections["adhoc"] = self._adhoc
        if conn is not None:
            connections.setdefault(conn.name, conn)
        from ketch.config.settings import resolve_connection

        for name in config.connections:
            if name not in connections:
                try:
                    connections[name] = resolve_connection(config, f"{name}:?")
                except ConfigError:
                    continue  # no key for it, say: the configured models are still offered
        lists = await asyncio.gather(*(asyncio.to_thread(_list_models, c) for c in connections.values() if listed))
        for name, models in zip(connections, lists, strict=listed):
            refs += [f"{name}:{m}" for m in models]
        return list(dict.fromkeys(r for r in refs if r))

    async def think(self, arg: str) -> str:
        from ketch.config.settings import THINK_LEVELS
        from ketch.providers.models import model_settings

        session = self.session
        if not arg:
            return f"Thinking: {session.config.think}"
        level = arg.lower()
        if level not in THINK_LEVELS:
            raise ConfigError(f"unknown thinking level '{arg}'; use one of: {', '.join(THINK_LEVELS)}")
        from ketch.providers.thinking import thinking_notice

        session.apply(op.SetThinking(level, model_settings(level, model=session.model, conn=session.connection)))
        notice = thinking_notice(level, session.model, session.connection)
        return f"Thinking: {level}" + (f"\n{notice}" if notice else "")

    async def agent(self, arg: str) -> str:
        from ketch.core.agents import resolve_agent

        session = self.session
        if not arg:
            return f"Agent: {session.variant.name}"
        variant = resolve_agent(arg, session.config)
        notes = []
        if variant.model and variant.model != session.model_ref:
            notes.append(await self.model(variant.model))
        if variant.think:
            notes.append(await self.think(variant.think))
        session.apply(op.SetAgent(variant))
        head = f"Agent: {variant.name}" + (f" — {variant.description}" if variant.description else "")
        return "\n".join([head, *notes])

    # -- conversations ------------------------------------------------------------------
    async def clear(self, arg: str) -> str:
        new_id = self.session.apply(op.Clear(str(self.cwd)))
        return f"New conversation: session {new_id}"

    async def compact(self, arg: str) -> str:
        session = self.session
        compact_now = getattr(session, "compact_now", None)
        if compact_now is None:
            return "Compaction is not available in this build."
        events = await compact_now()
        lines = [_describe_event(e) for e in events]
        lines = [line for line in lines if line]
        return "\n".join(lines) if lines else "Nothing to compact yet."

    async def resume(self, arg: str) -> str:
        session = self.session
        if not arg:
            return "Give a session id: /resume ID (or /resume alone for a picker)."
        wanted = arg.split()[0]
        from ketch.state.store import StoreError

        try:
            row = session.store.get_session(wanted)
        except StoreError as exc:
            raise ConfigError(str(exc)) from None
        if row is None:
            raise ConfigError(f"no session '{wanted}'; list them with /sessions")
        if row.id == session.session_id:
            return f"Already in session {row.id}."
        try:
            messages = await asyncio.to_thread(session.store.load_messages, row.id)
        except StoreError as exc:  # an unreadable history: say so and stay where we are
            raise ConfigError(str(exc)) from None
        session.apply(op.Resume(row.id, tuple(messages)))
        return await resumed_transcript(session)

    async def repair(self, arg: str) -> str:
        """Rewrite the last exchange (the provider keeps rejecting the history with it)."""
        from ketch.state.repair import describe, repair_last_exchange

        session = self.session
        repair = repair_last_exchange(session.messages)
        if repair is None:
            return describe(session.session_id, None)
        session.apply(op.Repair(tuple(repair.messages)))
        return describe(session.session_id, repair)

    async def sessions(self, arg: str) -> str:
        session = self.session
        wanted = arg.strip().lower()
        if wanted not in ("", "all") and not (wanted.isdigit() and int(wanted) > 0):
            return f"/sessions takes a number of sessions or 'all', not '{arg.strip()}'."
        limit = None if wanted == "all" else int(wanted or 20)
        rows = session.store.list_sessions(str(self.cwd), limit=limit)
        if not rows:
            return "No sessions in this directory yet."
        lines = [f"Sessions in {self.cwd} (newest first):"]
        for row in rows:
            mark = "*" if row.id == session.session_id else " "
            lines.append(f"{mark} {_session_line(row)}")
        total = session.store.count_sessions(str(self.cwd)) if limit is not None and len(rows) == limit else len(rows)
        if total > len(rows):
            lines.append(f"Showing the newest {len(rows)} of {total}; /sessions all lists every one.")
        lines.append("Resume one with /resume ID.")
        return "\n".join(lines)

    async def fork(self, arg: str) -> str:
        session = self.session
        old = session.session_id
        new_id = session.apply(op.Fork())
        if new_id is None:
            return "Nothing to fork yet: this conversation has no messages."
        return f"Forked {old} into {new_id}; you are now in the copy ({old} stays as it was)."

    async def export(self, arg: str) -> str:
        session = self.session
        if session.store.is_reserved(session.session_id):
            return "Nothing to export yet: this conversation has no messages."
        fmt = "json" if arg == "json" or arg.endswith(".json") else "md"
        if arg and arg not in ("md", "json"):
            target = Path(arg).expanduser()
            if not target.is_absolute():
                target = self.cwd / target
        else:  # by default outside the repository, where no commit picks it up
            from ketch.config.settings import user_data_dir

            target = user_data_dir() / "exports" / f"ketch-{session.session_id}.{fmt}"
        from ketch.state.export import export_session

        text = export_session(session.store, session.session_id, fmt, ring=getattr(session, "key_ring", None))  # type: ignore[arg-type]
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text, encoding="utf-8")
        return f"Exported session {session.session_id} as {fmt} to {target}"

    # -- what the session knows ---------------------------------------------------------


async def close_model(model: Any) -> None:
    """Close the HTTP client of a model that is no longer used (its connections would
    otherwise be closed by the garbage collector, on whatever loop runs then)."""
    close = getattr(getattr(model, "client", None), "close", None)
    if close is None:
        return
    try:
        await close()
    except Exception:  # noqa: BLE001 - a client that fails to close is no reason to fail
        pass


# -- text -----------------------------------------------------------------------------
def _session_line(row: Any) -> str:
    """'ID  3 h ago  12 msgs  title' for /sessions and the /resume picker."""
    label = row.title or row.model
    return f"{row.id}  {_age(row.updated)}  {row.message_count} msgs  {label}"


def _age(when: float) -> str:
    seconds = max(0, time.time() - when)
    for unit, size in (("d", 86400), ("h", 3600), ("min", 60)):
        if seconds >= size:
            return f"{int(seconds // size)} {unit} ago"
    return "just now"


def _describe_event(event: Any) -> str:
    kind = getattr(event, "type", "")
    if kind == "compacted":
        return f"Compacted: {event.tokens_before:,} → {event.tokens_after:,} tokens" + (f" ({event.stage})" if event.stage else "")
    if kind in ("notice", "error"):
        return str(getattr(event, "text", "") or getattr(event, "message", ""))
    return ""


__all__ = ["SlashActions", "close_model", "resumed_transcript"]


def _online_note(conn: Any) -> str:
    """``/model`` keeps the session's search route: an OpenRouter ``:online`` id is sent without the tag."""
    from ketch.providers.openrouter import is_online, speaks_openrouter

    if speaks_openrouter(conn.preset.name, conn.wire, conn.base_url) and is_online(conn.model_name):
        return ("':online' is not sent: /model keeps this session's web search as it started; "
                "start a new session with this model to search through OpenRouter")
    return ""
