"""``ketch acp``: ketch as an Agent Client Protocol agent over stdio, for editors (Zed,
JetBrains, Neovim, Emacs).

One more front end over the event seam: each ACP session is a ketch ``Session`` built by
``build_session`` exactly as the terminal builds it (the same config, trust, guards, rules and
store), and its events become ACP ``session/update`` notifications one to one. Approval goes
through ``session/request_permission`` after ketch's own gate (guards still refuse, rules
still decide without asking). When the client offers ``fs/read_text_file`` and
``fs/write_text_file``, the file tools read and write through the editor, still inside the
workspace jail. stdout carries JSON-RPC only; anything for a person goes to stderr or into
the conversation as a message.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import sys
from pathlib import Path
from typing import Any

from ketch import __version__
from ketch.core import events as ev
from ketch.frontends.acp_events import tool_title, forward

STOP = {"done": "end_turn", "cancelled": "cancelled", "interrupted": "cancelled", "step_limit": "max_turn_requests",
        "max_tokens": "max_tokens", "error": "end_turn", "refused": "refusal"}
ALLOW_ONCE, ALLOW_ALWAYS, REJECT = "allow_once", "allow_always", "reject_once"


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


class KetchAgent:
    """The ACP agent: sessions by id, each a ketch Session."""

    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.conn: Any = None
        self.client_caps: Any = None
        self.sessions: dict[str, Any] = {}
        self._turns: dict[str, asyncio.Task[Any]] = {}
        self._asks: dict[str, set[asyncio.Task[Any]]] = {}

    def on_connect(self, conn: Any) -> None:
        self.conn = conn

    # ------------------------------------------------------------------ lifecycle
    async def initialize(self, protocol_version: int, client_capabilities: Any = None, client_info: Any = None, **_: Any) -> Any:
        from acp import PROTOCOL_VERSION
        from acp.schema import AgentCapabilities, Implementation, InitializeResponse, McpCapabilities, PromptCapabilities

        self.client_caps = client_capabilities
        return InitializeResponse(
            protocol_version=min(protocol_version, PROTOCOL_VERSION),
            agent_capabilities=AgentCapabilities(
                load_session=True,
                prompt_capabilities=PromptCapabilities(image=False, audio=False, embedded_context=True),
                mcp_capabilities=McpCapabilities(http=True, sse=False),
            ),
            agent_info=Implementation(name="ketch", title="ketch", version=__version__),
        )

    async def authenticate(self, method_id: str, **_: Any) -> Any:
        return None

    def _session_args(self, cwd: str, extra_dirs: list[str] | None, resume: str | None) -> argparse.Namespace:
        args = argparse.Namespace(**vars(self.args))
        args.cwd = cwd
        args.add_dir = [*getattr(self.args, "add_dir", []), *(extra_dirs or [])]
        args.resume = resume
        args.continue_ = False
        args.prompt = None
        return args

    async def _build(self, cwd: str, extra_dirs: list[str] | None, mcp_servers: Any, resume: str | None) -> Any:
        from ketch.core.exceptions import ConfigError
        from ketch.frontends.assemble import build_session

        from acp import RequestError

        args = self._session_args(cwd, extra_dirs, resume)
        args.acp_mcp_servers = _mcp_servers(mcp_servers)
        try:
            session = await build_session(args, interactive=True)
        except ConfigError as exc:
            raise RequestError.invalid_params({"message": str(exc)}) from None
        fs = getattr(self.client_caps, "fs", None) if self.client_caps is not None else None
        session.deps.extras["editor_fs"] = EditorFiles(
            self.conn, session.session_id,
            read=bool(getattr(fs, "read_text_file", False)), write=bool(getattr(fs, "write_text_file", False)),
        )
        self.sessions[session.session_id] = session
        return session

    def _modes(self, session: Any) -> Any:
        from acp.schema import SessionMode, SessionModeState

        from ketch.core.agents import BUILTIN_AGENTS

        names = list(dict.fromkeys([*BUILTIN_AGENTS, *(session.config.agents or {})]))
        return SessionModeState(
            current_mode_id=session.variant.name,
            available_modes=[SessionMode(id=n, name=n, description=_mode_description(n)) for n in names],
        )

    async def _config_options(self, session: Any) -> list[Any]:
        """The model and the thinking level, as ACP session config options (the protocol's way to
        pick a model); a model that is not among the choices (an ad-hoc one) is listed first."""
        from acp.schema import SessionConfigOptionSelect, SessionConfigSelectOption

        from ketch.frontends.slash_actions import SlashActions

        actions = SlashActions(lambda: session, self.args, Path(session.workspace.root))
        try:
            models = await actions.choices("model")
        except Exception:  # noqa: BLE001 - a model list that cannot be had leaves the current one
            models = []
        models = list(dict.fromkeys([session.model_ref, *models]))
        levels = await actions.choices("think")
        return [
            SessionConfigOptionSelect(id="model", name="Model", category="model", type="select", current_value=session.model_ref,
                                      options=[SessionConfigSelectOption(value=m, name=m) for m in models]),
            SessionConfigOptionSelect(id="think", name="Thinking", category="thought_level", type="select",
                                      current_value=session.config.think,
                                      options=[SessionConfigSelectOption(value=v, name=v) for v in levels]),
        ]

    async def set_config_option(self, config_id: str, session_id: str, value: str | bool, **_: Any) -> Any:
        from acp import RequestError
        from acp.schema import SetSessionConfigOptionResponse

        from ketch.frontends.slash_actions import SlashActions

        session = self._session(session_id)
        if config_id not in ("model", "think") or not isinstance(value, str):
            raise RequestError.invalid_params({"message": f"ketch has no config option {config_id!r} taking {value!r}"})
        actions = SlashActions(lambda: session, self.args, Path(session.workspace.root))
        try:
            await (actions.model(value) if config_id == "model" else actions.think(value))
        except Exception as exc:  # noqa: BLE001 - an unknown model or level, a turn running
            raise RequestError.invalid_params({"message": str(exc)}) from None
        return SetSessionConfigOptionResponse(config_options=await self._config_options(session))

    async def new_session(self, cwd: str, mcp_servers: Any = None, additional_directories: list[str] | None = None, **_: Any) -> Any:
        from acp.schema import NewSessionResponse

        session = await self._build(cwd, additional_directories, mcp_servers, None)
        asyncio.get_running_loop().create_task(self._advertise(session))
        return NewSessionResponse(session_id=session.session_id, modes=self._modes(session),
                                  config_options=await self._config_options(session))

    async def load_session(self, cwd: str, session_id: str, mcp_servers: Any = None,
                           additional_directories: list[str] | None = None, **_: Any) -> Any:
        from acp import RequestError
        from acp.schema import LoadSessionResponse

        if not session_id or not session_id.strip():
            raise RequestError.invalid_params({"message": "session/load needs the id of a stored ketch session"})
        session = await self._build(cwd, additional_directories, mcp_servers, session_id)
        await self._replay(session)
        asyncio.get_running_loop().create_task(self._advertise(session))
        return LoadSessionResponse(modes=self._modes(session), config_options=await self._config_options(session))

    async def set_session_mode(self, session_id: str, mode_id: str, **_: Any) -> Any:
        from acp import RequestError
        from acp.helpers import update_current_mode

        from ketch.core.agents import resolve_agent

        session = self._session(session_id)
        try:
            session.set_variant(resolve_agent(mode_id, session.config))
        except Exception as exc:  # noqa: BLE001 - an unknown mode, or a turn running
            raise RequestError.invalid_params({"message": str(exc)}) from None
        await self.conn.session_update(session_id=session_id, update=update_current_mode(mode_id))
        return None

    async def cancel(self, session_id: str, **_: Any) -> None:
        session = self.sessions.get(session_id)
        if session is None:
            return
        for task in list(self._asks.get(session_id, ())):
            task.cancel()  # a pending permission request is withdrawn
        session.interrupt_command()
        session.cancel_turn()

    async def close(self) -> None:
        for session in list(self.sessions.values()):
            with contextlib.suppress(Exception):
                await session.aclose()
        self.sessions.clear()

    def _session(self, session_id: str) -> Any:
        from acp import RequestError

        session = self.sessions.get(session_id)
        if session is None:
            raise RequestError.invalid_params({"message": f"no session {session_id} in this ketch"})
        return session

    # ------------------------------------------------------------------ a prompt
    async def prompt(self, session_id: str, prompt: list[Any], **_: Any) -> Any:
        from acp.schema import PromptResponse

        session = self._session(session_id)
        text = _prompt_text(prompt)
        reason = "done"
        if text.startswith("/"):
            reply = await self._slash(session, text)
            if reply is not None:
                await self._say(session_id, reply)
                return PromptResponse(stop_reason="end_turn")
            text = self._expand(session, text)
        async for event in session.run_turn(text):
            await forward(self.conn, session, event, self._ask_in_background)
            if isinstance(event, ev.TurnFinished):
                reason = event.reason
        return PromptResponse(stop_reason=STOP.get(reason, "end_turn"))

    async def _say(self, session_id: str, text: str) -> None:
        from acp import update_agent_message_text

        await self.conn.session_update(session_id=session_id, update=update_agent_message_text(text))

    def _ask_in_background(self, session: Any, event: Any) -> None:
        """The turn's events keep flowing while the client decides (the loop waits on the decision)."""
        task = asyncio.get_running_loop().create_task(self._ask(session, event))
        asks = self._asks.setdefault(session.session_id, set())
        asks.add(task)
        task.add_done_callback(asks.discard)

    async def _ask(self, session: Any, event: Any) -> None:
        import acp
        from acp.schema import PermissionOption, ToolCallUpdate

        if isinstance(event, ev.AskRequested):
            choices = event.choices or ["Yes", "No"]
            options = [PermissionOption(option_id=f"choice-{i}", name=c, kind="allow_once") for i, c in enumerate(choices)]
            call = ToolCallUpdate(tool_call_id=event.call_id, title=event.question, kind="other", status="pending")
        else:
            options = [
                PermissionOption(option_id=ALLOW_ONCE, name="Allow once", kind="allow_once"),
                PermissionOption(option_id=ALLOW_ALWAYS, name=f"Allow {event.name} for this session", kind="allow_always"),
                PermissionOption(option_id=REJECT, name="Reject", kind="reject_once"),
            ]
            why = [acp.tool_content(acp.text_block(f"Why it asks: {event.reason}"))] if event.reason else None
            call = ToolCallUpdate(tool_call_id=event.call_id, title=tool_title(event.name, event.args), status="pending",
                                  raw_input=event.args, content=why)
        try:
            response = await self.conn.request_permission(session_id=session.session_id, tool_call=call, options=options)
        except asyncio.CancelledError:
            _answer(session, event, None)
            raise
        except Exception:  # noqa: BLE001 - a client that cannot answer: the call is denied
            _answer(session, event, None)
            return
        outcome = response.outcome
        _answer(session, event, getattr(outcome, "option_id", None) if getattr(outcome, "outcome", "") == "selected" else None)

    def _commands(self, session: Any) -> Any:
        from ketch.core.config import user_config_dir
        from ketch.extensions.commands import default_registry

        return default_registry(Path(session.workspace.root), user_config_dir())

    async def _slash(self, session: Any, text: str) -> str | None:
        """A slash command the client sent as a prompt: a core command's reply, or None when it
        is a user prompt template (expanded in place) or not a command."""
        from ketch.frontends.slash_actions import SlashActions

        name, _, rest = text[1:].partition(" ")
        actions = SlashActions(lambda: session, self.args, Path(session.workspace.root))
        if name in actions._handlers:  # noqa: SLF001 - the core's own commands
            return await actions.run(name, rest.strip()) or ""
        return None

    def _expand(self, session: Any, text: str) -> str:
        from ketch.extensions.commands import expand_user_command

        name, _, rest = text[1:].partition(" ")
        command = self._commands(session).get(name)
        if command is not None and getattr(command, "template", None) is not None:
            return expand_user_command(command, rest.strip())
        return text

    async def _advertise(self, session: Any) -> None:
        """The slash commands the session runs here, as ACP available commands."""
        from acp.helpers import update_available_commands
        from acp.schema import AvailableCommand, AvailableCommandInput, UnstructuredCommandInput

        from ketch.frontends.slash_actions import SlashActions

        with contextlib.suppress(Exception):
            core = set(SlashActions(lambda: session, self.args, Path(session.workspace.root))._handlers)  # noqa: SLF001
            commands = [
                AvailableCommand(name=c.name, description=c.description,
                                 input=AvailableCommandInput(root=UnstructuredCommandInput(hint=c.args_hint)) if c.args_hint else None)
                for c in self._commands(session).commands
                if c.name in core or c.template is not None
            ]
            await self.conn.session_update(session_id=session.session_id, update=update_available_commands(commands))

    async def _replay(self, session: Any) -> None:
        """A loaded session's history, as the client would have seen it live."""
        from ketch.frontends.acp_replay import replay_updates

        for update in replay_updates(session.messages):
            await self.conn.session_update(session_id=session.session_id, update=update)


