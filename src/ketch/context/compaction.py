"""Context management for a session: the pruning ladder in the loop, and the 404 item repair.

:class:`Compactor` is the session's ``compactor``. Before every model request it estimates
what would be sent (instructions, history, tool schemas) against ``window × threshold`` and,
when that is too much, runs :func:`ketch.context.prune.prune`. The pruned history replaces both the
request's messages and the run's persistent history, so later steps and the store carry the
shorter history rather than pruning the same thing again. The first pruning of a turn is
reported as one :class:`ketch.core.events.Compacted`.

:class:`ItemNotFoundRetry` is a pydantic-ai capability answering the Responses
"404 Item with id … not found": when nothing of the turn was delivered yet, it rewrites the
session's history with every provider item id stripped and sends the request once more; at
most once per turn.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from pydantic_ai.capabilities import AbstractCapability
from pydantic_ai.exceptions import RetryModelRequest
from pydantic_ai.messages import ModelMessage, ModelResponse

from ketch.core import events as ev
from ketch.context.budget import DEFAULT_THRESHOLD, estimate_messages, estimate_text, estimate_tools, token_limit
from ketch.context.prune import ITEM_REPLAY_PROVIDERS, PruneResult, Summarize, is_item_not_found, prune, strip_item_ids

if TYPE_CHECKING:
    from ketch.core.session import Session

SUMMARY_INSTRUCTIONS = (
    "You condense the earlier part of a conversation between a user and a coding agent so the "
    "agent can continue the work without it. Write a compact, factual summary: the user's goals "
    "and requests, decisions made, files read or changed (with paths), commands run and their "
    "outcomes, errors met, and what was still open. Keep identifiers, paths and numbers exact. "
    "When the transcript opens with a summary of what came before it, carry what still matters "
    "from it into yours. Do not address the user and do not add advice."
)
"""Instructions of the auxiliary summary call (stage 3 of the ladder)."""


def _instruction_text(request_context: Any) -> str:
    params = request_context.model_request_parameters
    return "\n\n".join(p.content for p in (getattr(params, "instruction_parts", None) or []))


def reserved_tokens(request_context: Any) -> int:
    """Tokens of a request besides its history: instructions and tool schemas."""
    params = request_context.model_request_parameters
    tools = [*params.function_tools, *getattr(params, "output_tools", [])]
    return estimate_text(_instruction_text(request_context)) + estimate_tools(tools)


def model_summarizer(model: Any, on_response: Callable[[ModelResponse], None] | None = None) -> Summarize:
    """A summary call on ``model`` with no tools and no hosted search: a bare agent.

    ``on_response`` sees each model response of the call (to count its tokens and cost).
    """

    async def summarize(transcript: str) -> str:
        from pydantic_ai import Agent

        agent: Agent[None, str] = Agent(model, instructions=SUMMARY_INSTRUCTIONS)
        result = await agent.run(transcript)
        if on_response is not None:
            for message in result.new_messages():
                if isinstance(message, ModelResponse):
                    on_response(message)
        return result.output

    return summarize


def _charge(session: Session) -> Callable[[ModelResponse], None]:
    """Add an auxiliary response's tokens and cost to the session's totals."""

    def charge(response: ModelResponse) -> None:
        from ketch.providers.pricing import response_cost

        session.input_tokens += response.usage.input_tokens or 0
        session.output_tokens += response.usage.output_tokens or 0
        cost = response_cost(response)
        if cost is None:
            session.cost_usd = None
        elif session.cost_usd is not None:
            session.cost_usd += cost

    return charge


def _safe(summarize: Summarize) -> Summarize:
    """A summarizer that never fails the turn: a failed call leaves a short note instead."""

    async def call(transcript: str) -> str:
        try:
            text = (await summarize(transcript)).strip()
        except Exception as exc:  # noqa: BLE001 - compaction must not end the turn
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            return f"(The summary could not be written: {first[:200]}. Earlier turns were removed.)"
        return text or "(The summary came back empty. Earlier turns were removed.)"

    return call


@dataclass
class Compactor:
    """Keeps a session's requests inside its model's context window.

    Args:
        window: The model's context window in tokens.
        threshold: Share of the window a request may fill before the ladder runs.
        summarize: The stage-3 summary call; by default a bare agent on the session's model.
        inline_native_from: Providers whose native tool items are replayed by id (see prune).
    """

    window: int
    threshold: float = DEFAULT_THRESHOLD
    summarize: Summarize | None = None
    inline_native_from: Collection[str] = field(default=ITEM_REPLAY_PROVIDERS)

    @property
    def limit(self) -> int:
        """Tokens a request may hold before pruning."""
        return token_limit(self.window, self.threshold)

    def capabilities(self, session: Session) -> list[AbstractCapability[Any]]:
        """Capabilities the session's agent needs for context management."""
        return [ItemNotFoundRetry(session)]

    def _summarizer(self, session: Session) -> Summarize:
        return _safe(self.summarize or model_summarizer(session.model, _charge(session)))

    async def _prune(self, session: Session, messages: Sequence[ModelMessage], *, limit: int, reserved: int) -> PruneResult:
        return await prune(
            messages,
            limit=limit,
            reserved=reserved,
            summarize=self._summarizer(session),
            inline_native_from=self.inline_native_from,
        )

    async def before_request(self, session: Session, ctx: Any, request_context: Any) -> Any:
        """Prune the history about to be sent when it would pass the threshold.

        The result replaces ``request_context.messages`` (this request) and ``ctx.messages``
        (the run's history, so the next step starts from it); the session is told to rewrite
        its stored history. Reports the turn's first pruning as a ``Compacted`` event.
        """
        result = await self._prune(
            session, request_context.messages, limit=self.limit, reserved=reserved_tokens(request_context)
        )
        if not result.changed:
            return request_context
        request_context.messages = list(result.messages)
        ctx.messages[:] = result.messages
        session.history_rewritten = True
        turn = session._turn
        if turn is not None and not turn.compacted:
            turn.compacted = True
            session._emit(ev.Compacted(tokens_before=result.tokens_before, tokens_after=result.tokens_after, stage=result.stage))
        return request_context

    async def compact_now(self, session: Session) -> list[ev.AgentEvent]:
        """Compact the session's history as far as the ladder goes (``/compact``, ``--compact``).

        Earlier turns become a summary, older tool results placeholders, reasoning of earlier
        turns is dropped; the latest turn's prompt stays. The new history is stored at once.
        Token counts in the event cover the history only.
        """
        if not session.messages:
            return [ev.Notice(session_id=session.session_id, text="Nothing to compact yet.")]
        before = estimate_messages(session.messages)
        result = await self._prune(session, session.messages, limit=0, reserved=0)
        session.history_rewritten = True
        session._persist(list(result.messages))
        session.last_request_tokens = 0  # the status estimates the new history until the next request
        after = estimate_messages(result.messages)
        return [ev.Compacted(session_id=session.session_id, tokens_before=before, tokens_after=after, stage=result.stage)]


