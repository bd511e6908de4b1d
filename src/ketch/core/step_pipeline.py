"""The one ordered per-step pipeline: what shapes each model request and its response, in one
declared order.

A step is one model request and its response. What works on it comes from five packages: the
session itself, ``providers`` (fallback, strict arguments, stream refusal, the server's window, a
cut counted by tokens), ``websearch`` (the hosted tool), ``state`` (key redaction) and ``context``
(the small-window profile, the request retries, calibration). pydantic-ai runs an agent's
capabilities in list order before a request (``before_run``, ``prepare_tools``,
``before_model_request``, ``prepare_model_request``) and in the reverse order after it
(``after_model_request``, ``on_model_request_error``, ``wrap_model_request``). :data:`STAGES` is
the only place that order is written: :func:`in_stage_order` puts a session's capabilities in it
and refuses one no stage names, so a new capability has to be given its place here.

The session's own work is the first stage (:class:`StepPipeline`): before each request its parts
run in :data:`BEFORE_REQUEST` order, each once; after the response, :data:`AFTER_RESPONSE` (last of
all the stages, being first in the list: usage counts the response every other stage let through).
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from ketch.core.encodable import encodable_newest_request
from ketch.protocol import events as ev
from ketch.wire.pricing import response_cost


@dataclasses.dataclass(frozen=True)
class Stage:
    name: str
    kind: str
    """The class name of the capability that fills the stage."""
    why: str


STAGES: tuple[Stage, ...] = (
    Stage("session", "Hooks", "the session's own work: BEFORE_REQUEST, the settled-history cache point, AFTER_RESPONSE; the gate before each tool"),
    Stage("approval", "HandleDeferredToolCalls", "calls the gate held wait for the user's answer"),
    Stage("tool_offer", "PrepareTools", "the tools the agent and model allow this step"),
    Stage("fallback", "ResponsesFallback", "a Responses endpoint that refuses is answered by the Chat wire"),
    Stage("search", "NativeTool", "the hosted web search tool on the wire"),
    Stage("strict_arguments", "StrictToolArguments", "tool arguments that are not strict JSON are refused"),
    Stage("stream_refusal", "StreamRefusalFallback", "a server that cannot stream with tools is asked without streaming"),
    Stage("server_window", "ServerWindowReader", "a local server's context window, read before the first request"),
    Stage("small_window", "SmallWindowProfile", "the compact profile when the window is too small (after the window is read)"),
    Stage("counted_cut", "CutByTokenCount", "an answer that used its whole output cap counts as cut"),
    Stage("redaction", "RedactToolOutput", "the held keys removed from tool output"),
    Stage("item_not_found_retry", "ItemNotFoundRetry", "a lost Responses item: the history resent inline, once a turn"),
    Stage("context_length_retry", "ContextLengthRetry", "too long for the window: pruned harder and sent once more"),
    Stage("calibration", "CalibrationObserver", "the server's own token counts correct the estimate"),
)
"""Every stage of a step, in list order (see the module docstring for which hooks run reversed)."""

BEFORE_REQUEST = ("fit_window", "remind", "cache_marks", "encodable", "record")
"""The session's own work before each request, in this order: prune to the window, add the state
reminder, set the prompt-cache settings, make the newest request encodable, store the step."""
AFTER_RESPONSE = ("usage",)
"""The session's own work after each response: add its tokens and cost, and say so (a ``Usage`` event)."""


def in_stage_order(capabilities: Sequence[Any]) -> list[Any]:
    """``capabilities`` in :data:`STAGES` order (those of one stage as given); a capability of a
    kind no stage names is a programming error, refused loudly rather than placed anywhere."""
    index = {stage.kind: n for n, stage in enumerate(STAGES)}
    unknown = [type(c).__name__ for c in capabilities if type(c).__name__ not in index]
    if unknown:
        raise ValueError(f"capabilities with no stage in core.step_pipeline.STAGES: {', '.join(unknown)}")
    return sorted(capabilities, key=lambda c: index[type(c).__name__])


def stage_names(capabilities: Sequence[Any]) -> list[str]:
    """The stage of each capability, in order (what a session's agent runs, by name)."""
    names = {stage.kind: stage.name for stage in STAGES}
    return [names[type(c).__name__] for c in capabilities]