def _answer(session: Any, event: Any, option: str | None) -> None:
    if isinstance(event, ev.AskRequested):
        choices = event.choices or ["Yes", "No"]
        index = int(option.split("-", 1)[1]) if option and option.startswith("choice-") else -1
        session.answer(event.request_id, choices[index] if 0 <= index < len(choices) else "(no answer: the request was cancelled)")
        return
    if option == ALLOW_ONCE:
        session.decide(event.request_id, "allow")
    elif option == ALLOW_ALWAYS:
        session.decide(event.request_id, "allow_session")
    else:
        session.decide(event.request_id, "deny", "the user rejected it in the editor" if option == REJECT else "the request was cancelled")


def _mode_description(name: str) -> str:
    return {"build": "the default: reads, edits and runs commands (asking as configured)",
            "plan": "read-only: explores and plans, changes nothing"}.get(name, "a custom agent from config")


def _prompt_text(blocks: list[Any]) -> str:
    parts = []
    for block in blocks:
        kind = getattr(block, "type", "")
        if kind == "text":
            parts.append(block.text)
        elif kind == "resource":
            resource = block.resource
            text = getattr(resource, "text", None)
            if text is not None:
                parts.append(f"<context uri=\"{resource.uri}\">\n{text}\n</context>")
        elif kind == "resource_link":
            parts.append(f"@{block.uri}")
    return "\n".join(parts)


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


def run_acp(args: argparse.Namespace) -> int:
    """Serve ACP on stdin/stdout until the client closes the connection."""
    try:
        import acp
    except ImportError:
        print("ketch: 'ketch acp' needs the agent-client-protocol package: pip install agent-client-protocol", file=sys.stderr)
        return 2

    async def serve() -> None:
        agent = KetchAgent(args)
        try:
            await acp.run_agent(agent)
        finally:
            await agent.close()

    asyncio.run(serve())
    return 0
