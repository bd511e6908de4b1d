"""Keys as people expect them: ctrl-c stops a command or the answer (partial kept and
marked), twice on an empty idle prompt within a second quits, ctrl-d quits, a first-run
hint names them."""

from __future__ import annotations

import asyncio

import pytest

from uifakes import FakeSession, Gate, Harness, RunningCommand

from ketch.protocol.events import TextDelta


async def test_ctrl_c_stops_a_streaming_answer_keeps_it_and_marks_it() -> None:
    turn = [TextDelta(text="The first paragraph is complete.\n\nThe second one is half"), Gate("never")]
    session = FakeSession([turn])
    async with Harness(session) as h:
        await h.type("explain\r")
        await h.wait_text("The second one is half")
        await h.type("\x03")
        await h.idle()
        assert session.cancels == 1 and session.interrupts == 1  # no command ran, so the turn stopped
        lines = h.sink.display()
        first = lines.index("The first paragraph is complete.")
        assert lines[first + 2] == "The second one is half"
        assert "⎿ stopped by the user; the answer above is incomplete" in lines
        assert h.app is not None and h.app.app.is_running and not h.app.busy


async def test_ctrl_c_during_a_command_stops_only_the_command_and_a_second_press_does_not_quit() -> None:
    turn = [RunningCommand("c1", "sleep 100"), TextDelta(text="Moving on.\n"), Gate("after")]
    session = FakeSession([turn])
    async with Harness(session) as h:
        await h.type("run\r")
        await h.wait_text("● shell  sleep 100")
        await h.type("\x03")
        await h.wait_text("Moving on.")
        assert session.cancels == 0
        await h.type("\x03")  # now the answer is what runs: it stops, ketch stays
        await h.idle()
        assert session.cancels == 1 and h.app is not None and h.app.app.is_running


async def test_ctrl_c_twice_within_a_second_on_an_empty_idle_prompt_quits_but_not_slower(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The window (a second in use) is set per step so the test never races it: short to
    show it closing, then longer than any stall of a loaded machine to show a press inside it quits."""
    from ketch.ui import controller

    async with Harness() as h:
        monkeypatch.setattr(controller, "QUIT_WINDOW_S", 0.2)
        await h.type("\x03")
        await h.wait_text("press ctrl-c again to quit (or ctrl-d)")
        await asyncio.sleep(0.35)  # past the window (its timer was set first, so it has fired)
        assert h.app is not None and h.app.app.is_running
        await h.wait_gone("press ctrl-c again")
        monkeypatch.setattr(controller, "QUIT_WINDOW_S", 3600)
        await h.type("\x03")
        await h.wait_text("press ctrl-c again to quit")
        await h.type("\x03")
        assert await asyncio.wait_for(h.task, 2) == 0


async def test_ctrl_d_on_an_empty_prompt_quits_but_not_with_text() -> None:
    async with Harness() as h:
        await h.type("abc\x04")
        await asyncio.sleep(0.1)
        assert h.app is not None and h.app.app.is_running
        await h.type("\x15\x04")  # ctrl-u empties the line
        assert await asyncio.wait_for(h.task, 2) == 0


async def test_a_first_run_hint_names_the_keys_until_the_first_prompt() -> None:
    session = FakeSession(default_turn=lambda p: [TextDelta(text="ok\n")])
    async with Harness(session, columns=160) as h:
        await h.wait_text("ctrl-d or ctrl-c twice quits")
        assert "esc cancels the turn" in h.sink.text() and "ctrl-o output" in h.sink.text()
        await h.type("hi\r")
        await h.idle()
        assert "ctrl-c twice quits" not in h.sink.text()
    async with Harness(FakeSession(), columns=160, load_history=lambda: ["earlier prompt"]) as h:
        await asyncio.sleep(0.1)
        assert "ctrl-c twice quits" not in h.sink.text()
