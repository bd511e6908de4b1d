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
from ketch.protocol import events as ev
from ketch.frontends.acp_config import Pickers, Settings, send_changes
from ketch.frontends.acp_diffs import EditReview, diff_for_request, planned_change
from ketch.frontends.acp_events import LiveCalls, tool_title, forward
from ketch.frontends.acp_sessions import SessionTable
from ketch.frontends.acp_slash import IN_PLACE, NOT_IN_EDITORS

STOP = {"done": "end_turn", "cancelled": "cancelled", "interrupted": "cancelled", "step_limit": "max_turn_requests",
        "max_tokens": "max_tokens", "error": "end_turn", "refused": "refusal"}
ALLOW_ONCE, ALLOW_ALWAYS, REJECT = "allow_once", "allow_always", "reject_once"


class KetchAgent(SessionTable):
    """The ACP agent: sessions by id, each a ketch Session."""

    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.conn: Any = None
        self.client_caps: Any = None
        self.sessions: dict[str, Any] = {}
        self.pickers: dict[str, Pickers] = {}
        self.building: dict[str, asyncio.Task[Any]] = {}
        self.reviews: dict[str, EditReview] = {}
        self.live: dict[str, LiveCalls] = {}
        self._cancelled_early: set[str] = set()
        self._turns: dict[str, asyncio.Task[Any]] = {}
        self._asks: dict[str, set[asyncio.Task[Any]]] = {}

    def on_connect(self, conn: Any) -> None:
        self.conn = conn

    # ------------------------------------------------------------------ lifecycle
    async def initialize(self, protocol_version: int, client_capabilities: Any = None, client_info: Any = None, **_: Any) -> Any:
        from acp import PROTOCOL_VERSION
        from acp.schema import (
            AgentCapabilities,
            Implementation,
            InitializeResponse,
            McpCapabilities,
            PromptCapabilities,
            SessionCapabilities,
            SessionCloseCapabilities,
            SessionDeleteCapabilities,
            SessionForkCapabilities,
            SessionListCapabilities,
            SessionResumeCapabilities,
        )

        self.client_caps = client_capabilities
        return InitializeResponse(
            auth_methods=self._auth_methods(),
            protocol_version=min(protocol_version, PROTOCOL_VERSION),
            agent_capabilities=AgentCapabilities(
                load_session=True,
                # fork is in the protocol's unstable schema only, where ``sessionCapabilities.fork`` announces it
                session_capabilities=SessionCapabilities(list=SessionListCapabilities(), resume=SessionResumeCapabilities(),
                                                         close=SessionCloseCapabilities(), delete=SessionDeleteCapabilities(),
                                                         fork=SessionForkCapabilities()),
                prompt_capabilities=PromptCapabilities(image=True, audio=False, embedded_context=True),
                mcp_capabilities=McpCapabilities(http=True, sse=False),
            ),
            agent_info=Implementation(name="ketch", title="ketch", version=__version__),
        )

    def _process_config(self) -> Any:
        """The configuration of the directory ketch was started in (authentication is per process)."""
        from ketch.frontends.assemble import config_from_args

        return config_from_args(self.args, Path(getattr(self.args, "cwd", None) or ".").resolve())

    def _auth_methods(self) -> list[Any]:
        from ketch.protocol.exceptions import ConfigError
        from ketch.frontends.acp_auth import auth_methods

        try:
            return auth_methods(self._process_config(), self.args)
        except ConfigError:  # a broken config is reported where a session is made
            return []

    async def authenticate(self, method_id: str, **_: Any) -> Any:
        from acp import RequestError
        from acp.schema import AuthenticateResponse

        from ketch.protocol.exceptions import ConfigError
        from ketch.frontends.acp_auth import check

        try:
            config = self._process_config()
        except ConfigError as exc:
            raise RequestError.invalid_params({"message": str(exc)}) from None
        check(method_id, config, self.args)
        return AuthenticateResponse()

    async def _config_options(self, session: Any) -> list[Any]:
        """The model and the thinking level, as ACP session config options (the protocol's way to
        pick a model); never waits on the network (the lists follow as an update)."""
        return await self.pickers[session.session_id].options()

    async def set_config_option(self, config_id: str, session_id: str, value: str | bool, **_: Any) -> Any:
        from acp import RequestError
        from acp.schema import SetSessionConfigOptionResponse

        session = await self._ready(session_id)
        if config_id not in ("model", "think") or not isinstance(value, str):
            raise RequestError.invalid_params({"message": f"ketch has no config option {config_id!r} taking {value!r}"})
        actions = self.pickers[session_id].actions
        try:
            await (actions.model(value) if config_id == "model" else actions.think(value))
        except Exception as exc:  # noqa: BLE001 - an unknown model or level, a turn running
            raise RequestError.invalid_params({"message": str(exc)}) from None
        return SetSessionConfigOptionResponse(config_options=await self._config_options(session))

    async def set_session_mode(self, session_id: str, mode_id: str, **_: Any) -> Any:
        from acp import RequestError

        session = await self._ready(session_id)
        before = Settings.of(session)
        try:  # as /agent: the agent's own model and thinking level come with it
            await self.pickers[session_id].actions.agent(mode_id)
        except Exception as exc:  # noqa: BLE001 - an unknown mode, or a turn running
            raise RequestError.invalid_params({"message": str(exc)}) from None
        await send_changes(self.conn, session_id, before, self.pickers[session_id])
        return None

    async def cancel(self, session_id: str, **_: Any) -> None:
        session = self.sessions.get(session_id)
        if session is None:  # still being built: the prompt waiting for it ends as cancelled
            if session_id in self.building:
                self._cancelled_early.add(session_id)
            return
        if session_id in self.live:
            self.live[session_id].cancelled = True
        for task in list(self._asks.get(session_id, ())):
            task.cancel()  # a pending permission request is withdrawn
        session.interrupt_command()
        session.cancel_turn()

    async def close(self) -> None:
        for task in self.building.values():
            task.cancel()
        for pickers in self.pickers.values():
            pickers.cancel()
        for session in list(self.sessions.values()):
            with contextlib.suppress(Exception):
                await session.aclose()
        self.sessions.clear()

    # ------------------------------------------------------------------ a prompt
    async def prompt(self, session_id: str, prompt: list[Any], **_: Any) -> Any:
        from acp.schema import PromptResponse

        self._cancelled_early.discard(session_id)
        session = await self._ready(session_id)
        if session_id in self._cancelled_early:
            self._cancelled_early.discard(session_id)
            return PromptResponse(stop_reason="cancelled")
        self.live[session_id].cancelled = False
        from ketch.core.attachments import AttachmentError
        from ketch.frontends.acp_prompt import prompt_text

        try:
            text = await prompt_text(session, prompt)
        except AttachmentError as exc:  # said to the user; the model is not asked
            await self._say(session_id, f"ketch: {exc}")
            return PromptResponse(stop_reason="end_turn")
        reason = "done"
        if text.startswith("/"):
            reply = await self._slash(session, text)
            if reply is not None:
                await self._say(session_id, reply)
                return PromptResponse(stop_reason="end_turn")
            text = self._expand(session, text)
        async for event in session.run_turn(text):
            await forward(self.conn, session, event, self._ask_in_background, self.reviews[session_id], self.live[session_id])
            if isinstance(event, ev.TurnFinished):
                reason = event.reason
        title_task = session.take_title_task()
        if title_task is not None:
            asyncio.get_running_loop().create_task(self._title_when_named(session, title_task))
        return PromptResponse(stop_reason=STOP.get(reason, "end_turn"))

    async def _title_when_named(self, session: Any, task: asyncio.Task[str]) -> None:
        with contextlib.suppress(Exception):
            await task
            await self._send_title(session)

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
            why = [acp.tool_content(acp.text_block(f"Why it asks: {event.reason}"))] if event.reason else []
            diff, locations = diff_for_request(await planned_change(session, event.name, event.args))
            call = ToolCallUpdate(tool_call_id=event.call_id, title=tool_title(event.name, event.args), status="pending",
                                  raw_input=event.args, content=[*diff, *why] or None, locations=locations or None)
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
        from ketch.config.settings import user_config_dir
        from ketch.extensions.commands import default_registry

        return default_registry(Path(session.workspace.root), user_config_dir())

    async def _slash(self, session: Any, text: str) -> str | None:
        """A slash command the client sent as a prompt: a core command's reply, or None when it
        is a user prompt template (expanded in place) or not a command."""
        name, _, rest = text[1:].partition(" ")
        pickers = self.pickers[session.session_id]
        actions = pickers.actions
        if name in NOT_IN_EDITORS:
            return f"/{name} is not available in an editor: open the session from the editor's session list."
        if name not in IN_PLACE and name not in actions.names:  # the core's own commands
            return None
        before = Settings.of(session)
        try:
            if name in IN_PLACE:
                reply = await IN_PLACE[name](session)
                await self._send_title(session)
                return reply
            return await actions.run(name, rest.strip()) or ""
        except Exception as exc:  # noqa: BLE001 - as the terminal prints it: the session goes on
            return f"/{name} failed: {exc}"
        finally:
            await send_changes(self.conn, session.session_id, before, pickers)

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
            core = set(SlashActions(lambda: session, self.args, Path(session.workspace.root)).names) - NOT_IN_EDITORS
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


