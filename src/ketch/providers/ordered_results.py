"""Fast paths for pydantic-ai's two reorderings of tool results before every request.

``Model.prepare_messages`` (pydantic-ai 2.68) walks the whole history twice to put tool results in
order: ``_tool_results_first`` moves each request's results ahead of its other parts (for every
request after the first response), and ``_order_tool_results_by_call`` sorts the results answering
the response right before a request into the order of that response's calls. Each returns what it
was given when nothing moves, which for a turn ketch runs is always: its results are built one per
call, in call order, and nothing goes before them. On a 1,000-step turn the two walks were about 5 %
of a step, growing with the history.

:func:`install` wraps both names in ``pydantic_ai.models``, where ``prepare_messages`` calls them.
Whether a history is already in each order is derived message by message, exactly as the SDK
decides whether to move anything, and remembered for the last few histories
(``history_scans.PrefixMemo``), so a step looks only at what is new. A history in order gets its
arguments back at once; any other, the SDK's function:

- results first: no request after the first response holds a tool result (``ToolReturnPart``, or a
  ``RetryPromptPart`` naming a tool) after a part that is not one;
- by call: in each request right after a response, the ``ToolReturnPart`` s answering that
  response's calls come in the order of the calls' first appearance (a stable sort then moves none).

Like the other memos it does not see a part's fields changed in place. Nothing is wrapped unless
both functions are still bound where 2.68 binds them with their signatures;
``KETCH_SDK_FASTPATHS=0`` turns it off with the rest. ``tests/test_ordered_results.py`` compares
the answers with the SDK's on generated histories.
"""

from __future__ import annotations

import inspect
from collections.abc import Sequence
from typing import Any, NamedTuple

from ketch.wire import history_scans

_EXPECTED = {
    "_tool_results_first": ["authored", "messages"],
    "_order_tool_results_by_call": ["messages"],
}


class _State(NamedTuple):
    results_first: bool
    by_call: bool
    after_response: bool
    """A response has been seen (requests before the first one are never reordered)."""
    previous: Any
    """The last message (the response a request's results are ordered by)."""


_EMPTY = _State(True, True, False, None)
_UNKNOWN = _State(False, False, False, None)


def _extender() -> Any:
    from pydantic_ai.messages import ModelRequest, ModelResponse, ToolCallPart, ToolReturnPart
    from pydantic_ai.messages import _is_tool_result_part as is_result  # the SDK's own test, so the two agree

    def results_first(parts: Sequence[Any]) -> bool:
        other_seen = False
        for part in parts:
            if is_result(part):
                if other_seen:
                    return False
            else:
                other_seen = True
        return True

    def by_call(response: Any, parts: Sequence[Any]) -> bool:
        order: dict[str, int] = {}
        for part in response.parts:
            if isinstance(part, ToolCallPart):
                order.setdefault(part.tool_call_id, len(order))
        last = -1
        for part in parts:
            if isinstance(part, ToolReturnPart) and part.tool_call_id in order:
                rank = order[part.tool_call_id]
                if rank < last:
                    return False
                last = rank
        return True

    def extend(state: _State, messages: Sequence[Any]) -> _State:
        first, called, after, previous = state
        for message in messages:
            if isinstance(message, ModelResponse):
                after = True
            elif isinstance(message, ModelRequest):
                parts = message.parts
                if first and after and not results_first(parts):
                    first = False
                if called and isinstance(previous, ModelResponse) and not by_call(previous, parts):
                    called = False
            else:
                return _UNKNOWN  # not a shape this knows: the SDK's own passes decide
            previous = message
        return _State(first, called, after, previous)

    return extend


def install() -> bool:
    """Wrap both reorderings where ``prepare_messages`` calls them (once); False when not done."""
    if not history_scans.installed():
        return False
    import pydantic_ai.messages as messages_module
    import pydantic_ai.models as models

    if not hasattr(messages_module, "_is_tool_result_part"):
        return False
    sdk_first = getattr(models, "_tool_results_first", None)
    sdk_by_call = getattr(models, "_order_tool_results_by_call", None)
    if getattr(sdk_first, "__ketch_fast_path__", False):
        return True
    for function, (name, parameters) in zip((sdk_first, sdk_by_call), _EXPECTED.items()):
        if function is None or list(inspect.signature(function).parameters) != parameters:
            return False
    memo = history_scans.PrefixMemo(_EMPTY, _extender(), _UNKNOWN)

    def fast_results_first(authored: list[Any], messages: list[Any]) -> tuple[list[Any], list[Any]]:
        if memo.of(messages).results_first:
            return authored, messages
        return sdk_first(authored, messages)

    def fast_by_call(messages: list[Any]) -> list[Any]:
        if memo.of(messages).by_call:
            return messages
        return sdk_by_call(messages)

    fast_results_first.__ketch_fast_path__ = True  # type: ignore[attr-defined]
    fast_by_call.__ketch_fast_path__ = True  # type: ignore[attr-defined]
    history_scans.replace(models, "_tool_results_first", fast_results_first)
    history_scans.replace(models, "_order_tool_results_by_call", fast_by_call)
    return True


def in_order(messages: Sequence[Any]) -> tuple[bool, bool]:
    """Whether ``messages`` has its results first, and by call (tests; no memo)."""
    state = _extender()(_EMPTY, messages)
    return state.results_first, state.by_call


__all__ = ["in_order", "install"]
