"""The fast paths of ``wire/history_scans.py`` give the SDK's own answers, see changes, stay
bounded, and step aside for an SDK they were not written against; the model memos
(``lookalike_memo``) step aside the same way."""

from __future__ import annotations

from typing import Any

import pydantic_ai._agent_graph as agent_graph
import pydantic_ai._deferred_capabilities as deferred
import pydantic_ai._instructions as instructions
import pydantic_ai.messages as messages_module
import pydantic_ai.models as models_module
import pydantic_ai.toolsets._tool_search as tool_search
import pytest
from pydantic_ai._deferred_capabilities import LoadCapabilityCallPart, LoadCapabilityReturnPart
from pydantic_ai.messages import (
    BinaryContent,
    CapabilityLoadDeltaPart,
    CompactionPart,
    ModelRequest,
    ModelResponse,
    TextPart,
    ToolAvailabilityDeltaPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)

from pydantic_ai.profiles import ModelProfile

from ketch.wire import history_scans

ORIGINALS = {
    "window": messages_module._post_compaction_window_start,
    "discovered": tool_search._discovered_tool_names_in_order,
    "loads": deferred._parse_loaded_capabilities,
    "of": instructions.LoadedInstructionValues.__dict__["of"],
}


@pytest.fixture(autouse=True)
def _sdk_as_it_was() -> Any:
    history_scans.uninstall()
    yield
    history_scans.uninstall()


def _steps(n: int) -> list[Any]:
    history: list[Any] = [ModelRequest(parts=[UserPromptPart("read them")])]
    for i in range(n):
        history.append(ModelResponse(parts=[TextPart(f"step {i}"), ToolCallPart("read_file", {"path": f"f{i}"}, tool_call_id=f"c{i}")],
                                     provider_name="openai"))
        history.append(ModelRequest(parts=[ToolReturnPart("read_file", f"content {i}", tool_call_id=f"c{i}")]))
    return history


def _with(part: Any, *, in_response: bool = False, at: int = 3) -> list[Any]:
    history = _steps(6)
    message = history[at] if isinstance(history[at], ModelResponse) == in_response else history[at + 1]
    message.parts = [*message.parts, part]
    return history


def _histories() -> dict[str, list[Any]]:
    return {
        "plain": _steps(6),
        "compaction in a response": _with(CompactionPart("summary", provider_name="openai"), in_response=True),
        "summary compaction in a request": _with(CompactionPart("summary")),
        "capability load delta": _with(CapabilityLoadDeltaPart(loaded=["cap"])),
        "load exchange": [
            *_steps(2),
            ModelResponse(parts=[LoadCapabilityCallPart(tool_call_id="l1", args={"capability_id": "cap"})]),
            ModelRequest(parts=[LoadCapabilityReturnPart(tool_call_id="l1", content={"capability_id": "cap"})]),
            *_steps(1)[1:],
        ],
        "tool availability": _with(ToolAvailabilityDeltaPart(tools_added=["grep"])),
        "tool result with a file": _with(
            ToolReturnPart("read_file", ["see", BinaryContent(b"\x89PNG", media_type="image/png")], tool_call_id="f1")
        ),
        "tool result of data": _with(ToolReturnPart("read_file", {"rows": 2}, tool_call_id="d1")),
        "legacy search_tools return": _with(
            ToolReturnPart("search_tools", "found", tool_call_id="s1", metadata={"discovered_tools": ["grep", "glob"]})
        ),
    }


_TEXT_ONLY = ModelProfile(supports_image_input=False)
"""A profile whose model reads no file a tool returns."""


def _accept_all(response: Any, part: Any) -> bool:
    return True


def _answers(history: list[Any]) -> tuple[Any, ...]:
    of = instructions.LoadedInstructionValues.of(history)
    serving = next(m for m in reversed(history) if isinstance(m, ModelResponse))
    return (
        models_module._trim_messages_before_compaction(history, _accept_all),
        models_module._trim_messages_before_compaction(history, _accept_all, standing_prompt_retained=True),
        messages_module._post_compaction_window_for_response(history, serving),
        messages_module._post_compaction_window_for_response(history, serving, _accept_all),
        messages_module._post_compaction_window_start(history),
        messages_module.post_compaction_window(history),
        tool_search._discovered_tool_names_in_order(history),
        tool_search.discovered_tool_names_in_order(history),
        deferred._parse_loaded_capabilities(history),
        deferred.parse_loaded_capabilities(history),
        (of.values, of._changed, of._unstated, type(of)),
        models_module._replace_unsupported_tool_return_files(history, _TEXT_ONLY),
        models_module._replace_unsupported_tool_return_files(history, _TEXT_ONLY) is history,
    )


def test_every_scan_answers_as_the_sdk_does_with_and_without_the_parts_it_reads() -> None:
    histories = _histories()
    expected = {name: _answers(history) for name, history in histories.items()}
    assert any(answer[6] for answer in expected.values()) and any(answer[8] for answer in expected.values())
    assert any(answer[4] != (0, 0) for answer in expected.values())
    assert any(len(answer[0]) < len(history) for answer, history in zip(expected.values(), histories.values()))
    assert not all(answer[-1] for answer in expected.values())  # some history had a file replaced
    assert history_scans.install()
    assert messages_module._post_compaction_window_start is not ORIGINALS["window"]
    for name, history in histories.items():
        assert _answers(history) == expected[name], name
        assert _answers(history) == expected[name], name  # and again, from the memo


