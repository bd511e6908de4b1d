"""``providers/anthropic_scans.py``: the Anthropic adapter's scans for native tool use give the SDK's
own answers, on histories with and without native parts, and step aside when they cannot."""

from __future__ import annotations

import copy
from typing import Any

import pydantic_ai.models.anthropic as adapter
import pytest
from pydantic_ai.messages import (
    ModelRequest,
    ModelResponse,
    NativeToolCallPart,
    NativeToolReturnPart,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)

from ketch.providers import anthropic_scans, history_scans

OPEN_TURN = adapter.open_turn_has_code_execution
DROP_UNPAIRED = adapter.drop_unpaired_native_tool_calls
FETCHED_PAGES = adapter.fetched_pages_from_history


@pytest.fixture(autouse=True)
def _sdk_as_it_was() -> Any:
    history_scans.uninstall()
    yield
    history_scans.uninstall()
    assert adapter.open_turn_has_code_execution is OPEN_TURN
    assert adapter.drop_unpaired_native_tool_calls is DROP_UNPAIRED
    assert adapter.fetched_pages_from_history is FETCHED_PAGES


def _turn(n: int, *, provider: str = "anthropic") -> list[Any]:
    history: list[Any] = [ModelRequest(parts=[UserPromptPart("read them")])]
    for i in range(n):
        history.append(ModelResponse(parts=[TextPart(f"step {i}"), ToolCallPart("read_file", {"path": f"f{i}"}, tool_call_id=f"c{i}")],
                                     provider_name=provider))
        history.append(ModelRequest(parts=[ToolReturnPart("read_file", f"content {i}", tool_call_id=f"c{i}")]))
    return history


def _code_call(tool_name: str = "code_execution") -> NativeToolCallPart:
    return NativeToolCallPart(tool_name, {"code": "print(1)"}, tool_call_id="srv1", provider_name="anthropic")


def _histories() -> dict[str, list[Any]]:
    container = _turn(3)
    container[3] = ModelResponse(parts=container[3].parts, provider_name="anthropic", provider_details={"container_id": "cnt_1"})
    other_container = _turn(3, provider="openai")
    other_container[3] = ModelResponse(parts=other_container[3].parts, provider_name="openai",
                                       provider_details={"container_id": "cnt_1"})
    empty_details = _turn(3)
    empty_details[3] = ModelResponse(parts=empty_details[3].parts, provider_name="anthropic", provider_details={"finish_reason": "x"})
    fetched = {"type": "web_fetch_result", "url": "https://docs.test/page", "retrieved_at": "2026-01-01T00:00:00Z",
               "content": {"type": "document", "title": "t", "citations": None,
                           "source": {"type": "text", "media_type": "text/plain", "data": "the fetched page"}}}
    return {
        "plain": _turn(6),
        "a fetched page": [*_turn(2), ModelResponse(parts=[NativeToolReturnPart("web_fetch", fetched, tool_call_id="srv2",
                                                                                 provider_name="anthropic")],
                                                    provider_name="anthropic"), *_turn(1)[1:]],
        "code execution in the open turn": [*_turn(2), ModelResponse(parts=[_code_call()], provider_name="anthropic"), *_turn(1)[1:]],
        "code execution before the last prompt": [ModelResponse(parts=[_code_call()], provider_name="anthropic"), *_turn(3)],
        "another native tool": [*_turn(2), ModelResponse(parts=[_code_call("web_search")], provider_name="anthropic")],
        "a native result": [*_turn(2), ModelResponse(parts=[NativeToolReturnPart("code_execution", {"ok": 1}, tool_call_id="srv1",
                                                                                    provider_name="anthropic")],
                                                     provider_name="anthropic")],
        "a container": container,
        "another provider's container": other_container,
        "details without a container": empty_details,
    }


