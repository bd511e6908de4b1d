"""The session task list and its tools."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import pytest
from pydantic_ai.exceptions import ToolFailed

from ketch.protocol.events import TodoUpdated
from ketch.tools.notebook import TOOLS, Notebook, TodoItem, todo_read, todo_write
from ketch.tools.base import ToolDeps


@dataclass
class FakeWorkspace:
    root: Path = field(default_factory=Path.cwd)


@dataclass
class Ctx:
    deps: ToolDeps
    tool_call_id: str = "call_1"


def make_ctx(notebook: Notebook | None, events: list) -> Ctx:
    extras = {"notebook": notebook} if notebook is not None else {}
    return Ctx(ToolDeps(workspace=FakeWorkspace(), emit=events.append, extras=extras))


def test_write_replaces_and_renders() -> None:
    book = Notebook()
    assert book.render_for_prompt() == ""
    book.write([{"content": "read the code", "status": "completed"}, {"content": "fix it", "status": "in_progress"}])
    book.write([{"id": "a", "content": "fix it", "status": "in_progress"}, {"content": "test it"}])
    assert book.items == [TodoItem("a", "fix it", "in_progress"), TodoItem("2", "test it", "pending")]
    assert book.as_dicts() == [
        {"id": "a", "content": "fix it", "status": "in_progress"},
        {"id": "2", "content": "test it", "status": "pending"},
    ]
    assert book.render_for_prompt().splitlines()[1:] == ["[~] a. fix it", "[ ] 2. test it"]


@pytest.mark.parametrize(
    ("items", "message"),
    [
        ([{"content": "x", "status": "done"}], "status 'done'"),
        ([{"content": "  ", "status": "pending"}], "no content"),
        ([{"id": "1", "content": "x"}, {"id": "1", "content": "y"}], "repeats id"),
        (["just text"], "must be an object"),
    ],
)
def test_bad_items_are_rejected_and_the_list_is_kept(items: list, message: str) -> None:
    book = Notebook()
    book.write([{"content": "keep me", "status": "pending"}])
    with pytest.raises(ValueError, match=message):
        book.write(items)
    assert book.as_dicts() == [{"id": "1", "content": "keep me", "status": "pending"}]


async def test_todo_write_emits_event_and_todo_read_shows_list() -> None:
    assert [(t.name, t.kind) for t in TOOLS] == [("todo_write", "meta"), ("todo_read", "read")]
    events: list = []
    book = Notebook()
    ctx = make_ctx(book, events)
    assert await todo_read(ctx) == "The task list is empty."
    reply = await todo_write(ctx, [{"content": "plan", "status": "completed"}, {"content": "build", "status": "pending"}])
    assert reply == await todo_read(ctx) == book.render_for_prompt()
    assert events == [
        TodoUpdated(
            items=[
                {"id": "1", "content": "plan", "status": "completed"},
                {"id": "2", "content": "build", "status": "pending"},
            ]
        )
    ]


async def test_todo_write_bad_status_fails_without_event() -> None:
    events: list = []
    book = Notebook()
    with pytest.raises(ToolFailed, match="task list not changed: item 1 has status 'finished'"):
        await todo_write(make_ctx(book, events), [{"content": "x", "status": "finished"}])
    assert events == [] and book.items == []
    with pytest.raises(ToolFailed, match="not available"):
        await todo_read(make_ctx(None, events))


async def test_todo_write_through_an_agent_run_validates_and_updates() -> None:
    from pydantic_ai import Agent
    from pydantic_ai.messages import ModelResponse, TextPart, ToolCallPart, ToolReturnPart
    from pydantic_ai.models.function import AgentInfo, FunctionModel

    def model(messages: list, info: AgentInfo) -> ModelResponse:
        if len(messages) == 1:
            todos = [{"content": "write code", "status": "in_progress"}, {"content": "test", "status": "pending"}]
            return ModelResponse(parts=[ToolCallPart("todo_write", {"todos": todos}, "c1")])
        return ModelResponse(parts=[TextPart("done")])

    events: list = []
    book = Notebook()
    agent = Agent(FunctionModel(model), deps_type=ToolDeps, tools=[t.function for t in TOOLS])
    result = await agent.run("plan", deps=make_ctx(book, events).deps)
    assert [i.content for i in book.items] == ["write code", "test"]
    assert len(events) == 1
    returns = [p for m in result.all_messages() for p in m.parts if isinstance(p, ToolReturnPart)]
    assert returns[0].content == book.render_for_prompt()
