"""A cancel at any point of a turn loses nothing the user typed or was shown.

One scripted session through the real wiring (``build_session``) and the fake provider: for
every event boundary k of a three-step turn, the turn is cancelled right after event k (what
Esc in the UI and SIGINT headless both do: ``Session.cancel_turn``), two more prompts follow,
and the next round resumes the session from the store (``--continue``). Checked each round:
every prompt is stored, in order; the text shown before the cancel is stored, marked as
cancelled when the answer was cut; no two responses follow each other. At the end every
request the provider received passes the strict history rules of its wire.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from durable_session import (
    LONG_ANSWER,
    WIRES,
    no_two_responses_in_a_row,
    open_session,
    run,
    scripted_turn,
    stored_messages,
    stored_prompts,
    stored_text,
    workdir,
)
from fakeprovider import FakeProvider, Turn, user_texts
from wire_rules import assert_valid

from ketch.protocol import events as ev
from ketch.core.turn_record import CANCELLED_MARKER, CUT_OFF_BY_USER, NOT_RUN_BY_USER


def boundaries(events: list[ev.AgentEvent]) -> list[int]:
    """Every event index, except the inner ones of a run of text deltas (the same boundary)."""
    keep = []
    for i, event in enumerate(events[:-1]):  # after TurnFinished there is nothing to cancel
        inner = 0 < i < len(events) - 2 and all(isinstance(events[j], ev.TextDelta) for j in (i - 1, i, i + 1))
        if not inner or i % 5 == 0:
            keep.append(i)
    return keep


def _shown_tail(events: list[ev.AgentEvent]) -> str:
    """The text of the answer being shown when the cancel came (after the last tool call)."""
    tail: list[str] = []
    for event in events:
        if isinstance(event, ev.ToolCallStarted):
            tail.clear()
        elif isinstance(event, ev.TextDelta):
            tail.append(event.text)
    return "".join(tail)


@pytest.mark.parametrize("wire", WIRES)
async def test_a_cancel_at_every_event_keeps_the_prompts_the_text_and_a_valid_history(tmp_path: Path, wire: str) -> None:
    cwd = workdir(tmp_path)
    with FakeProvider() as fake:
        fake.add(*scripted_turn("ref"))
        session = await open_session(fake, wire, cwd)
        reference = await run(session, "reference prompt")
        await session.aclose()
        assert isinstance(reference[-1], ev.TurnFinished) and reference[-1].reason == "done"
        prompts = ["reference prompt"]
        cancelled = 0
        for k in boundaries(reference):
            session = await open_session(fake, wire, cwd, resume=True)
            fake.add(*scripted_turn(f"k{k}"))
            events = await run(session, f"cancelled at {k}", cancel_at=k)
            fake.script.clear()  # what the cancelled turn did not ask for
            shown = _shown_tail(events[: k + 1])
            fake.add(Turn(text=f"after {k}, one"), Turn(text=f"after {k}, two"))
            assert (await run(session, f"next {k} one"))[-1].reason == "done"
            assert (await run(session, f"next {k} two"))[-1].reason == "done"
            await session.aclose()
            prompts += [f"cancelled at {k}", f"next {k} one", f"next {k} two"]

            messages = stored_messages()
            assert stored_prompts(messages) == prompts, k
            text = stored_text(messages)
            assert shown in text, (k, shown)
            if events[-1].reason == "cancelled":
                cancelled += 1
                assert CANCELLED_MARKER in text or "".join(LONG_ANSWER) + f"k{k}" in text, k
            assert no_two_responses_in_a_row(messages), k
            assert user_texts(fake.model_requests[-1])[-1] == f"next {k} two"
        assert cancelled >= len(boundaries(reference)) // 2  # most cancels land before the turn ends by itself

        session = await open_session(fake, wire, cwd, resume=True)
        fake.add(Turn(text="resumed"))
        assert (await run(session, "after the resume"))[-1].reason == "done"
        await session.aclose()
    assert_valid(fake.model_requests)
    assert not fake.rejections, fake.rejections
    assert stored_prompts(stored_messages()) == [*prompts, "after the resume"]


async def test_a_cancel_while_tools_run_answers_every_call(tmp_path: Path) -> None:
    """Cut during the second step's tools: every call gets a result (real, or the note that the
    user cancelled) and the next request sends them in order."""
    cwd = workdir(tmp_path)
    with FakeProvider() as fake:
        fake.add(*scripted_turn("t"))
        session = await open_session(fake, "openai-chat", cwd)
        seen: list[ev.AgentEvent] = []
        async for event in session.run_turn("read both"):
            seen.append(event)
            if isinstance(event, ev.ToolCallStarted) and event.call_id == "t_3":
                session.cancel_turn()
        fake.script.clear()
        fake.add(Turn(text="fine"))
        await run(session, "go on")
        await session.aclose()
    results = {call_id: content for call_id, content in _results(fake.model_requests[-1])}
    assert set(results) == {"t_1", "t_2", "t_3"}
    assert "alpha" in results["t_1"]
    assert any(note in results["t_3"] for note in (CUT_OFF_BY_USER, NOT_RUN_BY_USER)) or "a.txt" in results["t_3"]
    assert_valid(fake.model_requests)


def _results(request):  # noqa: ANN001, ANN202
    from fakeprovider import tool_results

    return tool_results(request)


# ---------------------------------------------------------------- Esc in the UI


async def test_esc_in_the_ui_during_a_long_answer_then_two_prompts_then_quit_keeps_everything(tmp_path: Path) -> None:
    """The report of issue 17: Esc during a long answer (while its text still flows), two more
    prompts, /quit. The store holds the three prompts, the cut answer marked as cancelled, and a
    resume sends a valid history. (Esc at every boundary, on every wire, the stream held there:
    ``test_cancel_where_users_cancel``.)"""
    import asyncio

    from kettle import adhoc
    from uifakes import Harness, app_config_fields

    from ketch.frontends.cli import _main_parser
    from ketch.frontends.interactive import Interactive

    cwd = workdir(tmp_path)
    pieces = [f"word{i} " for i in range(300)]
    first = Turn(text="".join(pieces), text_pieces=pieces, chunk_delay=0.05)
    with FakeProvider([first, Turn(text="second answer"), Turn(text="third answer")]) as fake:
        runtime = Interactive(_main_parser().parse_args([*adhoc(fake, "openai-chat"), "--yolo", "--cwd", str(cwd)]), cwd)
        config = runtime.app_config()
        fields = app_config_fields(config)
        try:
            async with Harness(None, columns=100, rows=30, **fields) as h:
                await h.wait_text("adhoc:fake-model", timeout=10)
                await h.type("the first prompt\r")
                await h.wait_text("word5", timeout=10)
                await h.type("\x1b", pause=0.3)
                await h.idle()
                await h.type("the second prompt\r")
                await h.wait_text("second answer", timeout=10)
                await h.idle()
                await h.type("the third prompt\r")
                await h.wait_text("third answer", timeout=10)
                await h.idle()
                await h.type("/quit\r")
                await asyncio.wait_for(h.task, 10)
        finally:
            await runtime.close()
        messages = stored_messages()
        assert stored_prompts(messages) == ["the first prompt", "the second prompt", "the third prompt"]
        assert no_two_responses_in_a_row(messages)
        text = stored_text(messages)
        assert "word0 word1 word2 word3 word4 word5" in text and CANCELLED_MARKER in text
        fake.add(Turn(text="resumed"))
        session = await open_session(fake, "openai-chat", cwd, resume=True)
        await run(session, "after the resume")
        await session.aclose()
    assert user_texts(fake.model_requests[-1]) == [
        "the first prompt", "the second prompt", "the third prompt", "after the resume"]
    assert_valid(fake.model_requests)


@pytest.mark.parametrize("wire", WIRES)
async def test_a_cancel_while_the_answer_streams_keeps_its_text_and_the_next_request_is_accepted(
    tmp_path: Path, wire: str
) -> None:
    cwd = workdir(tmp_path)
    pieces = [f"word{i} " for i in range(60)]
    with FakeProvider([Turn(text="".join(pieces), text_pieces=pieces, chunk_delay=0.03, reasoning="thinking first")]) as fake:
        session = await open_session(fake, wire, cwd)
        shown: list[str] = []
        async for event in session.run_turn("stream a long answer"):
            if isinstance(event, ev.TextDelta):
                shown.append(event.text)
                if len("".join(shown)) > 30:
                    session.cancel_turn()
        fake.add(Turn(text="after"))
        assert (await run(session, "and now"))[-1].reason == "done"
        await session.aclose()
    text = stored_text(stored_messages())
    assert "".join(shown).strip() in text and CANCELLED_MARKER in text
    assert "word59" not in text
    assert_valid(fake.model_requests)
    assert not fake.rejections, fake.rejections
    assert user_texts(fake.model_requests[-1]) == ["stream a long answer", "and now"]


async def test_leaving_the_ui_mid_answer_stores_the_partial_answer_before_the_store_closes(tmp_path: Path) -> None:
    """Ctrl-D on an empty input exits while an answer streams (ctrl-c there stops the answer
    instead, issue 19): the partial answer and the prompt are stored."""
    import asyncio

    from kettle import adhoc
    from uifakes import Harness, app_config_fields

    from ketch.frontends.cli import _main_parser
    from ketch.frontends.interactive import Interactive

    cwd = workdir(tmp_path)
    pieces = [f"word{i} " for i in range(300)]
    with FakeProvider([Turn(text="".join(pieces), text_pieces=pieces, chunk_delay=0.05)]) as fake:
        runtime = Interactive(_main_parser().parse_args([*adhoc(fake, "openai-chat"), "--cwd", str(cwd)]), cwd)
        config = runtime.app_config()
        fields = app_config_fields(config)
        try:
            async with Harness(None, columns=100, rows=30, **fields) as h:
                await h.wait_text("adhoc:fake-model", timeout=10)
                await h.type("a long one\r")
                await h.wait_text("word5", timeout=10)
                await h.type("\x04", pause=0.1)
                await asyncio.wait_for(h.task, 10)
        finally:
            await runtime.close()
    messages = stored_messages()
    assert stored_prompts(messages) == ["a long one"]
    text = stored_text(messages)
    assert "word0 word1 word2 word3 word4 word5" in text and CANCELLED_MARKER in text


async def test_closing_a_session_mid_turn_stores_the_cancel_before_the_store_closes(tmp_path: Path) -> None:
    """A front end that closes the session while its turn still runs (and never awaits the turn)."""
    import asyncio

    cwd = workdir(tmp_path)
    pieces = [f"word{i} " for i in range(300)]
    with FakeProvider([Turn(text="".join(pieces), text_pieces=pieces, chunk_delay=0.05)]) as fake:
        session = await open_session(fake, "openai-chat", cwd)
        shown = asyncio.Event()

        async def consume() -> None:
            async for event in session.run_turn("closed mid-answer"):
                if isinstance(event, ev.TextDelta) and "word3" in event.text:
                    shown.set()

        consumer = asyncio.ensure_future(consume())
        await asyncio.wait_for(shown.wait(), 10)
        await session.aclose()
        consumer.cancel()
    messages = stored_messages()
    assert stored_prompts(messages) == ["closed mid-answer"]
    assert CANCELLED_MARKER in stored_text(messages) and "word3" in stored_text(messages)
