"""Fast path for pydantic-ai's repair of the whole history before every request.

Before each model request pydantic-ai's agent graph (2.68) runs ``_clean_message_history`` over
the whole history: three passes that drop tool results whose call is missing, add a result for
every call that never got one, and merge neighbouring messages of the same kind. Each walks every
message and part; on a 1,000-step turn (2,000 messages) that was about a tenth of the step, growing
with the history, for histories that need none of it: in a turn ketch runs, every response's calls
are answered by the request that follows it.

:func:`install` wraps the name where the agent graph calls it. A history that is *settled* gets a
new list of the same messages at once, which is what the three passes return for it; any other
history, the SDK's passes. Settled means, each point being what one pass looks for:

- every message is exactly a ``ModelRequest`` or a ``ModelResponse`` and no two neighbours are of
  the same kind (the merge has nothing to join);
- every tool result of a request (an ``isinstance`` of ``ToolReturnPart``, or a ``RetryPromptPart``
  naming a tool) answers a call of the response right before it (no orphan), and a request's tool
  results stand together, with nothing but other results or tool-availability deltas between them
  (the merge has nothing to move);
- every call (an ``isinstance`` of ``ToolCallPart``) of a response is answered by the request right
  after it, and no call id occurs twice in one response (nothing dangles; a later response may
  reuse an answered call's id, which shadows nothing); so a settled history ends with a request,
  or with a response that calls nothing.

Whether a history is settled is derived message by message and remembered for the last few
histories (``history_scans.PrefixMemo``): a history that continues a remembered one is checked
only past it, the newest response and request on a step. Like the other scans' memo it does not
see a part's fields changed in place (a call id rewritten on the same part object); pydantic-ai
and ketch build new parts for that.

Nothing is wrapped unless the function is still bound where 2.68 binds it, with its signature;
``KETCH_SDK_FASTPATHS=0`` turns it off with the rest. ``tests/test_settled_history.py`` compares
the answer with the SDK's on generated histories; ``tests/test_step_cost_equivalence.py`` the
request bodies of whole sessions.
"""

from __future__ import annotations

import inspect
from collections.abc import Sequence
from typing import Any, NamedTuple

from ketch.wire import history_scans

_EXPECTED = ["messages", "repair_last_response"]


class _State(NamedTuple):
    settled_so_far: bool
    last: type | None
    """The kind of the last message (``ModelRequest`` or ``ModelResponse``), None for no history."""
    open_calls: frozenset[str]
    """The call ids of the last message when it is a response: the next request must answer them."""

    @property
    def settled(self) -> bool:
        return self.settled_so_far and not self.open_calls


_UNSETTLED = _State(False, None, frozenset())
_EMPTY = _State(True, None, frozenset())


def _extender() -> Any:
    from pydantic_ai.messages import ModelRequest, ModelResponse, ToolAvailabilityDeltaPart, ToolCallPart
    from pydantic_ai.messages import _is_tool_result_part as is_result  # the SDK's own test, so the two agree

    def results_together(parts: Sequence[Any], flags: list[bool]) -> bool:
        first, last = flags.index(True), len(flags) - 1 - flags[::-1].index(True)
        return all(flags[i] or isinstance(parts[i], ToolAvailabilityDeltaPart) for i in range(first, last + 1))

    def extend(state: _State, messages: Sequence[Any]) -> _State:
        if not state.settled_so_far:
            return state
        last, open_calls = state.last, state.open_calls
        for message in messages:
            kind = type(message)
            if kind is last:
                return _UNSETTLED
            parts = message.parts
            if kind is ModelRequest:
                flags = [is_result(part) for part in parts]
                if True in flags:
                    answered = {part.tool_call_id for part, flag in zip(parts, flags) if flag}
                    if answered != open_calls or not results_together(parts, flags):
                        return _UNSETTLED
                elif open_calls:
                    return _UNSETTLED
                open_calls = frozenset()
            elif kind is ModelResponse:
                calls = [part.tool_call_id for part in parts if isinstance(part, ToolCallPart)]
                open_calls = frozenset(calls)
                if len(open_calls) != len(calls):
                    return _UNSETTLED
            else:
                return _UNSETTLED
            last = kind
        return _State(True, last, open_calls)

    return extend


def install() -> bool:
    """Wrap ``_clean_message_history`` where the agent graph calls it (once); False when not done."""
    if not history_scans.installed():
        return False
    import pydantic_ai._agent_graph as agent_graph
    import pydantic_ai.messages as messages

    original = getattr(agent_graph, "_clean_message_history", None)
    if getattr(original, "__ketch_fast_path__", False):
        return True
    if original is None or original is not getattr(messages, "_clean_message_history", None):
        return False
    if list(inspect.signature(original).parameters) != _EXPECTED or not hasattr(messages, "_is_tool_result_part"):
        return False
    memo = history_scans.PrefixMemo(_EMPTY, _extender(), _UNSETTLED)

    def fast_clean(messages: list[Any], *, repair_last_response: bool = False) -> list[Any]:
        if memo.of(messages).settled:
            return list(messages)
        return original(messages, repair_last_response=repair_last_response)

    fast_clean.__ketch_fast_path__ = True  # type: ignore[attr-defined]
    history_scans.replace(agent_graph, "_clean_message_history", fast_clean)
    return True


def settled(messages: Sequence[Any]) -> bool:
    """Whether ``messages`` is settled (tests; no memo)."""
    return _extender()(_EMPTY, messages).settled


__all__ = ["install", "settled"]