def _blocks() -> dict[str, list[Any]]:
    tool_result = {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "c1", "content": "x"}]}
    return {
        "plain": [{"role": "user", "content": [{"type": "text", "text": "hi"}]},
                  {"role": "assistant", "content": [{"type": "tool_use", "id": "c1", "name": "f", "input": {}}]}, tool_result],
        "unpaired server tool use, then text": [
            {"role": "assistant", "content": [{"type": "text", "text": "a"}, {"type": "server_tool_use", "id": "s1", "name": "web_search", "input": {}}]},
            {"role": "user", "content": [{"type": "text", "text": "next"}]},
        ],
        "paired server tool use": [
            {"role": "assistant", "content": [{"type": "server_tool_use", "id": "s1", "name": "web_search", "input": {}},
                                              {"type": "web_search_tool_result", "tool_use_id": "s1", "content": []}]},
            {"role": "user", "content": [{"type": "text", "text": "next"}]},
        ],
        "unpaired mcp tool use alone": [
            {"role": "assistant", "content": [{"type": "mcp_tool_use", "id": "m1", "name": "x", "server_name": "s", "input": {},
                                               "cache_control": {"type": "ephemeral"}}]},
            {"role": "user", "content": [{"type": "text", "text": "next"}]},
        ],
    }


def _open_turn_answers(histories: dict[str, list[Any]]) -> dict[str, tuple[Any, ...]]:
    return {name: (adapter.open_turn_has_code_execution(h, "anthropic"), adapter.open_turn_has_code_execution(h, "openai"),
                   adapter.fetched_pages_from_history(h))
            for name, h in histories.items()}


def _dropped(blocks: dict[str, list[Any]]) -> dict[str, Any]:
    out = {}
    for name, messages in blocks.items():
        messages = copy.deepcopy(messages)
        adapter.drop_unpaired_native_tool_calls(messages)
        out[name] = messages
    return out


def test_the_scans_answer_as_the_sdks() -> None:
    histories = _histories()
    expected_turns = _open_turn_answers(histories)
    expected_drops = _dropped(_blocks())
    assert any(a for a, _, _ in expected_turns.values()) and not expected_turns["plain"][0]
    assert expected_turns["a fetched page"][2] == [("https://docs.test/page", "the fetched page")]
    assert expected_drops["unpaired server tool use, then text"] != _blocks()["unpaired server tool use, then text"]
    assert history_scans.install() and anthropic_scans.install()
    assert adapter.open_turn_has_code_execution is not OPEN_TURN and adapter.fetched_pages_from_history is not FETCHED_PAGES
    for _ in range(2):  # and again, from the memo
        assert _open_turn_answers(histories) == expected_turns
        assert _dropped(_blocks()) == expected_drops


def test_a_native_part_added_later_is_seen() -> None:
    assert history_scans.install() and anthropic_scans.install()
    history = _turn(4)
    assert not adapter.open_turn_has_code_execution(history, "anthropic")
    history = [*history, ModelResponse(parts=[_code_call()], provider_name="anthropic")]
    assert adapter.open_turn_has_code_execution(history, "anthropic")
    history[3].parts = [*history[3].parts, _code_call()]  # a parts list replaced in place is classified again
    assert adapter.open_turn_has_code_execution(history[:5], "anthropic")


def test_what_the_sdk_would_refuse_it_still_refuses() -> None:
    assert history_scans.install() and anthropic_scans.install()
    with pytest.raises(AssertionError):
        adapter.drop_unpaired_native_tool_calls([{"role": "user", "content": "a string"}])
    assert anthropic_scans.has_native_use([{"role": "user", "content": ["not a dict"]}])
    assert not anthropic_scans.has_native_use([])


def test_nothing_is_wrapped_without_the_history_scans_or_with_other_signatures(monkeypatch: pytest.MonkeyPatch) -> None:
    assert not anthropic_scans.install()
    assert adapter.open_turn_has_code_execution is OPEN_TURN
    assert history_scans.install()
    monkeypatch.setattr(adapter, "drop_unpaired_native_tool_calls", lambda messages, extra=None: None)
    assert not anthropic_scans.install()
    assert adapter.open_turn_has_code_execution is OPEN_TURN
    monkeypatch.undo()
    assert anthropic_scans.install() and anthropic_scans.install()  # twice: wrapped once
    history_scans.uninstall()
    assert adapter.open_turn_has_code_execution is OPEN_TURN and adapter.drop_unpaired_native_tool_calls is DROP_UNPAIRED


def test_the_switch_turns_them_off(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KETCH_SDK_FASTPATHS", "0")
    assert not history_scans.install()
    assert not anthropic_scans.install()
    assert adapter.open_turn_has_code_execution is OPEN_TURN
