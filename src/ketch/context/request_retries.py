"""The two retries of one model request that the pruning ladder installs on a session's agent.

:class:`ContextLengthRetry` answers a provider's "too long for the context window" (each wire's
shape, ``overflow.is_context_length_error``) by pruning harder (``Compactor.squeezed``) and
sending that request once more, before any of its output. :class:`ItemNotFoundRetry` answers the
Responses "404 Item with id … not found": when nothing of the turn was delivered yet, it rewrites
the session's history with every provider item id stripped and sends the request once more; at
most once per turn.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pydantic_ai.capabilities import AbstractCapability
from pydantic_ai.exceptions import RetryModelRequest

from ketch.context.budget import reserved_tokens
from ketch.context.overflow import is_context_length_error
from ketch.context.prune import is_item_not_found, strip_item_ids

if TYPE_CHECKING:
    from ketch.context.session_view import SessionView as Session


def _suppressed() -> Any:
    import contextlib

    return contextlib.suppress(Exception)


def window_advice(compactor: Any, request_context: Any) -> str:
    """What does not fit, and what to do, for a request the provider still found too long after
    the harder prune: the instructions and tool schemas alone, or the history."""
    limits = compactor.limits
    fixed = compactor.calibration.scale(reserved_tokens(request_context))
    budget, window = limits.input_budget, limits.window
    where = f"this model's {window:,}-token window leaves {budget:,} tokens for input beside the output cap of {limits.max_output:,}"
    if fixed > budget * 0.8:
        return (f"ketch's instructions and tool schemas alone take about {fixed:,} tokens, and {where}: run the model "
                "with a larger context (llama.cpp -c 16384, Ollama num_ctx), offer fewer tools ([tools] disabled = "
                "[...]) or shorten the project's instruction files")
    return (f"the history was pruned to fit and the server counted more than ketch estimated ({where}): run /compact, "
            "or set a lower context_window in config")


class ContextLengthRetry(AbstractCapability[Any]):
    """Answers a provider's "too long for the context window" by pruning harder and sending the
    request once more, before any of its output (a rejection comes before the stream)."""

    def __init__(self, session: Session, compactor: Any) -> None:
        """``compactor``: the session's ``compaction.Compactor`` (its ``squeezed`` prunes harder)."""
        super().__init__()
        self.session = session
        self.compactor = compactor
        self._retried: tuple[str, int] | None = None
        self._squeeze_next: BaseException | None = None

    @classmethod
    def get_serialization_name(cls) -> str | None:
        return None

    def _key(self, ctx: Any) -> tuple[str, int] | None:
        turn_id = self.session.turn_id_now()
        return None if turn_id is None else (turn_id, len(ctx.messages))

    def _handles_model_request_error(self, ctx: Any, request_context: Any) -> bool:
        return self._key(ctx) is not None  # (the second refusal too: it gets the advice below)

    async def prepare_model_request(self, ctx: Any, request_context: Any) -> Any:
        if self._squeeze_next is not None:
            error, self._squeeze_next = self._squeeze_next, None
            await self.compactor.squeezed(self.session, request_context, error)
            if (refit := self.compactor.refit_profile) is not None:
                await refit(request_context)  # the window the refusal named may call for the compact profile
        return request_context

    async def on_model_request_error(self, ctx: Any, *, request_context: Any, error: Exception) -> Any:
        key = self._key(ctx)
        if key is None or self._retried == key or not is_context_length_error(error):
            if is_context_length_error(error):
                with _suppressed():
                    error.ketch_window_hint = window_advice(self.compactor, request_context)  # type: ignore[attr-defined]
            raise error
        self._retried = key
        self._squeeze_next = error
        raise RetryModelRequest()


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
        turn_id = self.session.turn_id_now()
        return turn_id is not None and not self.session.delivered_now() and self._retried_turn != turn_id

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
        turn_id = self.session.turn_id_now()
        if turn_id is None or not self._can_retry() or not is_item_not_found(error):
            raise error
        self._retried_turn = turn_id
        ctx.messages[:] = strip_item_ids(ctx.messages)
        self.session.rewrote_history()
        self._strip_next = True
        raise RetryModelRequest()


__all__ = ["ContextLengthRetry", "ItemNotFoundRetry"]