def route_session_delete(conn: Any, agent: Any) -> None:
    """The SDK knows ``session/delete``'s types (a stable v1 method) but does not route it: the
    route is added to the connection's router; if a later SDK routes it, its own route stays."""
    from acp.meta import AGENT_METHODS
    from acp.router import MessageRouter
    from acp.schema import DeleteSessionRequest
    from acp.utils import normalize_result

    router = getattr(getattr(conn, "_conn", None), "_handler", None)
    if not isinstance(router, MessageRouter):
        raise RuntimeError("the ACP SDK's connection has no router where ketch expects it: session/delete cannot be routed")
    method = AGENT_METHODS["session_delete"]
    if method not in router._requests:  # noqa: SLF001 - the SDK's own table
        router.route_request(method, DeleteSessionRequest, agent, "delete_session", adapt_result=normalize_result)


def run_acp(args: argparse.Namespace) -> int:
    """Serve ACP on stdin/stdout until the client closes the connection."""
    try:
        import acp
    except ImportError:
        print("ketch: 'ketch acp' needs the agent-client-protocol package: pip install agent-client-protocol", file=sys.stderr)
        return 2

    async def serve() -> None:
        from acp.agent.connection import AgentSideConnection
        from acp.core import DEFAULT_STDIO_BUFFER_LIMIT_BYTES
        from acp.stdio import stdio_streams

        agent = KetchAgent(args)
        reader, writer = await stdio_streams(limit=DEFAULT_STDIO_BUFFER_LIMIT_BYTES)
        # as ``acp.run_agent``, plus session/delete; unstable: the SDK routes session/fork only so
        conn = AgentSideConnection(agent, writer, reader, listening=False, use_unstable_protocol=True)
        route_session_delete(conn, agent)
        try:
            await conn.listen()
        finally:
            await asyncio.shield(conn.close())
            await agent.close()

    asyncio.run(serve())
    return 0
