"""State moves without moving the instructions: a task list written in step 1 reaches the model in
step 2 of the same turn (the todo_write result shows it, and no reminder repeats it), while the
instructions stay byte-identical (checked on the wire of the fake provider)."""

from __future__ import annotations

from pathlib import Path

import pytest
from fakeprovider import FakeProvider, ToolCall, Turn, instructions, reminder_texts, tool_results, user_texts
from kettle import adhoc, run_ketch

TASK = "Rename the frobnicator module"


@pytest.mark.parametrize("wire", ["openai-chat", "openai-responses"])
def test_todo_write_in_step_one_is_in_step_two_request(wire: str, tmp_path: Path) -> None:
    todos = [{"content": TASK, "status": "in_progress"}, {"content": "Update the imports", "status": "pending"}]
    script = [Turn(tool_calls=[ToolCall("todo_write", {"todos": todos})]), Turn(text="Planned.")]
    with FakeProvider(script) as fake:
        run = run_ketch(["-p", "plan the rename", *adhoc(fake, wire)], tmp_path)
    assert run.code == 0, run.stderr
    first, second = fake.model_requests
    assert TASK not in instructions(first)
    [(_, result)] = tool_results(second)
    assert "error" not in result.lower(), result
    assert instructions(second) == instructions(first)
    assert TASK in result and "Update the imports" in result and "Current task list" in result
    assert reminder_texts(second) == reminder_texts(first)  # the opening reminder only: nothing said twice
    assert not any(TASK in text for text in reminder_texts(second))
    assert user_texts(second) == ["plan the rename"]