class ItemNotFoundRetry(AbstractCapability[Any]):
    """Answers a 404 "Item with id … not found" by resending the history inline, once a turn.

    Only before any output of the turn reached the front end: delivered text cannot be unsent.
    The run's history is rewritten without item ids (so later steps and the store no longer
    refer to the lost items), and the retried attempt sends that history too.
    """

    def __init__(self, session: Session) -> None:
        super().__init__()
        self.session = session
        self._retried_turn: str | None = None
        self._strip_next = False

    @classmethod
    def get_serialization_name(cls) -> str | None:
        return None

    def _can_retry(self) -> bool:
        turn = self.session._turn
        return turn is not None and not turn.delivered and self._retried_turn != turn.turn_id

    def _handles_model_request_error(self, ctx: Any, request_context: Any) -> bool:
        # Streams are opened early (primed) only while a retry is still possible this turn.
        return self._can_retry()

    async def prepare_model_request(self, ctx: Any, request_context: Any) -> Any:
        # Each attempt starts from what ``before_model_request`` left, which still has the ids.
        if self._strip_next:
            self._strip_next = False
            request_context.messages = strip_item_ids(request_context.messages)
        return request_context

    async def on_model_request_error(self, ctx: Any, *, request_context: Any, error: Exception) -> Any:
        turn = self.session._turn
        if turn is None or not self._can_retry() or not is_item_not_found(error):
            raise error
        self._retried_turn = turn.turn_id
        ctx.messages[:] = strip_item_ids(ctx.messages)
        self.session.history_rewritten = True
        self._strip_next = True
        raise RetryModelRequest()


__all__ = ["Compactor", "ItemNotFoundRetry", "SUMMARY_INSTRUCTIONS", "model_summarizer", "reserved_tokens"]
