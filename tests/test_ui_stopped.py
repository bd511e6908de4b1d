"""Nothing shown is taken back, at 80 and 120 columns: a call running when the turn is stopped
(esc) keeps its headline and the lines it printed in the transcript, marked stopped; a command
stopped with ctrl-c keeps the lines it printed in its result (the brief of an interrupted
command is made from the live output)."""

from __future__ import annotations

import pytest
from test_ui_results import shell_turn
from uifakes import FakeSession, Gate, Harness

from ketch.protocol.events import ToolCallStarted, ToolOutputChunk
from ketch.core.tool_brief import OutputTails, brief
from ketch.tools.shell import INTERRUPTED_MESSAGE


@pytest.mark.parametrize("columns", [80, 120])
async def test_esc_keeps_the_running_calls_headline_and_printed_lines_marked_stopped(columns: int) -> None:
    turn = [ToolCallStarted(call_id="c1", name="shell", args={"command": "make build"}),
            ToolOutputChunk(call_id="c1", text="".join(f"compiling unit {i}\n" for i in range(8))),
            Gate("never")]
    session = FakeSession([turn])
    async with Harness(session, columns=columns) as h:
        await h.type("build it\r")
        await h.wait_text("compiling unit 7")
        await h.type("\x1b")
        await h.idle()
        text = "\n".join(h.sink.all_lines())
        assert "● shell  make build" in text
        assert "    … 3 earlier lines" in text
        assert all(f"    compiling unit {i}" in text for i in range(3, 8))
        assert "  ⎿ stopped by the user before it finished" in text
        screen = h.sink.screen
        lines = h.sink.display()
        y = next(i for i, line in enumerate(lines) if "stopped by the user before" in line)
        assert screen.buffer[y][lines[y].index("stopped")].fg == "brown"  # yellow: stopped, not failed


def test_an_interrupted_commands_brief_keeps_what_it_printed() -> None:
    tails = OutputTails()
    tails.add("c", "step 1\nstep 2\n", "stdout")
    summary = brief("shell", {}, INTERRUPTED_MESSAGE, is_error=True, tail=tails.pop("c"))
    assert summary.splitlines() == [INTERRUPTED_MESSAGE, "step 1", "step 2"]


@pytest.mark.parametrize("columns", [80, 120])
async def test_ctrl_c_keeps_the_lines_the_command_printed(columns: int) -> None:
    chunks = [("stdout", "step 1\nstep 2\n")]
    session = FakeSession([shell_turn("c1", "sleep 30", chunks, INTERRUPTED_MESSAGE, is_error=True)])
    async with Harness(session, columns=columns) as h:
        await h.type("go\r")
        await h.idle()
        text = h.sink.text()
        assert "● shell  sleep 30" in text and "The user interrupted this command" in text
        assert "    step 1\n    step 2" in text
