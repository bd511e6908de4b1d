"""The prompt queue, esc, ctrl-c, and prompts typed before the session exists."""

from __future__ import annotations

import asyncio

import pytest

from uifakes import FakeSession, Gate, Harness, RunningCommand

from ketch.protocol.events import TextDelta


def echo(prompt: str) -> list:
    return [TextDelta(text=f"answer to {prompt}\n")]


async def test_prompts_typed_mid_turn_queue_visibly_and_drain_in_order() -> None:
    session = FakeSession([[TextDelta(text="working on it\n"), Gate("hold")]], default_turn=echo)
    async with Harness(session) as h:
        await h.type("first\r")
        await h.wait_text("working on it")
        await h.type("second\r")
        await h.type("third\r")
        await h.type("/cost\r")
        await h.wait_text("⧗ queued: /cost")
        assert "⧗ queued: second" in h.sink.text() and "⧗ queued: third" in h.sink.text()
        assert session.prompts == ["first"]
        session.gate("hold").set()
        await h.idle()
        assert session.prompts == ["first", "second", "third"]
        lines = h.sink.display()
        order = [lines.index(t) for t in ("› first", "› second", "answer to second", "› third",
                                          "answer to third", "› /cost", "Session cost: $0.0000")]
        assert order == sorted(order)
        assert "queued" not in h.sink.text()


async def test_escape_cancels_the_turn_and_clears_the_queue() -> None:
    session = FakeSession([[TextDelta(text="busy\n"), Gate("never")]], default_turn=echo)
    async with Harness(session) as h:
        await h.type("first\r")
        await h.wait_text("busy")
        await h.type("second\r")
        await h.wait_text("⧗ queued: second")
        await h.type("\x1b", pause=0.3)
        await h.idle()
        assert session.cancels == 1
        assert session.prompts == ["first"]
        assert "queued" not in h.sink.text()


async def test_ctrl_c_kills_the_running_command_and_the_turn_goes_on() -> None:
    turn = [RunningCommand("c1", "sleep 100"), TextDelta(text="The command was stopped; moving on.\n")]
    session = FakeSession([turn])
    async with Harness(session) as h:
        await h.type("run it\r")
        await h.wait_text("● shell  sleep 100")
        await h.type("\x03")
        await h.wait_text("The command was stopped; moving on.")
        await h.idle()
        assert session.interrupts == 1 and session.cancels == 0
        screen = h.sink.text()
        assert "interrupted by the user" in screen
        assert h.app is not None and h.app.app.is_running


async def test_ctrl_c_clears_input_then_twice_on_empty_input_exits(monkeypatch: pytest.MonkeyPatch) -> None:
    from ketch.ui import controller

    monkeypatch.setattr(controller, "QUIT_WINDOW_S", 3600)  # no race with the quit window on a loaded machine
    async with Harness() as h:
        await h.type("some text")
        await h.type("\x03")
        await h.wait_gone("some text")
        await h.type("\x03")
        await h.wait_text("press ctrl-c again to quit")
        await h.type("\x03")
        await asyncio.wait_for(h.task, 2)
        assert h.task.result() == 0


async def test_prompt_before_the_session_is_ready_waits_then_runs() -> None:
    session = FakeSession(default_turn=echo)
    release = asyncio.Event()

    async def slow_factory() -> FakeSession:
        await release.wait()
        return session

    h = Harness(session, session_factory=slow_factory)
    from prompt_toolkit.input import create_pipe_input

    from ketch.ui.controller import KetchApp
    from uifakes import make_output

    with create_pipe_input() as pipe:
        app = KetchApp(h.config, input=pipe, output=make_output(h.sink))
        task = asyncio.ensure_future(app.run())
        await h.wait_for(lambda: "loading model" in h.sink.text())
        pipe.send_text("early bird\r")
        await h.wait_for(lambda: "⧗ queued: early bird" in h.sink.text())
        assert session.prompts == []
        release.set()
        await h.wait_for(lambda: "answer to early bird" in h.sink.text())
        app.exit(0)
        await asyncio.wait_for(task, 2)
    assert session.prompts == ["early bird"]


async def test_ctrl_d_exits_and_the_farewell_names_the_resume_command(capsys) -> None:
    from prompt_toolkit.input import create_pipe_input

    from ketch.protocol.frontend import SessionStatus
    from ketch.ui.app import run_app
    from uifakes import make_output

    session = FakeSession(status=SessionStatus(session_id="abc123", cost_usd=0.25))
    h = Harness(session)
    with create_pipe_input() as pipe:
        task = asyncio.ensure_future(run_app(h.config, input=pipe, output=make_output(h.sink)))
        await h.wait_for(lambda: "abc123" not in h.sink.text() and "$0.2500" in h.sink.text())
        pipe.send_text("\x04")
        assert await asyncio.wait_for(task, 3) == 0
    assert capsys.readouterr().out.splitlines() == ["Session abc123 · $0.2500", "Resume with: ketch --resume abc123"]
