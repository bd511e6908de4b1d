"""Reasoning leaves a trace, at 80 and 120 columns: once the answer starts, a dim "✻ thought for
N s · ctrl-r shows it" line stays in the transcript; ctrl-r afterwards opens the reasoning of
the latest answer in the pager and its list any earlier one; a resumed session shows the same
line and ctrl-r finds the stored reasoning; the Markdown export keeps it."""

from __future__ import annotations

import pytest
from pydantic_ai.messages import ModelRequest, ModelResponse, TextPart, ThinkingPart, UserPromptPart
from uifakes import FakeSession, Harness, Sleep

from ketch.protocol.events import ReasoningDelta, TextDelta
from ketch.frontends.replay import replay_items
from ketch.state.export import render_markdown
from ketch.state.store import SessionRow


@pytest.mark.parametrize("columns", [80, 120])
async def test_the_thought_line_stays_and_ctrl_r_opens_any_earlier_reasoning(columns: int) -> None:
    session = FakeSession([
        [ReasoningDelta(text="First I consider the alpha option. "), Sleep(1.1), TextDelta(text="Answer one.\n")],
        [ReasoningDelta(text="Now the beta route looks better."), TextDelta(text="Answer two.\n")],
    ])
    async with Harness(session, columns=columns) as h:
        await h.type("one\r")
        await h.wait_text("Answer one.")
        await h.idle()
        lines = h.sink.display()
        y = next(i for i, line in enumerate(lines) if line.startswith("✻ thought for"))
        assert lines[y] in ("✻ thought for 1 s · ctrl-r shows it", "✻ thought for 2 s · ctrl-r shows it")
        assert y < next(i for i, line in enumerate(lines) if "Answer one." in line)  # above the answer it led to
        assert h.sink.screen.buffer[y][2].fg == "default"
        await h.type("two\r")
        await h.wait_text("Answer two.")
        await h.idle()
        assert "✻ thought · ctrl-r shows it" in h.sink.text() and "✻ thought for" in h.sink.text()
        await h.type("\x12")  # ctrl-r: the latest answer's reasoning
        await h.wait_text("reasoning 2 of 2")
        assert "Now the beta route looks better." in h.sink.text()
        await h.type("\x0f")  # the pager's list key: every answer's reasoning
        await h.wait_text("reasoning (type to filter)")
        await h.type("alpha\r")
        await h.wait_text("reasoning 1 of 2")
        assert "First I consider the alpha option." in h.sink.text()
        await h.type("q")


def _history() -> list:
    return [ModelRequest(parts=[UserPromptPart(content="why?")]),
            ModelResponse(parts=[ThinkingPart(content="The stored chain of thought."), TextPart(content="Because.")])]


@pytest.mark.parametrize("columns", [80, 120])
async def test_a_resumed_session_keeps_the_thought_line_and_ctrl_r_shows_it(columns: int) -> None:
    async with Harness(FakeSession(), columns=columns) as h:
        await h.app.play(replay_items("s1", _history(), []))
        await h.wait_text("Because.", timeout=15)
        text = h.sink.text()
        assert text.index("✻ thought · ctrl-r shows it") < text.index("Because.")
        await h.type("\x12")
        await h.wait_text("The stored chain of thought.")


def test_the_markdown_export_keeps_the_reasoning() -> None:
    row = SessionRow(id="s1", cwd="/w", title="t", model="m", agent="build", created=0.0, updated=0.0, parent_id=None)
    text = render_markdown(row, _history(), [])
    assert "<details><summary>Thinking</summary>\n\nThe stored chain of thought.\n\n</details>" in text
    assert text.index("The stored chain of thought.") < text.index("Because.")
