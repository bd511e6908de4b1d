"""Approval and ask overlays: every choice reaches the session as that decision."""

from __future__ import annotations

import asyncio

import pytest
from uifakes import Approval, Ask, FakeSession, Harness

from ketch.protocol.events import TextDelta


def approval_turn(request_id: str = "r1") -> list:
    return [Approval(request_id, preview="rm -rf build"), TextDelta(text="after the decision\n")]


@pytest.mark.parametrize(
    ("keys", "decision"),
    [("1", "allow"), ("y", "allow"), ("2", "allow_session"), ("a", "allow_session"),
     ("\x1b[B\r", "allow_session"), ("\r", "allow")],
)
async def test_each_choice_reaches_the_session(keys: str, decision: str) -> None:
    session = FakeSession([approval_turn()])
    async with Harness(session) as h:
        await h.type("clean up\r")
        await h.wait_text("Allow shell?")
        assert "rm -rf build" in h.sink.text()
        await h.type(keys)
        await h.wait_text("after the decision")
        await h.idle()
        assert session.decisions == [("r1", decision, "")]
        assert "Allow shell?" not in h.sink.text()


async def test_a_subagents_request_names_the_subagent() -> None:
    session = FakeSession([[Approval("r1", name="write_file", preview="+hello", agent="worker-1"), TextDelta(text="done\n")]])
    async with Harness(session) as h:
        await h.type("delegate\r")
        await h.wait_text("Allow write_file for subagent worker-1?")
        await h.type("n")
        await h.wait_text("Reason")
        await h.type("\r")
        await h.idle()
        assert session.decisions == [("r1", "deny", "")]


async def test_deny_asks_for_a_reason_and_sends_it() -> None:
    session = FakeSession([approval_turn()])
    async with Harness(session) as h:
        await h.type("clean up\r")
        await h.wait_text("Allow shell?")
        await h.type("n")
        await h.wait_text("Reason")
        await h.type("use make clean\r")
        await h.idle()
        assert session.decisions == [("r1", "deny", "use make clean")]
        assert "shell denied (user): use make clean" in h.sink.text()


async def test_keys_typed_in_the_grace_period_are_ignored() -> None:
    session = FakeSession([approval_turn()])
    # A grace period no machine can outrun, then the clock moved past it by hand: no race
    # between the test typing and the overlay's timer.
    async with Harness(session, approval_grace=3600) as h:
        await h.type("clean up\r")
        await h.wait_text("Allow shell?")
        await h.type("y")  # too soon: typed before the overlay could be read
        await asyncio.sleep(0.1)
        assert session.decisions == []
        h.app.overlay_shown_at -= 3600  # the grace period is over
        await h.type("3\r")
        await h.idle()
        assert session.decisions == [("r1", "deny", "")]


async def test_two_requests_are_asked_one_at_a_time() -> None:
    turn = [Approval("r1", args={"command": "one"}, preview="one"),
            Approval("r2", args={"command": "two"}, preview="two")]
    session = FakeSession([turn])
    async with Harness(session) as h:
        await h.type("go\r")
        await h.wait_text("Allow shell?")
        await h.type("1")
        await h.wait_for(lambda: len(session.decisions) == 1)
        await h.wait_text("two")
        await h.type("2")
        await h.idle()
        assert session.decisions == [("r1", "allow", ""), ("r2", "allow_session", "")]


async def test_ask_choice_by_number_and_free_text() -> None:
    session = FakeSession([[Ask("q1", "Which database?", ["sqlite", "postgres"])],
                           [Ask("q2", "Name the branch")]])
    async with Harness(session) as h:
        await h.type("set up\r")
        await h.wait_text("Which database?")
        assert "2. postgres" in h.sink.text()
        await h.type("2")
        await h.idle()
        await h.type("next\r")
        await h.wait_text("Name the branch")
        await h.type("feature/x\r")
        await h.idle()
        assert session.answers == [("q1", "postgres"), ("q2", "feature/x")]


async def test_the_overlay_shows_why_it_asks() -> None:
    reason = "`> out.txt` writes a file, which no allow rule covers"
    session = FakeSession([[Approval("r1", args={"command": "git status > out.txt"}, preview="git status > out.txt",
                                     reason=reason), TextDelta(text="after\n")]])
    async with Harness(session) as h:
        await h.type("go\r")
        await h.wait_text("Allow shell?")
        assert "why it asks: " + reason in h.sink.text()
        await h.type("1")
        await h.wait_text("after")
