"""``providers/ordered_results.py`` answers as pydantic-ai's two reorderings of tool results do.

Histories are generated as a turn of steps would be (each response's calls answered by the next
request, in call order) and then disturbed in one of the ways the SDK's passes reorder, or ways
they must leave alone: results in another order than the calls, user text or a system prompt
ahead of the results, a retry naming a tool after text, a result for a call of an older response,
a request with no response before it. Both wrapped functions must return what the SDK's return,
message for message, part for part (identity), whether they see the history whole or as the
continuation of one they saw before (as on a step).
"""

from __future__ import annotations

from typing import Any

import pydantic_ai.models as models
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic_ai.messages import (
    ModelRequest,
    ModelResponse,
    SystemPromptPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)
from step_histories import positions, retry, turn

from ketch.providers import ordered_results
from ketch.wire import history_scans

SDK_FIRST = models._tool_results_first
SDK_BY_CALL = models._order_tool_results_by_call


@pytest.fixture(autouse=True)
def _installed() -> Any:
    history_scans.uninstall()
    assert history_scans.install() and ordered_results.install()
    assert models._tool_results_first is not SDK_FIRST and models._order_tool_results_by_call is not SDK_BY_CALL
    yield
    history_scans.uninstall()
    assert models._tool_results_first is SDK_FIRST and models._order_tool_results_by_call is SDK_BY_CALL


def _disturb(history: list[Any], how: str, at: int) -> list[Any]:
    history = list(history)
    r, s = positions(history, at)
    parts = list(history[r].parts)
    if how == "results reversed":
        history[r] = ModelRequest(parts=parts[::-1])
    elif how == "results rotated":
        history[r] = ModelRequest(parts=[*parts[1:], *parts[:1]])
    elif how == "text ahead of the results":
        history[r] = ModelRequest(parts=[UserPromptPart("first"), *parts])
    elif how == "system prompt ahead of the results":
        history[r] = ModelRequest(parts=[SystemPromptPart("note"), *parts])
    elif how == "text after the results":
        history[r] = ModelRequest(parts=[*parts, UserPromptPart("after")])
    elif how == "tool retry after text":
        history[r] = ModelRequest(parts=[UserPromptPart("hm"), retry("read", "c0_0")])
    elif how == "plain retry after text":
        history[r] = ModelRequest(parts=[UserPromptPart("hm"), retry(None, "c0_0"), *parts])
    elif how == "result for an older call":
        history[r] = ModelRequest(parts=[ToolReturnPart("read", "late", tool_call_id="c0_0"), *parts])
    elif how == "result for an unknown call first":
        history[r] = ModelRequest(parts=[*parts, ToolReturnPart("read", "x", tool_call_id="nowhere")][::-1])
    elif how == "two requests":
        history.insert(r + 1, ModelRequest(parts=[UserPromptPart("again"), *parts[:1]]))
    elif how == "calls reordered":
        calls = list(history[s].parts)
        history[s] = ModelResponse(parts=[calls[0], *calls[1:][::-1]])
    elif how == "a call id twice":
        calls = list(history[s].parts)
        history[s] = ModelResponse(parts=[*calls, *[p for p in calls if isinstance(p, ToolCallPart)][:1]])
    elif how == "text before results before the first response":
        history.insert(0, ModelRequest(parts=[UserPromptPart("early"), ToolReturnPart("read", "x", tool_call_id="c0_0")]))
    return history


_DISTURBANCES = ["none", "results reversed", "results rotated", "text ahead of the results",
                 "system prompt ahead of the results", "text after the results", "tool retry after text",
                 "plain retry after text", "result for an older call", "result for an unknown call first",
                 "two requests", "calls reordered", "a call id twice",
                 "text before results before the first response"]


def _same(fast: list[Any], sdk: list[Any]) -> None:
    assert len(fast) == len(sdk)
    for a, b in zip(fast, sdk):
        assert type(a) is type(b)
        assert a is b or (a == b and all(x is y for x, y in zip(a.parts, b.parts, strict=True)))


def _check(history: list[Any]) -> None:
    authored = list(history)
    fast_authored, fast_messages = models._tool_results_first(authored, list(history))
    sdk_authored, sdk_messages = SDK_FIRST(authored, list(history))
    _same(fast_authored, sdk_authored)
    _same(fast_messages, sdk_messages)
    _same(models._order_tool_results_by_call(list(history)), SDK_BY_CALL(list(history)))


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(steps=st.lists(st.integers(0, 3), max_size=8), how=st.sampled_from(_DISTURBANCES), at=st.integers(0, 20))
def test_the_fast_paths_answer_as_the_sdk_does(steps: list[int], how: str, at: int) -> None:
    history = _disturb(turn(steps), how, at)
    _check(history)
    for end in range(1, len(history) + 1):  # seen again as the continuation of each prefix, as on steps
        _check(history[:end])


def test_an_ordered_history_comes_back_as_it_was_given() -> None:
    history = turn([1, 3, 0, 2])
    assert ordered_results.in_order(history) == (True, True)
    authored = list(history)
    assert models._tool_results_first(authored, history) == (authored, history)
    result = models._tool_results_first(authored, history)
    assert result[0] is authored and result[1] is history
    assert models._order_tool_results_by_call(history) is history


@pytest.mark.parametrize("how", ["results reversed", "results rotated", "text ahead of the results",
                                 "system prompt ahead of the results", "tool retry after text"])
def test_each_disturbance_that_moves_a_part_is_seen(how: str) -> None:
    disturbed = _disturb(turn([3, 3, 3]), how, 1)
    assert ordered_results.in_order(disturbed) != (True, True), how
    first_fast, by_call_fast = models._tool_results_first(list(disturbed), list(disturbed)), models._order_tool_results_by_call(list(disturbed))
    assert first_fast[1] != disturbed or by_call_fast != disturbed  # something moved, as the SDK moves it


def test_a_request_whose_parts_were_reordered_in_place_is_looked_at_again() -> None:
    history = turn([2, 2])
    assert models._order_tool_results_by_call(history) is history
    history[-1].parts.reverse()  # same list, same length, new order: the memo keys on the list and length
    history[-1].parts.append(UserPromptPart("more"))
    _same(models._order_tool_results_by_call(list(history)), SDK_BY_CALL(list(history)))
    assert models._order_tool_results_by_call(list(history))[-1].parts[0].tool_call_id == "c1_0"


def test_an_sdk_with_another_signature_is_left_as_it_is(monkeypatch: pytest.MonkeyPatch) -> None:
    history_scans.uninstall()

    def reshaped(messages: list[Any], extra: int = 0) -> list[Any]:
        return messages

    monkeypatch.setattr(models, "_order_tool_results_by_call", reshaped)
    assert history_scans.install()
    assert not ordered_results.install()
    assert models._order_tool_results_by_call is reshaped and models._tool_results_first is SDK_FIRST
    history_scans.uninstall()
    monkeypatch.undo()
    assert history_scans.install() and ordered_results.install()