def test_a_serving_response_missing_from_the_history_fails_as_in_the_sdk() -> None:
    history = _steps(3)
    stranger = ModelResponse(parts=[TextPart("not in it")], provider_name="openai")
    with pytest.raises(AssertionError):
        messages_module._post_compaction_window_for_response(history, stranger)
    assert history_scans.install()
    with pytest.raises(AssertionError):
        messages_module._post_compaction_window_for_response(history, stranger)


def test_the_scans_are_wrapped_where_the_sdk_binds_them_and_put_back() -> None:
    assert history_scans.install()
    for owner in (messages_module, instructions, models_module):
        assert owner._post_compaction_window_start is messages_module._post_compaction_window_start
    assert agent_graph._discovered_tool_names_in_order is tool_search._discovered_tool_names_in_order
    assert agent_graph._parse_loaded_capabilities is deferred._parse_loaded_capabilities
    sdk_window_scan = history_scans.original(tool_search, "discovered_tool_names_in_order")
    assert sdk_window_scan is not None and tool_search.discovered_tool_names_in_order is not sdk_window_scan
    history_scans.uninstall()
    assert tool_search.discovered_tool_names_in_order is sdk_window_scan
    for owner in (messages_module, instructions, models_module):
        assert owner._post_compaction_window_start is ORIGINALS["window"]
    assert agent_graph._discovered_tool_names_in_order is ORIGINALS["discovered"]
    assert deferred._parse_loaded_capabilities is ORIGINALS["loads"]
    assert instructions.LoadedInstructionValues.__dict__["of"] is ORIGINALS["of"]


def test_a_message_changed_after_it_was_seen_is_looked_at_again() -> None:
    assert history_scans.install()
    history = _steps(5)
    assert messages_module._post_compaction_window_start(history) == (0, 0)
    history[4].parts.append(CompactionPart("summary", provider_name="openai"))  # appended in place
    assert messages_module._post_compaction_window_start(history) == ORIGINALS["window"](history) == (4, 0)
    history = _steps(5)
    assert tool_search._discovered_tool_names_in_order(history) == ()
    history[4].parts = [*history[4].parts, ToolAvailabilityDeltaPart(tools_added=["glob"])]  # replaced
    assert tool_search._discovered_tool_names_in_order(history) == ("glob",)
    grown = [*history, ModelRequest(parts=[CapabilityLoadDeltaPart(loaded=["cap"])])]  # a longer history
    assert deferred._parse_loaded_capabilities(grown) == {"cap"}


def test_the_memo_holds_a_few_histories_only() -> None:
    kinds = history_scans._Kinds(history_scans._classifier())
    for n in range(50):
        assert kinds.none_of(_steps(n % 7 + 1), history_scans._COMPACTION)
    assert len(kinds) <= history_scans._REMEMBERED


def test_an_sdk_with_other_signatures_is_left_as_it_is(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(history_scans._EXPECTED_PARAMETERS, "_parse_loaded_capabilities", ["messages", "window"])
    assert not history_scans.install()
    assert not history_scans.installed()
    assert messages_module._post_compaction_window_start is ORIGINALS["window"]
    assert deferred._parse_loaded_capabilities is ORIGINALS["loads"]


def test_an_sdk_that_binds_a_scan_elsewhere_is_left_as_it_is(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(models_module, "_post_compaction_window_start", lambda messages: (0, 0))
    assert not history_scans.install()
    assert messages_module._post_compaction_window_start is ORIGINALS["window"]


def test_the_switch_turns_everything_off(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KETCH_SDK_FASTPATHS", "0")
    assert not history_scans.install()
    from ketch.providers.models import build_model
    from ketch.wire.messages import AnthropicMessagesModel
    from ketch.wire.responses import ResponsesModel

    assert type(build_model(_claude())) is AnthropicMessagesModel  # ketch's own: no SDK fast path to switch
    assert type(build_model(_claude(), "openai-responses")) is ResponsesModel


def test_the_model_memos_step_aside_for_other_signatures() -> None:
    from pydantic_ai.models.anthropic import AnthropicModel

    from ketch.wire import lookalike_memo
    from ketch.wire.responses import ResponsesModel

    assert lookalike_memo.usable(ResponsesModel) and lookalike_memo.usable(AnthropicModel)

    class Renamed(AnthropicModel):
        def _request_with_lookalike_notes(self, authored: Any, request: Any, *, first: bool) -> Any:  # type: ignore[override]
            return None

    assert not lookalike_memo.usable(Renamed)


def _claude() -> Any:
    from ketch.config.settings import Connection
    from ketch.config.presets import PRESETS

    return Connection(name="anthropic", preset=PRESETS["anthropic"], model_name="claude-sonnet-4-5",
                      base_url="http://127.0.0.1:9", api_key="k", key_env="ANTHROPIC_API_KEY", wire="anthropic-messages")


def test_build_model_uses_the_sdk_class_when_the_memo_cannot_be_used(monkeypatch: pytest.MonkeyPatch) -> None:
    from ketch.config.settings import Connection
    from ketch.wire import lookalike_memo
    from ketch.providers.models import build_model
    from ketch.config.presets import PRESETS
    from ketch.wire.responses import NotedResponsesModel, ResponsesModel

    conn = Connection(name="openai", preset=PRESETS["openai"], model_name="gpt-5", base_url="http://127.0.0.1:9/v1",
                      api_key="k", key_env="OPENAI_API_KEY", wire="openai-responses")
    assert type(build_model(conn)) is NotedResponsesModel
    monkeypatch.setattr(lookalike_memo, "usable", lambda cls: False)
    assert type(build_model(conn)) is ResponsesModel
    monkeypatch.undo()

