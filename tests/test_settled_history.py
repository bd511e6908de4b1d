"""``providers/settled_history.py`` answers as pydantic-ai's ``_clean_message_history`` does.

Histories are generated, most of them as a turn of steps would be (each response's calls
answered by the next request) and then broken in one of the ways the SDK's passes repair:
a result without its call, a call without its result, a call id used twice, two requests or two
responses in a row, a result answering an older response, user text between two results, a
retry naming a tool or not, a history that ends on a call. The wrapped function must return what
the SDK's returns, message for message, for both values of ``repair_last_response``, whether it
sees the history whole or as the continuation of one it saw before (as on a step).
"""

from __future__ import annotations

from typing import Any

import pydantic_ai._agent_graph as agent_graph
import pydantic_ai.messages as messages_module
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic_ai.messages import (
    ModelRequest,
    ModelResponse,
    TextPart,
    ToolAvailabilityDeltaPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)
from step_histories import positions, retry, turn

from ketch.providers import settled_history
from ketch.wire import history_scans

SDK = messages_module._clean_message_history


@pytest.fixture(autouse=True)
def _installed() -> Any:
    history_scans.uninstall()
    assert history_scans.install() and settled_history.install()
    assert agent_graph._clean_message_history is not SDK
    yield
    history_scans.uninstall()
    assert agent_graph._clean_message_history is SDK


def _break(history: list[Any], how: str, at: int) -> list[Any]:
    history = list(history)
    r, s = positions(history, at)
    if how == "orphan result":
        history[r] = ModelRequest(parts=[*history[r].parts, ToolReturnPart("read", "x", tool_call_id="nowhere")])
    elif how == "drop a result":
        history[r] = ModelRequest(parts=[p for p in history[r].parts if not isinstance(p, ToolReturnPart)][:1] or [UserPromptPart("u")])
    elif how == "reuse a call id":
        history[s] = ModelResponse(parts=[*history[s].parts, ToolCallPart("read", {}, tool_call_id="c0_0")])
    elif how == "two requests":
        history.insert(r + 1, ModelRequest(parts=[UserPromptPart("again")]))
    elif how == "two responses":
        history.insert(s + 1, ModelResponse(parts=[TextPart("more")]))
    elif how == "two synthetic responses":
        history.insert(s, ModelResponse(parts=[TextPart("made up")]))
        history[s + 1] = ModelResponse(parts=history[s + 1].parts)
    elif how == "text between results":
        parts = list(history[r].parts)
        history[r] = ModelRequest(parts=[*parts[:1], UserPromptPart("between"), *parts[1:]])
    elif how == "availability between results":
        parts = list(history[r].parts)
        history[r] = ModelRequest(parts=[*parts[:1], ToolAvailabilityDeltaPart(tools_added=["grep"]), *parts[1:]])
    elif how == "result for an older call":
        history[r] = ModelRequest(parts=[*history[r].parts, ToolReturnPart("read", "late", tool_call_id="c0_0")])
    elif how == "tool retry":
        parts = list(history[r].parts)
        if parts and isinstance(parts[0], ToolReturnPart):
            history[r] = ModelRequest(parts=[retry("read", parts[0].tool_call_id), *parts[1:]])
    elif how == "plain retry":
        history[r] = ModelRequest(parts=[*history[r].parts, retry(None, "c0_0")])
    elif how == "ends on a call":
        responses = [i for i, m in enumerate(history) if isinstance(m, ModelResponse)]
        history = history[: responses[-1] + 1] if responses else history
    elif how == "duplicate result":
        parts = list(history[r].parts)
        history[r] = ModelRequest(parts=[*parts, *parts[:1]])
    elif how == "starts with a result":
        history.insert(0, ModelRequest(parts=[ToolReturnPart("read", "x", tool_call_id="c0_0")]))
    return history


_BREAKS = ["none", "orphan result", "drop a result", "reuse a call id", "two requests", "two responses",
           "two synthetic responses", "text between results", "availability between results",
           "result for an older call", "tool retry", "plain retry", "ends on a call", "duplicate result",
           "starts with a result"]


_HARMLESS = ("none", "availability between results", "duplicate result", "tool retry", "plain retry")
"""Breaks the SDK's passes leave as they are: the history stays settled."""


def _same(fast: list[Any], sdk: list[Any]) -> None:
    assert fast == sdk
    assert [type(m) for m in fast] == [type(m) for m in sdk]


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(steps=st.lists(st.integers(0, 3), max_size=8), how=st.sampled_from(_BREAKS), at=st.integers(0, 20),
       repair=st.booleans())
def test_the_fast_path_answers_as_the_sdk_does(steps: list[int], how: str, at: int, repair: bool) -> None:
    history = _break(turn(steps, provider_name="anthropic"), how, at)
    expected = SDK(list(history), repair_last_response=repair)
    _same(agent_graph._clean_message_history(list(history), repair_last_response=repair), expected)
    # Seen again as the continuation of each of its prefixes, as on the steps of a turn.
    for end in range(1, len(history) + 1):
        prefix = history[:end]
        _same(agent_graph._clean_message_history(list(prefix), repair_last_response=repair),
              SDK(list(prefix), repair_last_response=repair))


@pytest.mark.parametrize("how", _HARMLESS)
def test_a_settled_history_comes_back_as_a_new_list_of_the_same_messages(how: str) -> None:
    history = _break(turn([1, 2, 0, 3], provider_name="anthropic"), how, 3)
    assert settled_history.settled(history)
    cleaned = agent_graph._clean_message_history(history, repair_last_response=True)
    assert cleaned is not history and all(a is b for a, b in zip(cleaned, history, strict=True))


@pytest.mark.parametrize("how", [b for b in _BREAKS if b not in _HARMLESS])
def test_each_break_unsettles_the_history(how: str) -> None:
    broken = _break(turn([2, 1, 2], provider_name="anthropic"), how, 2)
    assert not settled_history.settled(broken), how


def test_a_message_whose_parts_grew_is_looked_at_again() -> None:
    history = turn([1, 1], provider_name="anthropic")
    assert agent_graph._clean_message_history(history) == SDK(list(history))
    history[-1].parts.append(ToolReturnPart("read", "x", tool_call_id="nowhere"))  # appended in place
    assert agent_graph._clean_message_history(history) == SDK(list(history))
    assert len(agent_graph._clean_message_history(history)[-1].parts) == 1  # the orphan was dropped


def test_an_sdk_with_another_signature_is_left_as_it_is(monkeypatch: pytest.MonkeyPatch) -> None:
    history_scans.uninstall()

    def reshaped(messages: list[Any], *, repair_last_response: bool = False, extra: int = 0) -> list[Any]:
        return messages

    monkeypatch.setattr(agent_graph, "_clean_message_history", reshaped)
    monkeypatch.setattr(messages_module, "_clean_message_history", reshaped)
    assert history_scans.install()
    assert not settled_history.install()
    assert agent_graph._clean_message_history is reshaped
    history_scans.uninstall()
    monkeypatch.undo()
    assert history_scans.install() and settled_history.install()
