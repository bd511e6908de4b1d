"""Context management for a session: the pruning ladder in the loop, and the summary call.

:class:`Compactor` is the session's ``compactor``. Before every model request it estimates
what would be sent (instructions, history, tool schemas) against ``window × threshold`` and,
when that is too much, runs :func:`ketch.context.prune.prune`. The pruned history replaces both the
request's messages and the run's persistent history, so later steps and the store carry the
shorter history rather than pruning the same thing again. The first pruning of a turn is
reported as one :class:`ketch.protocol.events.Compacted`.
The two request retries it installs (a context-length refusal, the Responses 404 item) are in
``request_retries``.

It is one thing, keeping each request inside its window: the limits it resolves, the pruning,
the cut of a new output too big for the window and the output cap all read the same limits and
calibration, so splitting them would pass that state between modules for no gain.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from pydantic_ai.capabilities import AbstractCapability
from pydantic_ai.messages import ModelMessage, ModelResponse

from ketch.context.budget import (
    CHARS_PER_TOKEN,
    DEFAULT_THRESHOLD,
    RunningEstimate,
    estimate_messages,
    estimate_text,
    estimate_tools,
    instruction_text,
    reserved_tokens,
)
from ketch.context.calibration import Calibration, CalibrationObserver
from ketch.context.marks import Marks, marks
from ketch.context.overflow import context_length_counts
from ketch.context.prune import ITEM_REPLAY_PROVIDERS, PruneResult, Summarize, prune
from ketch.context.windows import Limits, assume_unknown, fit_output, known_by_name, limits_for, limits_for_connection
from ketch.protocol import events as ev

if TYPE_CHECKING:
    from ketch.context.session_view import SessionView as Session

SUMMARY_INSTRUCTIONS = (
    "You condense the earlier part of a conversation between a user and a coding agent so the "
    "agent can continue the work without it. Write a compact, factual summary: the user's goals "
    "and requests (the latest one in their own words), decisions made, files read or changed "
    "(with paths), commands run and their outcomes, errors met, and the open threads: what was "
    "still to be done and what the agent was about to do next. Keep identifiers, paths and "
    "numbers exact. When the transcript opens with a summary of what came before it, carry what "
    "still matters from it into yours. Do not address the user and do not add advice."
)
"""Instructions of the auxiliary summary call (stage 3 of the ladder)."""


def model_summarizer(
    model: Any, on_response: Callable[[ModelResponse], None] | None = None, *, max_tokens: int = 4_096
) -> Summarize:
    """A summary call on ``model`` with no tools and no hosted search: a bare agent, asking
    for at most ``max_tokens``.

    ``on_response`` sees each model response of the call (to count its tokens and cost).
    An answer with no text is the empty string, at once: not asked again (a small local model's
    second try is as empty, and slow), not an error (the ladder's own record stands in for it).
    """

    async def summarize(transcript: str) -> str:
        from pydantic_ai import Agent

        agent: Agent[None, str | None] = Agent(
            model, output_type=str | None, instructions=SUMMARY_INSTRUCTIONS, model_settings={"max_tokens": max_tokens}
        )
        result = await agent.run(transcript)
        if on_response is not None:
            for message in result.new_messages():
                if isinstance(message, ModelResponse):
                    on_response(message)
        return result.output or ""

    return summarize


def _charge(session: Session) -> Callable[[ModelResponse], None]:
    """Add an auxiliary response's tokens and cost to the session's totals."""

    def charge(response: ModelResponse) -> None:
        from ketch.wire.pricing import response_cost

        session.charge(response.usage, response_cost(response))

    return charge


SUMMARY_OUTPUT_TOKENS = 4_096
"""``max_tokens`` of the summary call; the ladder keeps at most about 2,000 tokens of it."""

MIN_SUMMARY_OUTPUT_TOKENS = 96
"""The least ``max_tokens`` a summary call asks for, however little of it a small window keeps."""

MIN_SUMMARY_TRANSCRIPT_CHARS = 2_000
"""The least transcript a summary call is given, however small the window: a summary of
nothing (``[older conversation omitted]`` alone) is no summary."""


def summary_output_tokens(limits: Limits, kept: int | None = None) -> int:
    """``max_tokens`` of the summary call: :data:`SUMMARY_OUTPUT_TOKENS`, at most an eighth of a
    small window (at 4k, 512), so the transcript keeps most of the room; with ``kept`` (the
    server's tokens of the most of it that will be kept, in a small window) no more than that."""
    tokens = max(256, min(SUMMARY_OUTPUT_TOKENS, limits.max_output, limits.window // 8))
    return tokens if kept is None else max(MIN_SUMMARY_OUTPUT_TOKENS, min(tokens, kept))


def summary_transcript_chars(limits: Limits, ratio: float = 1.0) -> int:
    """Characters of transcript the summary call may carry: what its window holds beside the
    instructions, the summary's own output and the margin, counted strictly (a provider's
    tokenizer may count a fifth more than ketch's estimate, and ``ratio`` more where the
    server's counts showed it), never less than :data:`MIN_SUMMARY_TRANSCRIPT_CHARS`."""
    room = limits.window - limits.margin - summary_output_tokens(limits) - estimate_text(SUMMARY_INSTRUCTIONS) - 200
    room = min(room, limits.input_limit - limits.margin)
    return max(MIN_SUMMARY_TRANSCRIPT_CHARS, int(room * CHARS_PER_TOKEN * 0.8 / max(1.0, ratio)))


@dataclass
class Compactor:
    """Keeps a session's requests inside its model's window, and sets their ``max_tokens``.

    Args:
        window: The model's context window in tokens, when no ``limits`` are given.
        threshold: Share of the input budget a request may fill before the ladder runs.
        summarize: The stage-3 summary call; by default a bare agent on the session's model.
        inline_native_from: Providers whose native tool items are replayed by id (see prune).
        limits: The model's window, input limit and output reservation (``context.windows``).
        connection: The resolved connection; with it the limits are resolved again from the
            built model's profile at the first request, and when a server reports its window.
    """

    window: int = 0
    threshold: float = DEFAULT_THRESHOLD
    summarize: Summarize | None = None
    inline_native_from: Collection[str] = field(default=ITEM_REPLAY_PROVIDERS)
    limits: Limits | None = None
    connection: Any = None
    server_window: int | None = None
    assumed_window: int | None = None
    """The window assumed for a local server that did not say its own (``assume_window``)."""
    assumed_output: int | None = None
    """The output reservation assumed for such a server."""
    squeeze: float = 1.0
    """Share of the usual prune limit in force after the provider said a request was too long."""
    refit_profile: Any = None
    """Called with the request about to be retried after a too-long refusal (the small-window
    profile's ``refit_after_refusal``, handed in by ``providers.wiring``): a window learned from the
    refusal may call for the compact profile in that very request."""
    calibration: Calibration = field(default_factory=Calibration)
    """The server's prompt counts against ketch's estimates (``context.calibration``)."""
    _last_raw: int = field(default=0, repr=False)
    """ketch's uncorrected estimate of the last request sent."""
    _resolved_for: Any = field(default=None, repr=False)
    _running: RunningEstimate = field(default_factory=RunningEstimate, repr=False)
    _summary_failed: str | None = field(default=None, repr=False)
    """The turn in which a summary call failed (its requests are pruned without one)."""
    _last_estimate: int = field(default=0, repr=False)
    _summary_rest: int = field(default=0, repr=False)
    """Compactions to go before a summary is tried again, after one was written and not kept."""

    def __post_init__(self) -> None:
        if self.limits is None:
            if self.connection is not None:
                self.limits = self._limits_of(self.connection)
            else:
                self.limits = limits_for("", context_window=self.window or None)
        self.window = self.limits.window

    @property
    def limit(self) -> int:
        """Tokens a request's input may hold before pruning."""
        assert self.limits is not None
        return int(self.limits.prune_limit(self.threshold) * self.squeeze)

    def _limits_of(self, connection: Any, model: Any = None) -> Limits:
        """``connection``'s limits, lowered to what is assumed of a server that did not say its window."""
        limits = limits_for_connection(connection, model=model, server_window=self.server_window)
        # A hosted model known by name (a local proxy serves it as it is) keeps its output.
        output = None if known_by_name(connection.model_name, limits) else self.assumed_output
        return assume_unknown(limits, window=self.assumed_window, output=output)

    def use_server_window(self, tokens: int) -> None:
        """Take the window a model server reported (llama.cpp ``/props``, Ollama ``/api/show``)."""
        if tokens > 0:
            self.server_window = tokens
            self.assumed_window = self.assumed_output = None
            self._resolve(self._resolved_for, force=True)

    def assume_window(self, window: int | None = None, output: int | None = None) -> None:
        """A local server did not say its window: size requests for at most ``window`` and ask
        for at most ``output`` (a window from config or a server stays as it is)."""
        self.assumed_window, self.assumed_output = window, output
        if self.connection is not None:
            self._resolve(self._resolved_for, force=True)

    def follow_model(self, model: Any, connection: Any) -> None:
        """Size the next requests for ``connection`` (``/model``): its configured window and
        output, its model's profile and ketch's table, resolved again at the next request. A
        window a server reported is kept only for the same model on the same server."""
        if connection is None or connection is self.connection:
            return
        old = self.connection
        if old is None or (old.base_url, old.model_name) != (connection.base_url, connection.model_name):
            self.server_window = None
            self.assumed_window = self.assumed_output = None
            self.calibration.reset()
        self.connection = connection
        self.limits = self._limits_of(connection)
        self.window = self.limits.window
        self._resolved_for = None

    def _resolve(self, model: Any, *, force: bool = False) -> None:
        if self.connection is None or (model is self._resolved_for and not force):
            return
        self._resolved_for = model
        self.limits = self._limits_of(self.connection, model)
        self.window = self.limits.window

    def capabilities(self, session: Session) -> list[AbstractCapability[Any]]:
        """Capabilities the session's agent needs for context management."""
        from ketch.context.request_retries import ContextLengthRetry, ItemNotFoundRetry

        return [ItemNotFoundRetry(session), ContextLengthRetry(session, self), CalibrationObserver(self)]

    def observe_usage(self, prompt_tokens: int | None) -> None:
        """The prompt tokens the server reported for the last request sent."""
        self.calibration.observe(self._last_raw, prompt_tokens)

    async def _server_count(self, request_context: Any, raw: int) -> None:
        """Where the server counts tokens itself (llama.cpp ``/tokenize``): before the first
        request, and when a request is near the limit, its count of the request's text
        calibrates the estimate (a failure leaves the estimate as it was), until an answer has
        reported the prompt tokens the server counted."""
        if self.calibration.reported:  # the server's own report of what it counted is the truth
            return
        counter = self.calibration.counter_for(getattr(request_context, "model", None))
        if counter is None:
            return
        estimate = self.calibration.scale(raw)
        if self.calibration.observed and abs(estimate - self.limit) > self.limit * 0.1:
            return
        import asyncio

        from ketch.context.calibration import COUNT_TIMEOUT

        try:
            counted = await asyncio.wait_for(counter(instruction_text(request_context), request_context), COUNT_TIMEOUT + 0.5)
        except Exception:  # noqa: BLE001 - a count is a refinement; the estimate stands
            counted = None
        if counted is None:
            self.calibration.failed = True
        self.calibration.observe_asked(raw, counted)

    def _summarizer(self, session: Session, kept: int | None = None) -> Summarize:
        assert self.limits is not None
        turn_id = session.turn_id_now()
        if self._summary_failed is not None and (turn_id is None or self._summary_failed == turn_id):
            return _failed_already  # not again in the same turn: one failed call, one warning
        self._summary_failed = None
        return self.summarize or model_summarizer(
            session.model, _charge(session), max_tokens=summary_output_tokens(self.limits, kept)
        )

    async def _prune(
        self, session: Session, messages: Sequence[ModelMessage], *, limit: int, reserved: int, warn: bool = True,
        summarize_above: int | None = None, marked: Marks | None = None,
    ) -> PruneResult:
        assert self.limits is not None
        # in a small window the summary is sized from the history's room (as the server counts)
        small = marked is not None and marked.small
        result = await prune(
            messages,
            limit=limit,
            reserved=reserved,
            summarize=self._summarizer(session, self.calibration.scale(marked.summary) if small else None),
            inline_native_from=self.inline_native_from,
            summary_chars=summary_transcript_chars(self.limits, self.calibration.ratio),
            summarize_above=summarize_above,
            **({"summary_tokens": marked.summary, "record_first": True} if small else {}),
        )
        if warn and result.summary_error is not None and self._summary_failed is None:
            self._summary_failed = session.turn_id_now() or ""
            session.emit(ev.Notice(
                level="warning",
                text=f"The summary of earlier work could not be written ({result.summary_error}); the stored "
                "history is kept as it was, and requests are shortened by dropping older reasoning and tool output.",
            ))
        if warn and result.summary_empty:
            session.emit(ev.Notice(level="warning", text=EMPTY_SUMMARY_NOTICE))
        return result

    def _set_max_tokens(self, request_context: Any, input_tokens: int) -> None:
        """``max_tokens`` of this request: the reservation, lowered so input plus output fit the
        window, raised to what an Anthropic thinking budget needs."""
        assert self.limits is not None
        settings = dict(request_context.model_settings or {})
        model = request_context.model
        wire = "anthropic-messages" if getattr(model, "system", "") == "anthropic" else ""
        request_context.model_settings = fit_output(self.limits, input_tokens, wire, settings)

    async def before_request(self, session: Session, ctx: Any, request_context: Any) -> Any:
        """Prune the history about to be sent when it would pass the threshold, and set the
        request's ``max_tokens``.

        The result replaces ``request_context.messages`` (this request) and ``ctx.messages``
        (the run's history, so the next step starts from it); the session is told to rewrite
        its stored history. Reports the turn's first pruning as a ``Compacted`` event.
        """
        self._resolve(getattr(request_context, "model", None))
        reserved = reserved_tokens(request_context)
        self._fit_new_output(session, ctx, request_context, reserved)
        raw = self._running.tokens(request_context.messages) + reserved
        await self._server_count(request_context, raw)
        calibration = self.calibration
        estimate = calibration.scale(raw)  # the estimate as the server's counts corrected it
        if estimate <= self.limit:  # the usual step: nothing to prune, and nothing walked twice
            self._last_estimate, self._last_raw = estimate, raw
            self._set_max_tokens(request_context, estimate)
            return request_context
        # Pruned to the low-water mark, so the next steps send an unchanged, growing prefix (and
        # skip the ladder) until the high-water mark, instead of re-pruning, and rewriting, the
        # history every few steps: each compaction is a prefix break, recorded with its cause.
        marked = marks(self.limit, reserved, calibration.unscale)
        resting = self._summary_rest > 0
        self._summary_rest = max(0, self._summary_rest - 1)
        # a summary written and not kept is not tried again for a few requests (the history must
        # grow before another could come out smaller); a mark above everything turns it off
        above = 1 << 60 if resting else marked.summarize_above
        result = await self._prune(session, request_context.messages, limit=marked.low, reserved=reserved,
                                   summarize_above=above, marked=marked)
        if result.summary_refused is not None:
            self._summary_rest = SUMMARY_REST
        self._last_raw = result.tokens_after
        self._last_estimate = calibration.scale(result.tokens_after)
        self._set_max_tokens(request_context, self._last_estimate)
        if not result.changed:
            return request_context
        request_context.messages = list(result.messages)
        if result.summary_error is not None:
            session.note_break(f"compaction ({result.stage}) of this request only: the summary failed")
            return request_context  # this request only: a summary that failed replaces nothing stored
        ctx.messages[:] = result.messages
        session.rewrote_history()
        refused = f"; a summary was written and not kept: {result.summary_refused}" if result.summary_refused else ""
        session.note_break(f"compaction ({result.stage}): {result.tokens_before:,} → {result.tokens_after:,} tokens"
                                  + refused)
        if result.tokens_after < result.tokens_before and session.first_compaction():
            # (a ladder that could take nothing away is not reported as a compaction)
            session.emit(ev.Compacted(tokens_before=result.tokens_before, tokens_after=result.tokens_after, stage=result.stage))
        return request_context

    def _fit_new_output(self, session: Session, ctx: Any, request_context: Any, reserved: int) -> None:
        """Cut the newest tool outputs (which no request has carried yet) to what one output may
        take (``marks``: half the history's room, a quarter in a small window, as the server's
        counts corrected it), head and tail kept, where one alone would take more: in a small
        window, rather than compact every step."""
        from ketch.context.output_fit import fit_new_results

        assert self.limits is not None
        output = marks(self.limit, reserved, self.calibration.unscale).output  # ketch's own tokens, as the plan counts them
        fitted = fit_new_results(request_context.messages, output * CHARS_PER_TOKEN, self.limits.window)
        if fitted is None:
            return
        newest = request_context.messages[-1]
        request_context.messages = fitted
        if ctx is not None and getattr(ctx, "messages", None) and ctx.messages[-1] is newest:
            ctx.messages[-1] = fitted[-1]
            session.rewrote_history()

    async def squeezed(self, session: Session, request_context: Any, error: BaseException) -> None:
        """After the provider rejected a request as too long: lower the limit for the rest of the
        session (to what the error says the provider counted, or by a quarter of what was sent),
        and prune this request's messages to 60 % of what was sent. Only the request changes,
        not the run's history: if the retry fails too, nothing stored is replaced."""
        assert self.limits is not None
        sent = self._last_estimate or self.limit
        counted = context_length_counts(error)
        if counted is not None and counted[0] > 0:
            target = sent * min(1.0, sent / counted[0]) * 0.9
            if counted[1]:
                self.server_window = min(counted[1], self.server_window or counted[1])
                self._resolve(self._resolved_for, force=True)
        else:
            target = sent * 0.75
        base = self.limits.prune_limit(self.threshold)
        if base > 0:
            self.squeeze = max(0.05, min(self.squeeze, target / base))
        reserved = reserved_tokens(request_context)
        result = await self._prune(
            session, request_context.messages, limit=self.calibration.unscale(int(min(self.limit, sent) * 0.6)),
            reserved=reserved,
        )
        request_context.messages = list(result.messages)
        self._last_raw = result.tokens_after
        self._last_estimate = self.calibration.scale(result.tokens_after)
        self._set_max_tokens(request_context, self._last_estimate)
        if result.changed:
            session.note_break(f"compaction ({result.stage}) after the provider refused the request as too long")

    async def compact_now(self, session: Session) -> list[ev.AgentEvent]:
        """Compact the session's history as far as the ladder goes (``/compact``, ``--compact``).

        Earlier turns become a summary, older tool results placeholders, reasoning of earlier
        turns is dropped; the latest turn's prompt stays. The new history is stored at once,
        unless the summary failed (a warning says so and the history stays as it was).
        Token counts in the event cover the history only.
        """
        if not session.messages:
            return [ev.Notice(session_id=session.session_id, text="Nothing to compact yet.")]
        before = estimate_messages(session.messages)
        result = await self._prune(session, session.messages, limit=0, reserved=0, warn=False)
        if result.summary_error is not None:
            return [ev.Notice(
                session_id=session.session_id,
                level="warning",
                text=f"Nothing was compacted: the summary could not be written ({result.summary_error}).",
            )]
        notices = [ev.Notice(session_id=session.session_id, level="warning", text=EMPTY_SUMMARY_NOTICE)] if result.summary_empty else []
        session.rewrote_history()
        session.note_break(f"/compact ({result.stage})")
        session.persist(list(result.messages))
        session.forget_request_size()  # the status estimates the new history until the next request
        after = estimate_messages(result.messages)
        return [*notices, ev.Compacted(session_id=session.session_id, tokens_before=before, tokens_after=after,
                                       stage=result.stage)]


EMPTY_SUMMARY_NOTICE = (
    "The model's summary of earlier work came back empty (or as chat-template markup alone); ketch's own "
    "record of those steps (the files touched and the commands run) stands in for it."
)
"""Said each time a summary the model wrote empty is replaced by ketch's record."""

SUMMARY_REST = 3
"""Compactions after a summary that was not kept before another is tried."""


async def _failed_already(transcript: str) -> str:
    raise RuntimeError("the summary failed earlier in this turn")


__all__ = ["Compactor", "SUMMARY_INSTRUCTIONS", "model_summarizer", "reserved_tokens"]
