"""An OpenAI Responses model that maps each history message to input items once, not every step.

pydantic-ai's ``OpenAIResponsesModel._map_messages`` turns the whole history into Responses
input items on every request: on a 1,000-step turn (2,000 messages) about 16 ms of CPU a step,
growing with the history, although only the newest request and response are new.
:class:`MemoizedResponsesModel` keeps the items each message became and hands them out again
while the message is the same object with the same parts (``tuple(parts)``, compared by
identity first) and the request carries the same per-request flags (:func:`_flags`). ketch's
pruning, compaction and repairs never change a message in place: a changed message is a new
object (``context/prune.py``), so it is mapped afresh.

Only messages whose mapping reads nothing but the message itself, the model and those flags
are remembered (:func:`_plain_request`, :func:`_plain_response`): system and text prompts,
plain tool results (text content), and responses of text, tool calls and reasoning. Everything
else (files, hosted tools, tool search, response-scoped call ids) is mapped by the SDK as it is,
every time. A request whose prompt is not plain text may hold a cache point, which the SDK then
moves onto an earlier item after mapping; a call that met one forgets everything, so an item it
changed is never handed out again. What is remembered is what the last two requests used: at
most two histories' worth of items.

Nothing here changes what is sent: ``tests/test_step_cost_equivalence.py`` records the request
bodies of a session through pruning, a summary, a cancel and a resume with the memo on and off
and compares them byte for byte. :func:`usable` checks that the SDK's private methods still
have the signatures this was written against (pydantic-ai-slim 2.68); if not, ``build_model``
uses the SDK's own model. ``KETCH_SDK_FASTPATHS=0`` turns this off.

Upstream, the same memo fits in ``_map_messages`` itself (its per-message context is already
explicit), or the mapping could be made incremental on the run.
"""

from __future__ import annotations

from contextvars import ContextVar
from typing import Any

from pydantic_ai.messages import (
    ModelRequest,
    ModelResponse,
    SystemPromptPart,
    TextPart,
    ThinkingPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)
from pydantic_ai.models.openai import OpenAIResponsesModel

from ketch.providers.history_scans import enabled
from ketch.providers.lookalike_memo import LookalikeNotesMemo
from ketch.providers.lookalike_memo import has_methods
from ketch.providers.lookalike_memo import usable as lookalike_usable

_EXPECTED = {
    "_map_messages": ["self", "messages", "model_settings", "model_request_parameters", "standing_prompt_retained",
                      "previous_response_id"],
    "_map_model_request": ["self", "message", "context"],
    "_map_model_response": ["self", "message_index", "message", "context"],
}
"""The private methods wrapped, with their parameters in pydantic-ai-slim 2.68."""

_CONTEXT_FIELDS = ("openai_messages", "response_scoped_tool_call_ids", "response_id", "send_item_ids", "store_disabled",
                   "client_tool_search_active")


def usable(cls: type = OpenAIResponsesModel) -> bool:
    """Whether ``cls`` still has the private methods the memo (and ``lookalike_memo``) wraps, with
    their 2.68 signatures."""
    if not (lookalike_usable(cls) and has_methods(cls, _EXPECTED)):
        return False
    try:
        from pydantic_ai.models.openai._responses_model import _ResponsesMapMessagesContext
    except ImportError:
        return False
    fields = getattr(_ResponsesMapMessagesContext, "__dataclass_fields__", {})
    return all(name in fields for name in _CONTEXT_FIELDS)


class _Call:
    """One ``_map_messages`` call: the entries it used, and whether it met a possible cache point."""

    def __init__(self) -> None:
        self.used: dict[int, tuple[Any, tuple[Any, ...], tuple[Any, ...], tuple[Any, ...]]] = {}
        self.poisoned = False


_CALL: ContextVar[_Call | None] = ContextVar("ketch_responses_memo_call", default=None)


def _flags(context: Any) -> tuple[Any, ...]:
    """What of the call's context the mapping of a plain message reads."""
    return (context.send_item_ids, context.store_disabled, context.client_tool_search_active)


def _plain_request(message: Any) -> bool:
    for part in message.parts:
        kind = type(part)
        if kind is SystemPromptPart:
            continue
        if (kind is UserPromptPart or kind is ToolReturnPart) and type(part.content) is str:
            continue
        return False
    return True


def _plain_response(message: Any) -> bool:
    return all(type(part) in (TextPart, ToolCallPart, ThinkingPart) for part in message.parts)


def _prompt_with_content_list(message: Any) -> bool:
    return any(type(part.content) is not str for part in message.parts if isinstance(part, UserPromptPart))


class MemoizedResponsesModel(LookalikeNotesMemo, OpenAIResponsesModel):
    """``OpenAIResponsesModel`` whose message mapping reuses what an unchanged message became (and whose
    lookalike-frame notes are remembered per request, ``lookalike_memo``)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._memo_now: dict[int, Any] = {}
        self._memo_before: dict[int, Any] = {}
        self._interleaved = bool(self.profile.get("openai_responses_supports_interleaved_function_calls", True))

    async def _map_messages(self, messages: Any, model_settings: Any, model_request_parameters: Any, **kwargs: Any) -> Any:
        if not enabled() or (model_settings or {}).get("openai_cache_instructions"):
            return await super()._map_messages(messages, model_settings, model_request_parameters, **kwargs)
        call = _Call()
        token = _CALL.set(call)
        try:
            result = await super()._map_messages(messages, model_settings, model_request_parameters, **kwargs)
        finally:
            _CALL.reset(token)
        if call.poisoned:
            self._memo_now, self._memo_before = {}, {}
        else:
            self._memo_before, self._memo_now = self._memo_now, call.used
        return result

    def _remembered(self, message: Any, flags: tuple[Any, ...]) -> tuple[Any, ...] | None:
        key = id(message)
        entry = self._memo_now.get(key) or self._memo_before.get(key)
        if entry is None or entry[0] is not message or entry[2] != flags or entry[1] != tuple(message.parts):
            return None
        return entry

    def _reuse_or_map(self, call: _Call, message: Any, context: Any) -> tuple[tuple[Any, ...], Any] | None:
        flags = _flags(context)
        entry = self._remembered(message, flags)
        if entry is not None:
            context.openai_messages.extend(entry[3])
            call.used[id(message)] = entry
            return None
        return flags, len(context.openai_messages)

    def _remember(self, call: _Call, message: Any, context: Any, flags: tuple[Any, ...], start: int) -> None:
        call.used[id(message)] = (message, tuple(message.parts), flags, tuple(context.openai_messages[start:]))

    async def _map_model_request(self, message: ModelRequest, context: Any) -> None:
        call = _CALL.get()
        if call is None or context.response_scoped_tool_call_ids or not _plain_request(message):
            if call is not None and _prompt_with_content_list(message):
                call.poisoned = True
            await super()._map_model_request(message, context)
            return
        todo = self._reuse_or_map(call, message, context)
        if todo is None:
            return
        await super()._map_model_request(message, context)
        self._remember(call, message, context, *todo)

    def _map_model_response(self, message_index: int, message: ModelResponse, context: Any) -> None:
        call = _CALL.get()
        if call is None or context.response_scoped_tool_call_ids or not self._interleaved or not _plain_response(message):
            super()._map_model_response(message_index, message, context)
            return
        todo = self._reuse_or_map(call, message, context)
        if todo is None:
            return
        super()._map_model_response(message_index, message, context)
        self._remember(call, message, context, *todo)


__all__ = ["MemoizedResponsesModel", "usable"]
