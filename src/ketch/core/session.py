"""The agent loop: one turn as an async iterator of typed events.

The session owns the pydantic-ai Agent and translates its stream into ``events.py``
events. Tool approval goes through the SDK's deferred-approval mechanism: a hook holds
every call before its body runs, the gate decides, and a denied call is answered by the
SDK with the reason, never executed. Each finished step is committed to the store
before the next model request.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import itertools
import uuid
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic_ai import Agent, AgentRunResultEvent, RunContext
from pydantic_ai.capabilities import HandleDeferredToolCalls, Hooks, PrepareTools
from pydantic_ai.exceptions import ApprovalRequired, UsageLimitExceeded
from pydantic_ai.messages import (
    FunctionToolCallEvent,
    FunctionToolResultEvent,
    ModelMessage,
    ModelResponse,
    PartDeltaEvent,
    PartStartEvent,
    TextPart,
    TextPartDelta,
    ThinkingPart,
    ThinkingPartDelta,
    ToolReturnPart,
)
from pydantic_ai.tools import DeferredToolRequests, DeferredToolResults, Tool, ToolApproved, ToolDenied
from pydantic_ai.toolsets import FunctionToolset
from pydantic_ai.usage import UsageLimits

from ketch.core import events as ev
from ketch.core.agents import AgentVariant, active_tool_names
from ketch.core.approval import HEADLESS_DENIAL, ApprovalGate, GateDecision
from ketch.core.config import Config, Connection
from ketch.core.errors import describe_run_error
from ketch.core.frontend import SessionStatus
from ketch.providers.pricing import response_cost
from ketch.websearch.wiring import NativeSearchTracker
from ketch.tools.base import ToolDeps, ToolSpec

_END = object()
_NOT_STORED = (ev.TextDelta, ev.ReasoningDelta, ev.ToolOutputChunk)
"""Streaming fragments: the messages hold their content, so the store keeps only the rest."""


def _encodable(value: Any) -> Any:
    """``value`` with every lone surrogate in its strings replaced, or ``value`` itself when it has none.

    Python decodes bytes that are not UTF-8 (a file name, a prompt from argv or stdin) to lone
    surrogates, which no JSON encoder writes: neither the provider request nor the session store
    could take the message. Such bytes are decoded again, the invalid ones becoming U+FFFD."""
    if isinstance(value, str):
        if value.isascii():
            return value
        try:
            value.encode("utf-8")
            return value
        except UnicodeEncodeError:
            pass
        try:
            return value.encode("utf-8", "surrogateescape").decode("utf-8", "replace")
        except UnicodeEncodeError:  # a surrogate that no undecodable byte made
            return value.encode("utf-8", "surrogatepass").decode("utf-8", "replace")
    if type(value) in (list, tuple):
        items = [_encodable(v) for v in value]
        return value if all(a is b for a, b in zip(items, value)) else type(value)(items)
    if type(value) is dict:
        pairs = {k: _encodable(v) for k, v in value.items()}
        return value if all(pairs[k] is v for k, v in value.items()) else pairs
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        changes = {}
        for f in dataclasses.fields(value):
            if f.init:
                old = getattr(value, f.name)
                new = _encodable(old)
                if new is not old:
                    changes[f.name] = new
        return dataclasses.replace(value, **changes) if changes else value
    return value


def _encodable_newest_request(history: list[ModelMessage], sent: list[ModelMessage]) -> None:
    """Make the request about to be sent (the prompt, tool results) encodable, in the run's
    history too; earlier messages went through here already, or came from the provider."""
    if not sent:
        return
    newest = sent[-1]
    clean = _encodable(newest)
    if clean is newest:
        return
    sent[-1] = clean
    if history and history[-1] is newest:
        history[-1] = clean


@dataclass
class TurnState:
    turn_id: str
    text: list[str] = field(default_factory=list)
    compacted: bool = False
    delivered: bool = False
    """Whether any output of this turn reached the front end (no silent retries after)."""


class Session:
    """One conversation. Front ends use only ``run_turn``, ``decide``, ``answer``,
    ``interrupt_command``, ``cancel_turn`` and ``status`` (see ``frontend.SessionLike``)."""

    def __init__(
        self,
        *,
        config: Config,
        connection: Connection | None,
        model: Any,
        workspace: Any,
        specs: Sequence[ToolSpec],
        variant: AgentVariant,
        gate: ApprovalGate,
        interactive: bool,
        deps: ToolDeps,
        instructions: Callable[[list[str]], str],
        store: Any = None,
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
    ) -> None:
        self.config = config
        self.connection = connection
        self.model = model
        self.workspace = workspace
        self.specs = {s.name: s for s in specs}
        self.kinds: dict[str, str] = {s.name: s.kind for s in specs} | dict(extra_kinds or {})
        self.variant = variant
        self.gate = gate
        self.interactive = interactive
        self.deps = deps
        self.instructions_for = instructions
        self.store = store
        self.session_id = session_id or uuid.uuid4().hex[:12]
        self.messages: list[ModelMessage] = list(history or [])
        self.label = label
        self.compactor = compactor
        self._persisted = len(self.messages)
        self.history_rewritten = False
        """Set when the history was rewritten in place (compaction, id repair): store it whole."""
        self._step_events: list[Any] = []
        """Events of the step in progress, stored with its messages (for export)."""
        self.auto_title = False
        """Name the session after its first finished turn (one auxiliary model call); the
        interactive front end turns it on for a new session (``build_session(titles=True)``)."""
        self.title_task: asyncio.Task[str] | None = None
        self.startup_notices: list[str] = []
        self.hooks: Any = None
        """User hooks (``hooks.HookRunner``): told when a prompt is submitted, a tool
        finished and a turn stopped. Refusals before a tool run through the gate."""
        self.mcp_hub: Any = None
        self.web_search: Any = None
        """The session's ``search_wiring.SessionSearch`` (children derive their route from it)."""
        self._searches = NativeSearchTracker()
        self.closers: list[Callable[[], Any]] = []
        self._pending: dict[str, asyncio.Future[Any]] = pending if pending is not None else {}
        """Open requests by id; a subagent shares its parent's, so ``decide`` answers both."""
        self._previews: dict[str, str] = {}
        self._call_args: dict[str, dict[str, Any]] = {}
        self._tasks: set[asyncio.Task[Any]] = set()
        self._background_to = background
        """Where fire-and-forget work goes instead of ``self._tasks``: a subagent hands its
        after-tool hooks to its parent, so the child never waits for them and the parent's
        ``aclose`` does."""
        self._ids = itertools.count(1)
        self._queue: asyncio.Queue[Any] | None = None
        self._task: asyncio.Task[None] | None = None
        self._turn: TurnState | None = None
        self.cost_usd: float | None = 0.0
        self.input_tokens = 0
        self.output_tokens = 0
        self.last_request_tokens = 0
        self._history_estimate: tuple[tuple[int, int], int] = ((0, -1), 0)
        self._instruction_chars: int | None = None
        """Length of the instructions last sent (the status must not rebuild them: that runs git)."""
        self.deps.emit = self._emit
        self.deps.extras.setdefault("ask", self._ask)
        if compactor is not None:
            capabilities = [*capabilities, *compactor.capabilities(self)]
        self.agent = self._build_agent(extra_toolsets, capabilities, model_settings)

    # ------------------------------------------------------------------ wiring
    def _build_agent(self, extra_toolsets: Sequence[Any], capabilities: Sequence[Any], model_settings: Any) -> Agent[ToolDeps, str]:
        tools = [Tool(spec.function, name=spec.name, max_retries=3) for spec in self.specs.values()]
        self._tool_defs = {tool.name: tool.tool_def for tool in tools}
        toolset: FunctionToolset[ToolDeps] = FunctionToolset(tools)
        hooks: Hooks[ToolDeps] = Hooks()
        hooks.on.before_tool_execute(self._gate_hook)
        hooks.on.before_model_request(self._before_request)
        hooks.on.after_model_request(self._after_request)
        return Agent(
            self.model,
            deps_type=ToolDeps,
            instructions=self._instructions,
            toolsets=[toolset, *extra_toolsets],
            model_settings=model_settings,
            capabilities=[
                hooks,
                HandleDeferredToolCalls(handler=self._handle_deferred),
                PrepareTools(self._prepare_tools),
                *capabilities,
            ],
        )

    def active_tools(self) -> list[str]:
        tools_cfg = self.config.tools
        return active_tool_names(
            self.kinds,
            self.variant,
            enabled=tools_cfg.enabled,
            disabled=tools_cfg.disabled,
            interactive=self.interactive,
        )

    def _instructions(self, ctx: RunContext[ToolDeps]) -> str:
        text = self.instructions_for(self.active_tools())
        self._instruction_chars = len(text)
        return text

    async def _prepare_tools(self, ctx: RunContext[ToolDeps], tool_defs: list[Any]) -> list[Any]:
        allowed = set(self.active_tools())
        return [d for d in tool_defs if d.name in allowed]

    # ------------------------------------------------------------------ events
    def _emit(self, event: Any) -> None:
        if self._queue is None:
            return
        if not isinstance(event, _NOT_STORED):  # (streamed fragments are valid text, and many)
            event = _encodable(event)  # a file name that is not UTF-8 in a tool summary, say
        if self._turn is not None and not event.turn_id:
            event = dataclasses.replace(event, session_id=self.session_id, turn_id=self._turn.turn_id, agent=event.agent or self.label)
        if isinstance(event, (ev.TextDelta, ev.ToolCallStarted, ev.ReasoningDelta)) and self._turn is not None:
            self._turn.delivered = True
        if self.store is not None and not isinstance(event, _NOT_STORED):
            self._step_events.append(event)
        self._queue.put_nowait(event)

    def _next_id(self, prefix: str) -> str:
        return f"{prefix}-{self.session_id}-{next(self._ids)}"

    # ------------------------------------------------------------------ approval
    async def _gate_hook(self, ctx: RunContext[ToolDeps], *, call: Any, tool_def: Any, args: Any) -> Any:
        if ctx.tool_call_approved:
            return args
        call_args = call.args_as_dict()
        preview = self._preview(call.tool_name, call_args)
        if preview:
            self._previews[call.tool_call_id] = preview
        decision = await self.gate.evaluate(call.tool_name, call_args)
        if decision.action == "allow":
            if decision.by in ("rule", "yolo"):
                self._resolved(call, "allow", decision)
            return args
        raise ApprovalRequired({"action": decision.action, "by": decision.by, "reason": decision.reason, "rule": decision.rule})

    def _preview(self, name: str, args: dict[str, Any]) -> str:
        if name == "shell":
            return str(args.get("command", ""))
        if name in ("write_file", "edit_file"):
            try:
                from ketch.tools import files

                return files.preview_write(self.workspace, args) if name == "write_file" else files.preview_edit(self.workspace, args)
            except Exception as exc:  # noqa: BLE001 - a preview must never break the gate
                return f"(no preview: {exc})"
        return ""

    def _resolved(self, call: Any, decision: str, gd: GateDecision | None, *, by: str | None = None, reason: str = "") -> None:
        self._emit(
            ev.ApprovalResolved(
                call_id=call.tool_call_id,
                name=call.tool_name,
                decision=decision,  # type: ignore[arg-type]
                by=(by or (gd.by if gd else "user")),  # type: ignore[arg-type]
                reason=reason or (gd.reason if gd else ""),
                rule=gd.rule if gd else "",
            )
        )

    async def _handle_deferred(self, ctx: RunContext[ToolDeps], requests: DeferredToolRequests) -> DeferredToolResults:
        approvals: dict[str, Any] = {}
        asked = False
        for call in requests.approvals:
            meta = requests.metadata.get(call.tool_call_id) or {}
            gd = GateDecision(meta.get("action", "ask"), meta.get("by", "default"), meta.get("reason", ""), meta.get("rule", ""))
            if gd.action == "deny":
                approvals[call.tool_call_id] = ToolDenied(gd.reason)
                self._resolved(call, "deny", gd)
            elif not self.interactive:
                approvals[call.tool_call_id] = ToolDenied(HEADLESS_DENIAL)
                self._resolved(call, "deny", gd, by="default", reason=HEADLESS_DENIAL)
            else:
                if not asked:
                    asked = True
                    self._record_pending(ctx, requests.approvals)
                approvals[call.tool_call_id] = await self._ask_user(call)
        if asked and self.store is not None:
            self.store.set_pending(self.session_id, None)
        return DeferredToolResults(approvals=approvals)

    async def _ask_user(self, call: Any) -> Any:
        request_id = self._next_id("approval")
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._pending[request_id] = future  # registered before the request is visible
        args = call.args_as_dict()
        self._emit(
            ev.ApprovalRequested(
                request_id=request_id,
                call_id=call.tool_call_id,
                name=call.tool_name,
                args=args,
                preview=self._previews.get(call.tool_call_id, ""),
            )
        )
        decision, reason = await future
        self._resolved(call, decision, None, by="user", reason=reason)
        if decision == "deny":
            return ToolDenied(f"The user denied this call{': ' + reason if reason else '.'}")
        if decision == "allow_session":
            self.gate.allow_for_session(call.tool_name, args)
        return ToolApproved()

    def decide(self, request_id: str, decision: str, reason: str = "") -> None:
        future = self._pending.pop(request_id, None)
        if future is not None and not future.done():
            future.set_result((decision, reason))

    async def _ask(self, call_id: str, question: str, choices: list[str]) -> str:
        request_id = self._next_id("ask")
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._pending[request_id] = future
        self._emit(ev.AskRequested(request_id=request_id, call_id=call_id, question=question, choices=choices))
        return str(await future)

    def answer(self, request_id: str, text: str) -> None:
        future = self._pending.pop(request_id, None)
        if future is not None and not future.done():
            future.set_result(text)

    # ------------------------------------------------------------------ per request
    async def _before_request(self, ctx: RunContext[ToolDeps], request_context: Any) -> Any:
        if self.compactor is not None:
            request_context = await self.compactor.before_request(self, ctx, request_context)
        _encodable_newest_request(ctx.messages, request_context.messages)
        self._persist(list(ctx.messages))
        return request_context

    async def _after_request(self, ctx: RunContext[ToolDeps], *, request_context: Any, response: ModelResponse) -> ModelResponse:
        usage = response.usage
        cost = response_cost(response)
        self.input_tokens += usage.input_tokens or 0
        self.output_tokens += usage.output_tokens or 0
        self.last_request_tokens = (usage.input_tokens or 0) + (usage.output_tokens or 0)
        if cost is None:
            self.cost_usd = None
        elif self.cost_usd is not None:
            self.cost_usd += cost
        self._emit(
            ev.Usage(
                input_tokens=usage.input_tokens or 0,
                output_tokens=usage.output_tokens or 0,
                cache_read_tokens=usage.cache_read_tokens or 0,
                cost_usd=cost,
                session_cost_usd=self.cost_usd,
            )
        )
        return response

    def _persist(self, messages: list[ModelMessage]) -> None:
        """Commit every message not yet stored, with the step's events, as one transaction."""
        self.messages = messages
        if self.store is None:
            self._persisted = len(messages)
            self.history_rewritten = False
            return
        events, self._step_events = self._step_events, []
        if self.history_rewritten or len(messages) < self._persisted:
            self.store.replace_history(self.session_id, messages)
            if events:
                self.store.append_step(self.session_id, [], events)
        elif len(messages) > self._persisted or events:
            self.store.append_step(self.session_id, messages[self._persisted :], events)
        self._persisted = len(messages)
        self.history_rewritten = False

    # ------------------------------------------------------------------ resume
    def pending_calls(self) -> list[dict[str, Any]]:
        """Tool calls of the last response that have no result yet (an approval the user never gave)."""
        last = self.messages[-1] if self.messages else None
        if not isinstance(last, ModelResponse):
            return []
        return [{"call_id": c.tool_call_id, "name": c.tool_name, "args": c.args_as_dict()} for c in last.tool_calls]

    def has_pending(self) -> bool:
        """Whether the history ends in unanswered tool calls: call ``resume_pending`` before a new turn."""
        return bool(self.pending_calls())

    def resume_pending(self) -> AsyncIterator[ev.AgentEvent]:
        """Process the calls left open when the session was closed: they go through the gate again
        (an ``ApprovalRequested`` when interactive), then the model continues. Events as ``run_turn``."""
        return self.run_turn(None)

    def _record_pending(self, ctx: RunContext[ToolDeps], calls: Sequence[Any]) -> None:
        """Before asking the user, commit the response holding ``calls`` and note them as pending."""
        if self.store is None:
            return
        self._persist(list(ctx.messages))
        self.store.set_pending(
            self.session_id, [{"call_id": c.tool_call_id, "name": c.tool_name, "args": c.args_as_dict()} for c in calls]
        )

    def _close_open_calls(self) -> None:
        """A new prompt on a history ending in open calls: mark that response interrupted, so the
        SDK answers its calls with its standard "interrupted" result instead of leaving them dangling."""
        import dataclasses

        if self.has_pending():
            self.messages = [*self.messages[:-1], dataclasses.replace(self.messages[-1], state="interrupted")]

    async def _make_title(self, prompt: str, session_id: str) -> str:
        """Name session ``session_id`` from its first prompt; any failure leaves it untitled.
        (The id is taken when the turn ends: ``/clear`` may switch sessions before the title comes.)"""
        from ketch.state.titles import generate_title

        try:
            title = await asyncio.wait_for(generate_title(self.model, prompt), 60)
            if title and self.store is not None:
                self.store.set_title(session_id, title)
            return title
        except Exception:  # noqa: BLE001 - a title is a nicety, never an error
            return ""

    # ------------------------------------------------------------------ the turn
    async def run_turn(self, prompt: str | None) -> AsyncIterator[ev.AgentEvent]:
        if self._task is not None and not self._task.done():
            raise RuntimeError("a turn is already running")
        self._queue = asyncio.Queue()
        self._turn = TurnState(turn_id=uuid.uuid4().hex[:8])
        self._task = asyncio.create_task(self._drive(prompt))
        try:
            while True:
                item = await self._queue.get()
                if item is _END:
                    break
                yield item
        finally:
            if self._task is not None and not self._task.done():
                self._task.cancel()
                with contextlib.suppress(BaseException):
                    await self._task

    async def _drive(self, prompt: str | None) -> None:
        assert self._queue is not None and self._turn is not None
        turn = self._turn
        self._emit(ev.TurnStarted(prompt=prompt or "", model=self.model_ref))
        for notice in self.startup_notices:
            self._emit(ev.Notice(level="warning", text=notice))
        self.startup_notices.clear()
        if self.hooks is not None and prompt is not None:
            await self.hooks.prompt_submitted(prompt)
        reason = "done"
        try:
            await self._stream(prompt, turn)
        except asyncio.CancelledError:
            reason = "cancelled"
            self._cancel_pending()
        except UsageLimitExceeded:
            reason = "step_limit"
            self._emit(ev.Notice(level="warning", text=f"Stopped after {self.config.max_steps} model requests (the step limit)."))
        except Exception as exc:  # noqa: BLE001 - every failure becomes one error event
            reason = "error"
            kind, message, retryable = describe_run_error(exc, self.connection)
            self._emit(ev.Error(kind=kind, message=message, retryable=retryable))
        finally:
            if self.hooks is not None:
                with contextlib.suppress(Exception):
                    await asyncio.shield(self.hooks.turn_stopped(reason))
            self._emit(ev.TurnFinished(reason=reason, text="".join(turn.text)))  # type: ignore[arg-type]
            with contextlib.suppress(Exception):
                self._persist(self.messages)  # the events after the last step
            if self.auto_title and reason == "done" and prompt:
                self.auto_title = False
                self.title_task = asyncio.get_running_loop().create_task(self._make_title(prompt, self.session_id))
                self._tasks.add(self.title_task)
                self.title_task.add_done_callback(self._tasks.discard)
            self._queue.put_nowait(_END)

    async def _stream(self, prompt: str | None, turn: TurnState) -> None:
        limits = UsageLimits(request_limit=self.config.max_steps)
        if prompt is not None:
            self._close_open_calls()
        async with self.agent.run_stream_events(prompt, message_history=self.messages, deps=self.deps, usage_limits=limits) as stream:
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

    def _translate(self, item: Any, turn: TurnState) -> None:
        if self._searches.starts_call(item):
            turn.text.clear()  # text before a hosted search is not the answer
        if (found := self._searches.observe(item)) is not None:
            self._emit(found)
            return
        if isinstance(item, PartStartEvent):
            if isinstance(item.part, TextPart) and item.part.content:
                turn.text.append(item.part.content)
                self._emit(ev.TextDelta(text=item.part.content))
            elif isinstance(item.part, ThinkingPart) and item.part.content:
                self._emit(ev.ReasoningDelta(text=item.part.content))
        elif isinstance(item, PartDeltaEvent):
            delta = item.delta
            if isinstance(delta, TextPartDelta) and delta.content_delta:
                turn.text.append(delta.content_delta)
                self._emit(ev.TextDelta(text=delta.content_delta))
            elif isinstance(delta, ThinkingPartDelta) and delta.content_delta:
                self._emit(ev.ReasoningDelta(text=delta.content_delta))
        elif isinstance(item, FunctionToolCallEvent):
            turn.text.clear()  # the final answer is the text after the last tool call
            args = item.part.args_as_dict()
            self._call_args[item.part.tool_call_id] = args
            self._emit(ev.ToolCallStarted(call_id=item.part.tool_call_id, name=item.part.tool_name, args=args))
        elif isinstance(item, FunctionToolResultEvent):
            part = item.part
            is_error = not isinstance(part, ToolReturnPart) or part.outcome != "success"
            if isinstance(part.content, str):
                content = part.content
            elif isinstance(part, ToolReturnPart):
                content = part.model_response_str()
            else:
                content = part.model_response()
            args = self._call_args.pop(part.tool_call_id, {})
            denied = isinstance(part, ToolReturnPart) and part.outcome == "denied"
            if self.hooks is not None and not denied:  # a denied call never ran
                self._background(self.hooks.after_tool(part.tool_name or "", args, _summarize(content), is_error))
            self._emit(
                ev.ToolCallFinished(
                    call_id=part.tool_call_id,
                    name=part.tool_name or "",
                    summary=_summarize(content),
                    is_error=is_error,
                    diff="" if is_error else self._previews.pop(part.tool_call_id, ""),
                )
            )

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
    def interrupt_command(self) -> bool:
        processes = self.deps.processes
        if processes is None or not processes.is_running():
            return False
        asyncio.get_running_loop().create_task(processes.interrupt_all())
        return True

    def cancel_turn(self) -> None:
        if self._task is not None and not self._task.done():
            self._task.cancel()

    async def compact_now(self) -> list[ev.AgentEvent]:
        """Force compaction of the stored history (``/compact``, ``ketch -p --compact``)."""
        if self.compactor is None:
            return []
        return await self.compactor.compact_now(self)

    # ------------------------------------------------------------------ switching (slash commands, between turns)
    def _require_idle(self) -> None:
        if self._task is not None and not self._task.done():
            raise RuntimeError("a turn is running; wait for it or press esc first")

    def set_model(self, model: Any, connection: Connection | None) -> None:
        """Send the next requests to ``model`` (``/model``); the history stays."""
        self._require_idle()
        self.model, self.connection = model, connection
        self.agent.model = model

    def set_thinking(self, level: str, settings: Any) -> None:
        """Use thinking ``level`` from the next request on; ``settings`` are its model settings."""
        self._require_idle()
        self.config = self.config.model_copy(update={"think": level})
        self.agent.model_settings = settings

    def set_variant(self, variant: AgentVariant) -> None:
        """Switch the agent variant (``/agent``): tools and instructions follow it."""
        self._require_idle()
        self.variant = variant

    def switch_to(self, session_id: str, history: Sequence[ModelMessage]) -> None:
        """Continue as another stored session (``/clear``, ``/resume``, ``/fork``)."""
        self._require_idle()
        self.session_id = session_id
        self.messages = list(history)
        self._persisted = len(self.messages)
        self._step_events = []
        self.cost_usd = 0.0
        self.input_tokens = self.output_tokens = self.last_request_tokens = 0

    async def aclose(self) -> None:
        while self._tasks:  # a subagent may hand over another hook while the first ones run
            tasks = list(self._tasks)
            await asyncio.gather(*tasks, return_exceptions=True)
            self._tasks.difference_update(tasks)
        for close in reversed(self.closers):
            result = close()
            if asyncio.iscoroutine(result):
                await result
        self.closers.clear()

    @property
    def model_ref(self) -> str:
        return self.connection.ref if self.connection else getattr(self.model, "model_name", str(self.model))

    def status(self) -> SessionStatus:
        notebook = self.deps.extras.get("notebook")
        window = self.compactor.window if self.compactor is not None else 0
        return SessionStatus(
            session_id=self.session_id,
            stored=self.store is None or not self.store.is_reserved(self.session_id),
            model=self.model_ref,
            thinking=self.config.think,
            agent=self.variant.name,
            context_tokens=self.last_request_tokens,
            context_window=window,
            context_used_pct=(100.0 * self.last_request_tokens / window) if window else 0.0,
            cost_usd=self.cost_usd,
            input_tokens=self.input_tokens,
            output_tokens=self.output_tokens,
            cwd=str(Path(self.workspace.root)),
            tools=self.active_tools(),
            todos=notebook.as_dicts() if notebook is not None else [],
            context_parts=self._context_parts(),
        )

    def _context_parts(self) -> dict[str, int]:
        """Estimated tokens of the next request by part, for ``/context``: the instructions
        last sent, the history (estimate kept until it changes) and the tool schemas."""
        from ketch.context.budget import chars_to_tokens, estimate_messages, estimate_tools

        key = (id(self.messages), len(self.messages))
        if self._history_estimate[0] != key:
            self._history_estimate = (key, estimate_messages(self.messages))
        active = self.active_tools()
        parts = {
            "messages": self._history_estimate[1],
            "tool schemas": estimate_tools([self._tool_defs[n] for n in active if n in self._tool_defs]),
        }
        if self._instruction_chars is None:  # nothing sent yet: build them once
            try:
                self._instruction_chars = len(self.instructions_for(active))
            except Exception:  # noqa: BLE001 - a closed store (memory) must not break the status line
                return parts
        parts["instructions"] = chars_to_tokens(self._instruction_chars)
        return parts


def _summarize(content: str, limit: int = 400) -> str:
    text = content.strip()
    return text if len(text) <= limit else text[: limit - 1] + "…"