class StepPipeline:
    """The session's own stage: its work on each request and response, each part once a step, in
    the declared order. Reads and changes the session it belongs to (a part of it, in ``core``)."""

    def __init__(self, session: Any) -> None:
        self.session = session
        self._marks: tuple[Any, dict[str, Any]] = (None, {})
        parts: dict[str, Callable[[Any, Any], Awaitable[Any]]] = {
            "fit_window": self._fit_window, "remind": self._remind, "cache_marks": self._cache_marks,
            "encodable": self._encodable, "record": self._record,
        }
        self.before = tuple((name, parts[name]) for name in BEFORE_REQUEST)

    def capabilities(self, *, before_tool: Callable[..., Any], others: Sequence[Any]) -> list[Any]:
        """The agent's capabilities: this stage's hooks (the gate ``before_tool``), then ``others``
        (the approval handler, the tool offer and every other package's) in stage order."""
        from pydantic_ai.capabilities import Hooks

        from ketch.providers.prompt_cache import mark_settled_history

        hooks: Hooks[Any] = Hooks()
        hooks.on.before_tool_execute(before_tool)
        hooks.on.before_model_request(self.before_request)
        hooks.on.prepare_model_request(mark_settled_history)  # each attempt, after every stage's before_model_request
        hooks.on.after_model_request(self.after_response)
        return in_stage_order([hooks, *others])

    async def before_request(self, ctx: Any, request_context: Any) -> Any:
        for _name, part in self.before:
            request_context = await part(ctx, request_context)
        return request_context

    async def _fit_window(self, ctx: Any, request_context: Any) -> Any:
        session = self.session
        if session.compactor is not None:
            request_context = await session.compactor.before_request(session.context_view, ctx, request_context)
        return request_context

    async def _remind(self, ctx: Any, request_context: Any) -> Any:
        self.session.prefix.remind(ctx.messages, request_context.messages)
        return request_context

    async def _cache_marks(self, ctx: Any, request_context: Any) -> Any:
        if marks := self._cache_settings():
            request_context.model_settings = {**(request_context.model_settings or {}), **marks}
            self._instructions_before_cache_point(request_context)
        return request_context

    async def _encodable(self, ctx: Any, request_context: Any) -> Any:
        encodable_newest_request(ctx.messages, request_context.messages)
        return request_context

    async def _record(self, ctx: Any, request_context: Any) -> Any:
        session = self.session
        if session._turn is not None:
            session._turn.record.live, session._turn.record.prompt_sent = ctx.messages, True
        session._persist(list(ctx.messages))
        return request_context

    def _instructions_before_cache_point(self, request_context: Any) -> None:
        """Our instructions come from a function, so the SDK takes them to vary per request and puts
        no cache point after them; they change only when the user changes what they describe
        (``PrefixKeeper`` reports it), so they are marked as the fixed prefix they are."""
        params = request_context.model_request_parameters
        parts = getattr(params, "instruction_parts", None)
        last = self.session.prefix.last_instructions
        if not parts or not any(p.dynamic and p.content == last for p in parts):
            return
        fixed = [dataclasses.replace(p, dynamic=False) if p.content == last else p for p in parts]
        request_context.model_request_parameters = dataclasses.replace(params, instruction_parts=fixed)

    def _cache_settings(self) -> dict[str, Any]:
        """The prompt-cache settings of this connection and session (``providers.prompt_cache``),
        worked out once per connection and session."""
        session = self.session
        key = (id(session.connection), session.session_id)
        if self._marks[0] != key:
            from ketch.providers.prompt_cache import cache_settings, root_session

            self._marks = (key, cache_settings(session.connection, root_session(session.store, session.session_id)))
        return self._marks[1]

    async def after_response(self, ctx: Any, *, request_context: Any, response: Any) -> Any:
        """``usage``: the response's tokens and cost added to the session's, and a ``Usage`` event."""
        session = self.session
        usage = response.usage
        cost = response_cost(response)
        session._charge(usage, cost)
        session.last_request_tokens = (usage.input_tokens or 0) + (usage.output_tokens or 0)
        session._emit(
            ev.Usage(
                input_tokens=usage.input_tokens or 0,
                output_tokens=usage.output_tokens or 0,
                cache_read_tokens=usage.cache_read_tokens or 0,
                cache_write_tokens=usage.cache_write_tokens or 0,
                cost_usd=cost,
                session_cost_usd=session.cost_usd,
            )
        )
        await asyncio.sleep(0)  # the front end sees the usage before the next step (a cost ceiling stops it there)
        return response


__all__ = ["AFTER_RESPONSE", "BEFORE_REQUEST", "STAGES", "Stage", "StepPipeline", "in_stage_order", "stage_names"]
