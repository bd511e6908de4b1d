"""An Anthropic model that builds each unchanged tool result's block once, not every step.

pydantic-ai's ``AnthropicModel._map_message`` turns the whole history into Messages API blocks
on every request. Most of its time on a long turn goes to the tool results
(``_map_tool_return_part``, which splits every result's content into text and files) and to
text parts (``_map_text_part``, which asks whether the part's citations may be replayed before
looking whether it has any). :class:`MemoizedAnthropicModel`:

- keeps the block each plain tool result became (a ``ToolReturnPart`` of text content that is
  not a ``search_tools`` result) and hands out a copy of it while the part is the same object
  with the same content, outcome and call id. A copy, because the SDK's later passes may add a
  ``cache_control`` to a block of the request they build. What is kept is what the last two
  ``_map_message`` calls used;
- writes a text part without citations as the SDK does, ``{"text": …, "type": "text"}``,
  without the replay check whose answer cannot matter then;
- maps a request of nothing but such plain tool results straight to the one user turn the SDK
  makes of it, ``{"role": "user", "content": [block, …]}``. The SDK's ``_map_model_request`` builds
  a ``_MapModelRequestContext`` per request (about 3 µs here, half of it the ``list[…]`` generic
  aliases it uses as default factories) and sends each part through an ``isinstance`` chain and an
  awaited coroutine: for a history of 1,000 steps ``_map_message`` took 13.4 ms, 7.9 ms with this
  path. Such a request holds no system prompt, effort change, cache point, availability delta or
  request-scoped prompt, so the context would stay empty but for the blocks.

It also checks each request's lookalike frames once (``lookalike_memo``). Everything else is
the SDK's own code. ``tests/test_step_cost_equivalence.py`` compares every request body of a
session with and without this. :func:`usable` checks the private methods' pydantic-ai-slim
2.68 signatures; ``build_model`` uses the SDK's ``AnthropicModel`` otherwise, or with
``KETCH_SDK_FASTPATHS=0``.
"""

from __future__ import annotations

from contextvars import ContextVar
from typing import Any

from pydantic_ai.messages import TextPart, ToolReturnPart
from pydantic_ai.models.anthropic import AnthropicModel

from ketch.providers.history_scans import enabled
from ketch.providers.lookalike_memo import LookalikeNotesMemo
from ketch.providers.lookalike_memo import has_methods
from ketch.providers.lookalike_memo import usable as lookalike_usable

_EXPECTED = {
    "_map_message": ["self", "messages", "model_request_parameters", "model_settings"],
    "_map_model_request": ["self", "message", "standing_prompt_count", "map_context"],
    "_map_tool_return_part": ["self", "part", "map_context"],
    "_map_text_part": ["self", "message", "part", "assistant_content_params"],
}

_SEARCH_TOOLS = "search_tools"
"""The local tool-search tool, whose results the SDK maps by the request's deferred tools."""

_USED: ContextVar[dict[int, Any] | None] = ContextVar("ketch_anthropic_memo_used", default=None)


def usable(cls: type = AnthropicModel) -> bool:
    """Whether ``cls`` still has the private methods wrapped here (and by ``lookalike_memo``), with
    their 2.68 signatures."""
    return lookalike_usable(cls) and has_methods(cls, _EXPECTED)


def _plain_result(part: Any) -> bool:
    """A tool result of text content that is not a ``search_tools`` result: its block depends on
    nothing but the part."""
    return type(part) is ToolReturnPart and type(part.content) is str and part.tool_name != _SEARCH_TOOLS


def _copy(block: dict[str, Any]) -> dict[str, Any]:
    content = block.get("content")
    if isinstance(content, list):
        return {**block, "content": [dict(item) if isinstance(item, dict) else item for item in content]}
    return dict(block)


class MemoizedAnthropicModel(LookalikeNotesMemo, AnthropicModel):
    """``AnthropicModel`` that reuses each unchanged plain tool result's block."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._blocks_now: dict[int, Any] = {}
        self._blocks_before: dict[int, Any] = {}

    async def _map_message(self, messages: Any, model_request_parameters: Any, model_settings: Any) -> Any:
        if not enabled():
            return await super()._map_message(messages, model_request_parameters, model_settings)
        used: dict[int, Any] = {}
        token = _USED.set(used)
        try:
            result = await super()._map_message(messages, model_request_parameters, model_settings)
        finally:
            _USED.reset(token)
        self._blocks_before, self._blocks_now = self._blocks_now, used
        return result

    async def _map_model_request(self, message: Any, standing_prompt_count: int, map_context: Any) -> None:
        parts = message.parts
        if _USED.get() is None or not parts or not all(map(_plain_result, parts)):
            await super()._map_model_request(message, standing_prompt_count, map_context)
            return
        blocks = [await self._plain_block(part, map_context) for part in parts]
        map_context.anthropic_messages.append({"role": "user", "content": blocks})

    async def _map_tool_return_part(self, part: ToolReturnPart, map_context: Any) -> Any:
        if _USED.get() is None or not _plain_result(part):
            return await super()._map_tool_return_part(part, map_context)
        return await self._plain_block(part, map_context)

    async def _plain_block(self, part: ToolReturnPart, map_context: Any) -> Any:
        """The block of a plain result: a copy of what it became in one of the last two requests, or
        the SDK's mapping of it, remembered (inside ``_map_message`` only)."""
        used = _USED.get()
        assert used is not None
        key = id(part)
        entry = self._blocks_now.get(key) or self._blocks_before.get(key)
        if (
            entry is not None
            and entry[0] is part
            and entry[1] is part.content
            and entry[2] == part.outcome
            and entry[3] == part.tool_call_id
        ):
            used[key] = entry
            return _copy(entry[4])
        block = await super()._map_tool_return_part(part, map_context)
        used[key] = (part, part.content, part.outcome, part.tool_call_id, _copy(block))
        return block

    def _map_text_part(self, message: Any, part: TextPart, assistant_content_params: list[Any]) -> None:
        if _USED.get() is None or isinstance((part.provider_details or {}).get("citations"), list):
            super()._map_text_part(message, part, assistant_content_params)
            return
        if part.content:  # the SDK's block for a text part that has no citations to replay
            assistant_content_params.append({"text": part.content, "type": "text"})


__all__ = ["MemoizedAnthropicModel", "usable"]
