"""The agent loop: one turn as an async iterator of typed events.

The session owns the pydantic-ai Agent and translates its stream into ``events.py``
events. Tool approval goes through the SDK's deferred-approval mechanism: a hook holds
every call before its body runs, the gate decides, and a denied call is answered by the
SDK with the reason, never executed. Each finished step is committed to the store
before the next model request.

It is one thing at this length: a turn's lifecycle (the queue of events, driving the SDK
agent, the ending of every kind) and the agent it drives; the gate bridge, persistence,
stream translation, controls and checkpoints are mixins beside it. What it is made of is in
three objects: its services, built once by the composition root (``session_services``), its
state, which the controls change (``session_state``), and the per-step pipeline whose order is
declared in one place (``step_pipeline``); ``context`` sees it through ``context_view``.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import itertools
import uuid
from collections.abc import AsyncIterator, Callable, Sequence
from pathlib import Path
from typing import Any

from pydantic_ai import Agent, AgentRunResultEvent, RunContext
from pydantic_ai.capabilities import HandleDeferredToolCalls, PrepareTools
from pydantic_ai.exceptions import OutputTokenLimitExceeded, UsageLimitExceeded
from pydantic_ai.messages import ModelMessage
from pydantic_ai.tools import Tool
from pydantic_ai.toolsets import FunctionToolset
from pydantic_ai.usage import UsageLimits

from ketch.protocol import events as ev
from ketch.core import telemetry
from ketch.core.agents import AgentVariant, active_tool_names
from ketch.config.settings import Config, Connection
from ketch.providers.endings import CUT_NOTICE, REFUSED_NOTICE, cut_by_output_limit, refused_by_model
from ketch.providers.errors import describe_run_error
from ketch.core.history_rejection import annotate as annotate_rejection
from ketch.core.prefix_keeper import PrefixKeeper
from ketch.core.encodable import encodable
from ketch.state.redaction import DERIVED_VIEWS, redact_value
from ketch.core.context_view import context_view
from ketch.core.session_approval import ApprovalBridge
from ketch.core.session_background import BackgroundCommands
from ketch.core.session_checkpoints import CheckpointSteps
from ketch.core.session_controls import SessionControls
from ketch.core.session_persist import Persistence
from ketch.core.session_services import SessionServices, service
from ketch.core.session_state import SessionState, Usage, state_field, usage_field
from ketch.core.step_pipeline import StepPipeline
from ketch.state.history_writer import HistoryWriter
from ketch.core.stream_translate import StreamTranslator, TurnState
from ketch.core.tool_brief import OutputTails
from ketch.wire.pricing import price_known
from ketch.websearch.wiring import NativeSearchTracker
from ketch.tools.base import ToolDeps, ToolSpec

_END = object()
_NOT_STORED = (ev.TextDelta, ev.ReasoningDelta, ev.ToolOutputChunk)
"""Streaming fragments: the messages hold their content, so the store keeps only the rest."""


class Session(ApprovalBridge, Persistence, StreamTranslator, SessionControls, CheckpointSteps, BackgroundCommands):
    """One conversation. Front ends use only ``run_turn``, ``decide``, ``answer``,
    ``interrupt_command``, ``cancel_turn``, ``status`` and ``apply`` (see ``frontend.SessionLike``).
    Its services (``core.session_services``) are fixed at construction and read-only here."""

    store = service("store")
    gate = service("gate")
    hooks = service("hooks")
    mcp_hub = service("mcp_hub")
    sandbox = service("sandbox")
    key_ring = service("key_ring")
    live_search = service("live_search")
    claim = service("claim")
    closers = service("closers")
    session_id = state_field("session_id")
    messages = state_field("messages")
    model = state_field("model")
    connection = state_field("connection")
    variant = state_field("variant")
    config = state_field("config")
    web_search = state_field("web_search")
    auto_title = state_field("auto_title")
    input_tokens = usage_field("input_tokens")
    output_tokens = usage_field("output_tokens")
    cache_read_tokens = usage_field("cache_read_tokens")
    cache_write_tokens = usage_field("cache_write_tokens")
    cost_usd = usage_field("cost_usd")
    last_request_tokens = usage_field("last_request_tokens")

    def __init__(
        self,
        *,
        config: Config,
        connection: Connection | None,
        model: Any,
        workspace: Any,
        specs: Sequence[ToolSpec],
        variant: AgentVariant,
        services: SessionServices,
        interactive: bool,
        deps: ToolDeps,
        instructions: Callable[[list[str]], str],
        session_id: str | None = None,
        history: list[ModelMessage] | None = None,
        extra_toolsets: Sequence[Any] = (),
        extra_kinds: dict[str, str] | None = None,
        capabilities: Sequence[Any] = (),
        model_settings: Any = None,
        compactor: Any = None,
        label: str = "",
        pending: dict[str, asyncio.Future[Any]] | None = None,
        background: Callable[[Any], None] | None = None,
        web_search: Any = None,
        auto_title: bool = False,
        notices: Sequence[str] = (),
        history_rewritten: bool = False,
    ) -> None:
        self.services = services
        self.state = SessionState(
            session_id=session_id or uuid.uuid4().hex[:12], messages=list(history or []), model=model, connection=connection,
            variant=variant, config=config, web_search=web_search, auto_title=auto_title,
            usage=Usage(cost_usd=0.0 if price_known(model) else None),
        )
        """What ``/model``, ``/think``, ``/agent``, ``/clear`` and ``/fork`` change (``core.session_state``)."""
        self.workspace = workspace
        self.specs = {s.name: s for s in specs}
        self.kinds: dict[str, str] = {s.name: s.kind for s in specs} | dict(extra_kinds or {})
        self.interactive = interactive
        self.deps = deps
        self.instructions_for = instructions
        self.tool_ceiling: Sequence[str] | None = None
        """The most tools any step offers (the compact profile of a small window narrows them)."""
        if self.messages:
            self.restore_task_list()
        self.label = label
        self.compactor = compactor
        self._writer = HistoryWriter(services.store, self.session_id, self.messages)
        """Keeps the stored history equal to ``messages``, writing only what changed."""
        self.history_rewritten = history_rewritten
        """Set by compaction when it rewrote the history in place (the writer finds the changed rows)."""
        self._step_events: list[Any] = []
        """Events of the step in progress, stored with its messages (for export)."""
        self.title_task: asyncio.Task[str] | None = None
        self.startup_notices: list[str] = list(notices)
        self._searches = NativeSearchTracker()
        self._closed = False
        self._pending: dict[str, asyncio.Future[Any]] = pending if pending is not None else {}
        """Open requests by id; a subagent shares its parent's, so ``decide`` answers both."""
        self._previews: dict[str, str] = {}
        self._call_args: dict[str, dict[str, Any]] = {}
        self._output_tails = OutputTails()
        """The last lines of each running command's live output, for its brief result."""
        self._tasks: set[asyncio.Task[Any]] = set()
        self._background_to = background
        """Where fire-and-forget work goes instead of ``self._tasks``: a subagent hands its
        after-tool hooks to its parent, so the child never waits for them and the parent's
        ``aclose`` does."""
        self._ids = itertools.count(1)
        self._turn: TurnState | None = None
        """The turn in progress, or the last one (None before the first): its queue, task and step."""
        self._history_estimate: tuple[tuple[int, int], int] = ((0, -1), 0)
        self._instruction_chars: int | None = None
        """Length of the instructions last sent (the status must not rebuild them: that runs git)."""
        self.prefix = PrefixKeeper(getattr(instructions, "volatile", None), self._emit)
        """The state reminders and the record of prefix breaks (``core.prefix_keeper``)."""
        if services.background is not None:
            self._attach_background(services.background)
        self.deps.emit = self._emit
        self.deps.extras.setdefault("ask", self._ask)
        self.deps.extras.setdefault("escalate", self._ask_outside_sandbox)
        self.context_view = context_view(self)  # all ``context`` sees of the session (never the session)
        if compactor is not None:
            capabilities = [*capabilities, *compactor.capabilities(self.context_view)]
        self._model_followers = [c for c in [*capabilities, compactor] if callable(getattr(c, "follow_model", None))]
        """Capabilities told of a ``/model`` switch (``follow_model(model, connection)``)."""
        self.pipeline = StepPipeline(self)
        """The session's own per-step work, and the one declared order of every stage (``core.step_pipeline``)."""
        self.agent = self._build_agent(extra_toolsets, capabilities, model_settings)

    # ------------------------------------------------------------------ wiring
    def _build_agent(self, extra_toolsets: Sequence[Any], capabilities: Sequence[Any], model_settings: Any) -> Agent[ToolDeps, str]:
        # Google style named: pydantic-ai's "auto" guesses it per docstring (regexes over each, ~10 ms a
        # start), and every tool's docstring is Google style (tests/test_tool_docstrings.py)
        tools = [Tool(spec.function, name=spec.name, max_retries=3, docstring_format="google") for spec in self.specs.values()]
        self._tool_defs = {tool.name: tool.tool_def for tool in tools}
        toolset: FunctionToolset[ToolDeps] = FunctionToolset(tools)
        return Agent(
            self.model,
            deps_type=ToolDeps,
            instructions=self._instructions,
            toolsets=[toolset, *extra_toolsets],
            model_settings=model_settings,
            capabilities=self.pipeline.capabilities(before_tool=self._gate_hook, others=[
                HandleDeferredToolCalls(handler=self._handle_deferred),
                PrepareTools(self._prepare_tools),
                *capabilities,
            ]),
        )

    def active_tools(self) -> list[str]:
        tools_cfg = self.config.tools
        return active_tool_names(
            self.kinds,
            self.variant,
            enabled=tools_cfg.enabled,
            disabled=tools_cfg.disabled,
            interactive=self.interactive,
            ceiling=self.tool_ceiling,
        )

    def _instructions(self, ctx: RunContext[ToolDeps]) -> str:
        text = self.instructions_for(self.active_tools())
        self._instruction_chars = len(text)
        self.prefix.instructions(text)
        return text

    async def _prepare_tools(self, ctx: RunContext[ToolDeps], tool_defs: list[Any]) -> list[Any]:
        allowed = set(self.active_tools())
        offered = [d for d in tool_defs if d.name in allowed]
        self.prefix.tools([d.name for d in offered])
        return offered

    # ------------------------------------------------------------------ events
    def _emit(self, event: Any, *, deliver: bool = True) -> Any:
        """Stamp ``event`` with the turn, note it for the store, and (unless not ``deliver``)
        hand it to the front end; returns the stamped event."""
        turn = self._turn
        if turn is None:
            return event
        if isinstance(event, ev.ToolOutputChunk):
            self._output_tails.add(event.call_id, event.text, event.stream)
        if not isinstance(event, _NOT_STORED):  # (streamed fragments are valid text, and many)
            event = encodable(event)  # a file name that is not UTF-8 in a tool summary, say
            if self.key_ring is not None and isinstance(event, DERIVED_VIEWS):
                event = redact_value(event, self.key_ring)  # a diff, a preview or a summary of a call
            if isinstance(event, ev.Compacted):
                telemetry.event("ketch.compaction", **{"ketch.stage": event.stage, "ketch.tokens_before": event.tokens_before,
                                                       "ketch.tokens_after": event.tokens_after})
        if not event.turn_id:
            event = dataclasses.replace(event, session_id=self.session_id, turn_id=turn.turn_id, agent=event.agent or self.label)
        if isinstance(event, (ev.TextDelta, ev.ToolCallStarted, ev.ReasoningDelta)):
            turn.delivered = True
        if self.store is not None and not isinstance(event, _NOT_STORED):
            self._step_events.append(event)
        if deliver:
            turn.queue.put_nowait(event)
        return event

    def _with_images(self, prompt: str) -> Any:
        """The prompt with the images it names attached (``core/attachments.py``)."""
        from ketch.core.attachments import user_prompt

        meta = self.config.models.get(self.model_ref)
        accepts = meta.capabilities.get("image_input") if meta is not None else None
        if accepts is None:
            profile = getattr(self.model, "profile", None) or {}
            accepts = bool(profile.get("supports_image_input", True)) if isinstance(profile, dict) else True
        return user_prompt(prompt, Path(self.workspace.root), accepts_images=accepts, model=self.model_ref)

    def _next_id(self, prefix: str) -> str:
        return f"{prefix}-{self.session_id}-{next(self._ids)}"

    # ------------------------------------------------------------------ per request (the rest: core.step_pipeline)
    def _charge(self, usage: Any, cost: float | None) -> None:
        """Add a response's tokens and cost (None: the price is unknown) to this session's totals."""
        self.input_tokens += usage.input_tokens or 0
        self.output_tokens += usage.output_tokens or 0
        self.cache_read_tokens += usage.cache_read_tokens or 0
        self.cache_write_tokens += usage.cache_write_tokens or 0
        if cost is None:
            self.cost_usd = None
        elif self.cost_usd is not None:
            self.cost_usd += cost

    # ------------------------------------------------------------------ the turn
    async def run_turn(self, prompt: str | None) -> AsyncIterator[ev.AgentEvent]:
        if self._turn_running():
            raise RuntimeError("a turn is already running")
        turn = self._turn = TurnState(turn_id=uuid.uuid4().hex[:8])
        turn.task = asyncio.create_task(self._drive(prompt))
        try:
            while True:
                item = await turn.queue.get()
                if item is _END:
                    break
                yield item
        finally:
            if not turn.task.done():
                turn.task.cancel()
                with contextlib.suppress(BaseException):
                    await turn.task

    def _turn_running(self) -> bool:
        turn = self._turn
        return turn is not None and turn.task is not None and not turn.task.done()

    async def _drive(self, prompt: str | None) -> None:
        assert self._turn is not None
        turn = self._turn
        self._emit(ev.TurnStarted(prompt=prompt or "", model=self.model_ref))
        for notice in self.startup_notices:
            self._emit(ev.Notice(level="warning", text=notice))
        self.startup_notices.clear()
        reason = "done"
        span = telemetry.span("ketch.subagent" if self.label else "ketch.turn", **{
            "ketch.session_id": self.session_id, "ketch.turn_id": turn.turn_id, "ketch.agent": self.variant.name,
            "ketch.model": self.model_ref, "ketch.subagent": self.label or None})
        current = span.__enter__()
        tokens_before = (self.input_tokens, self.output_tokens)
        try:  # from here on a cancel (Esc, SIGINT) ends the turn as cancelled, the prompt stored
            if self.hooks is not None and prompt is not None:
                await self.hooks.prompt_submitted(prompt)  # a user's command: it may take a while
            if prompt is not None:
                self._checkpoint_turn_start(prompt)
            await self._stream(prompt, turn)
            if cut_by_output_limit(self.messages):
                reason = "max_tokens"
                self._emit(ev.Notice(level="warning", text=CUT_NOTICE))
            elif refused_by_model(self.messages):
                reason = "refused"
                self._emit(ev.Notice(level="warning", text=REFUSED_NOTICE))
        except asyncio.CancelledError:
            reason = "cancelled"
            self._cancel_pending()
            self._keep_cancelled(prompt, turn)
        except OutputTokenLimitExceeded:  # cut before any answer, or inside a tool call
            reason = "max_tokens"
            self._emit(ev.Notice(level="warning", text=CUT_NOTICE))
        except UsageLimitExceeded:
            reason = "step_limit"
            self._emit(ev.Notice(level="warning", text=f"Stopped after {self.config.max_steps} model requests (the step limit)."))
        except Exception as exc:  # noqa: BLE001 - every failure becomes one error event
            reason = "error"
            annotate_rejection(exc, self.session_id, self.messages)
            kind, message, retryable = describe_run_error(exc, self.connection)
            self._emit(ev.Error(kind=kind, message=message, retryable=retryable))
        finally:
            if current is not None:
                current.set_attributes({"ketch.reason": reason, "ketch.input_tokens": self.input_tokens - tokens_before[0],
                                        "ketch.output_tokens": self.output_tokens - tokens_before[1]})
            span.__exit__(None, None, None)
            with contextlib.suppress(BaseException):
                await asyncio.shield(self._checkpoint_turn_end())
            if self.hooks is not None:  # a second cancel (Esc twice) ends the wait, not the turn's end:
                stopped = asyncio.ensure_future(self.hooks.turn_stopped(reason))
                self._tasks.add(stopped)  # the hook goes on; ``aclose`` waits for it
                stopped.add_done_callback(self._tasks.discard)
                with contextlib.suppress(BaseException):
                    await asyncio.shield(stopped)
            finished = ev.TurnFinished(reason=reason, text="".join(turn.text))  # type: ignore[arg-type]
            turn.queue.put_nowait(self._store_turn_end(finished))
            if self.auto_title and reason == "done" and prompt:
                self.auto_title = False
                self.title_task = asyncio.get_running_loop().create_task(self._make_title(prompt, self.session_id))
                self._tasks.add(self.title_task)
                self.title_task.add_done_callback(self._tasks.discard)
            turn.queue.put_nowait(_END)

    async def _stream(self, prompt: str | None, turn: TurnState) -> None:
        limits = UsageLimits(request_limit=self.config.max_steps)
        if prompt is not None:
            self._close_open_calls()
        user_prompt = self._with_images(prompt) if prompt is not None else None
        async with self.agent.run_stream_events(user_prompt, message_history=self.messages, deps=self.deps, usage_limits=limits) as stream:
            async for item in stream:
                if isinstance(item, AgentRunResultEvent):
                    self._persist(item.result.all_messages())
                    if self.store is not None and prompt is None:
                        self.store.set_pending(self.session_id, None)
                    final = item.result.output
                    if isinstance(final, str) and not turn.text:
                        turn.text.append(final)
                    continue
                self._translate(item, turn)

    def _background(self, coro: Any) -> None:
        """Run a fire-and-forget coroutine (after-tool hooks) without losing its task."""
        if self._background_to is not None:
            self._background_to(coro)
            return
        task = asyncio.get_running_loop().create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def _cancel_pending(self) -> None:
        for future in self._pending.values():
            if not future.done():
                future.cancel()
        self._pending.clear()

    # ------------------------------------------------------------------ front-end controls
    def report_hook_failure(self, text: str) -> None:
        """A user hook that could not do its job (``HookRunner.report``): a warning line in the
        UI and a ``notice`` in stream-json, now inside a turn, else at the next turn's start."""
        if self._turn is not None:
            self._emit(ev.Notice(level="warning", text=text))
        else:
            self.startup_notices.append(text)

    def interrupt_command(self) -> bool:
        processes = self.deps.processes
        if processes is None or not processes.is_running():
            return False
        asyncio.get_running_loop().create_task(processes.interrupt_all())
        return True

    def cancel_turn(self) -> None:
        if self._turn_running():
            self._turn.task.cancel()  # type: ignore[union-attr]

    async def compact_now(self) -> list[ev.AgentEvent]:
        """Force compaction of the stored history (``/compact``, ``ketch -p --compact``)."""
        if self.compactor is None:
            return []
        return await self.compactor.compact_now(self.context_view)

    async def aclose(self) -> None:
        if self._turn_running():  # a front end closing mid-turn:
            task = self._turn.task  # type: ignore[union-attr]
            task.cancel()  # the cancel is stored (prompt, partial answer) before the store closes
            with contextlib.suppress(BaseException):
                await task
        while self._tasks:  # a subagent may hand over another hook while the first ones run
            tasks = list(self._tasks)
            await asyncio.gather(*tasks, return_exceptions=True)
            self._tasks.difference_update(tasks)
        if self._closed:
            return
        self._closed = True
        for close in reversed(self.closers):
            result = close()
            if asyncio.iscoroutine(result):
                await result

    @property
    def model_ref(self) -> str:
        return self.connection.ref if self.connection else getattr(self.model, "model_name", str(self.model))
