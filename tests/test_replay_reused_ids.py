"""Replay pairs calls and their stored results by place, not by id alone: a server that reuses
a tool-call id in a later turn (some local servers send ``call_0`` every time) must not get the
later call's result shown under the earlier call, in the replayed events and on screen."""

from __future__ import annotations

import pytest
from pydantic_ai.messages import ModelRequest, ModelResponse, TextPart, ToolCallPart, ToolReturnPart, UserPromptPart
from uifakes import FakeSession, Harness

from ketch.protocol import events as ev
from ketch.frontends.replay import replay_items


def _history() -> tuple[list, list[dict]]:
    messages = [
        ModelRequest(parts=[UserPromptPart(content="first")]),
        ModelResponse(parts=[ToolCallPart("shell", {"command": "echo one"}, tool_call_id="call_0")]),
        ModelRequest(parts=[ToolReturnPart("shell", "exit 0\none", tool_call_id="call_0")]),
        ModelResponse(parts=[TextPart("did one")]),
        ModelRequest(parts=[UserPromptPart(content="second")]),
        ModelResponse(parts=[ToolCallPart("shell", {"command": "echo two"}, tool_call_id="call_0")]),
        ModelRequest(parts=[ToolReturnPart("shell", "exit 0\ntwo", tool_call_id="call_0")]),
        ModelResponse(parts=[TextPart("did two")]),
    ]
    stored = [
        ev.TurnStarted(prompt="first", turn_id="t1"),
        ev.ApprovalResolved(call_id="call_0", name="shell", decision="allow", by="rule", rule="shell(echo one)"),
        ev.ToolCallFinished(call_id="call_0", name="shell", summary="exit 0\nONE-RESULT"),
        ev.TurnFinished(reason="done", turn_id="t1"),
        ev.TurnStarted(prompt="second", turn_id="t2"),
        ev.ApprovalResolved(call_id="call_0", name="shell", decision="allow", by="rule", rule="shell(echo two)"),
        ev.ToolCallFinished(call_id="call_0", name="shell", summary="exit 0\nTWO-RESULT"),
        ev.TurnFinished(reason="done", turn_id="t2"),
    ]
    return messages, [e.to_dict() for e in stored]


def test_each_call_gets_the_result_stored_in_its_place() -> None:
    messages, stored = _history()
    items = replay_items("s1", messages, stored)
    order = [(type(i).__name__, getattr(i, "args", {}).get("command") or getattr(i, "summary", "") or getattr(i, "rule", ""))
             for i in items if isinstance(i, (ev.ToolCallStarted, ev.ToolCallFinished, ev.ApprovalResolved))]
    assert order == [
        ("ToolCallStarted", "echo one"), ("ApprovalResolved", "shell(echo one)"), ("ToolCallFinished", "exit 0\nONE-RESULT"),
        ("ToolCallStarted", "echo two"), ("ApprovalResolved", "shell(echo two)"), ("ToolCallFinished", "exit 0\nTWO-RESULT"),
    ]


@pytest.mark.parametrize("columns", [80, 120])
async def test_the_resumed_screen_shows_each_result_under_its_own_call(columns: int) -> None:
    messages, stored = _history()
    async with Harness(FakeSession(), columns=columns) as h:
        await h.app.play(replay_items("s1", messages, stored))
        await h.wait_text("did two", timeout=15)
        lines = h.sink.all_lines()
    one = next(i for i, x in enumerate(lines) if x.startswith("● shell  echo one"))
    two = next(i for i, x in enumerate(lines) if x.startswith("● shell  echo two"))
    assert "ONE-RESULT" in "\n".join(lines[one:two]) and "TWO-RESULT" not in "\n".join(lines[one:two])
    assert "TWO-RESULT" in "\n".join(lines[two:])
