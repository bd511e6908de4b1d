"""The task list follows the history: a resumed or forked session holds the list its last
successful ``todo_write`` wrote, and never tells the model the list is empty when it is not.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from fakeprovider import FakeProvider, ToolCall, Turn, tool_results
from kettle import adhoc, run_ketch
from pydantic_ai.messages import ModelRequest, ModelResponse, ToolCallPart, ToolReturnPart

from ketch.tools.notebook import written_in

TODOS = [{"content": "Survey the files", "status": "completed"}, {"content": "Write the report", "status": "in_progress"}]


def call(call_id: str, args: object) -> ModelResponse:
    return ModelResponse(parts=[ToolCallPart("todo_write", args, tool_call_id=call_id)])


def result(call_id: str, outcome: str = "success") -> ModelRequest:
    return ModelRequest(parts=[ToolReturnPart("todo_write", "…", tool_call_id=call_id, outcome=outcome)])  # type: ignore[arg-type]


def test_the_newest_successful_write_wins() -> None:
    history = [call("a", {"todos": TODOS}), result("a"),
               call("b", {"todos": [{"content": "later", "status": "pending"}]}), result("b", outcome="failed")]
    assert [i.content for i in written_in(history)] == ["Survey the files", "Write the report"]


@pytest.mark.parametrize("args", [
    '{"todos": [{"content": "", "status": "pending"}]}',  # no content
    {"todos": [{"content": "x", "status": "finished"}]},  # unknown status
    {"todos": "not a list"},
    "not json at all",
])
def test_a_stored_call_that_no_longer_validates_is_passed_over(args: object) -> None:
    history = [call("a", {"todos": TODOS}), result("a"), call("b", args), result("b")]
    assert [i.status for i in written_in(history)] == ["completed", "in_progress"]


def test_a_call_without_its_result_or_a_denied_one_counts_for_nothing() -> None:
    assert written_in([call("a", {"todos": TODOS})]) == []
    assert written_in([call("a", {"todos": TODOS}), result("a", outcome="denied")]) == []


@pytest.mark.parametrize("wire", ["openai-chat", "anthropic-messages"])
def test_continue_keeps_the_list(wire: str, tmp_path: Path) -> None:
    script = [
        Turn(tool_calls=[ToolCall("todo_write", {"todos": TODOS}, id="call_w")]), Turn(text="planned"),
        Turn(tool_calls=[ToolCall("todo_read", {}, id="call_r")]), Turn(text="read"),
    ]
    with FakeProvider(script) as fake:
        first = run_ketch(["-p", "plan it", *adhoc(fake, wire)], tmp_path)
        second = run_ketch(["-p", "where were we?", "--continue", *adhoc(fake, wire)], tmp_path)
    assert first.code == 0 and second.code == 0, first.stderr + second.stderr
    resumed = fake.model_requests[2]
    assert "# Task list\n(none)" not in str(resumed.body), "the resumed session told the model its list was empty"
    [(_, shown)] = [r for r in tool_results(fake.model_requests[3]) if r[0] == "call_r"]
    assert "[x] 1. Survey the files" in shown and "[~] 2. Write the report" in shown
