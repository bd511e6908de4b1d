"""Streaming: open blocks live, reasoning collapsed then dropped, tool progress, farewell."""

from __future__ import annotations

from uifakes import FakeSession, Gate, Harness

from ketch.protocol.events import (
    Error, ReasoningDelta, TextDelta, ToolCallFinished, ToolCallStarted, ToolOutputChunk,
)
from ketch.protocol.frontend import SessionStatus
from ketch.ui.farewell import farewell_lines


async def test_reasoning_shows_as_estimate_expands_and_is_dropped_at_turn_end() -> None:
    turn = [ReasoningDelta(text="pondering the question deeply " * 20), Gate("think"),
            TextDelta(text="The answer.\n")]
    session = FakeSession([turn])
    async with Harness(session) as h:
        await h.type("why\r")
        await h.wait_text("thinking… ~150 tokens")
        await h.type("\x12")  # ctrl-r
        await h.wait_text("pondering the question deeply")
        session.gate("think").set()
        await h.idle()
        assert "The answer." in h.sink.text()
        assert "pondering" not in "\n".join(h.sink.all_lines())
        assert "thinking" not in h.sink.text()


async def test_unclosed_fence_shows_as_a_growing_code_block() -> None:
    turn = [TextDelta(text="Here:\n\n```python\nx = 1\n"), Gate("a"),
            TextDelta(text="y = 2\n"), Gate("b"), TextDelta(text="```\nDone.\n")]
    session = FakeSession([turn])
    async with Harness(session) as h:
        await h.type("code\r")
        await h.wait_text("x = 1")
        assert "```" not in h.sink.text()
        session.gate("a").set()
        await h.wait_text("y = 2")
        assert h.app is not None and h.app.view.answer_lines  # still open: drawn live
        session.gate("b").set()
        await h.idle()
        lines = h.sink.display()
        assert lines.index("x = 1") + 1 == lines.index("y = 2") < lines.index("Done.")


async def test_tool_call_line_live_tail_and_coloured_diff() -> None:
    diff = "--- a/src/a.py\n+++ b/src/a.py\n@@ -1 +1 @@\n-old = 1\n+new = 2\n"
    turn = [
        ToolCallStarted(call_id="t1", name="shell", args={"command": "pytest -q"}),
        ToolOutputChunk(call_id="t1", text="".join(f"out {i}\n" for i in range(8))),
        Gate("run"),
        ToolCallFinished(call_id="t1", name="shell", summary="exit 1\nFAILED test_x", is_error=True),
        ToolCallStarted(call_id="t2", name="edit_file", args={"path": "src/a.py", "old": "x"}),
        ToolCallFinished(call_id="t2", name="edit_file", summary="edited", diff=diff),
        Error(kind="provider", message="rate limited"),
    ]
    session = FakeSession([turn])
    async with Harness(session) as h:
        await h.type("test\r")
        await h.wait_text("● shell  pytest -q")
        await h.wait_text("out 7")
        screen = h.sink.text()
        assert "out 2" not in screen and "out 3" in screen  # last five lines only
        session.gate("run").set()
        await h.idle()
        text = h.sink.text()
        assert "FAILED test_x" in text and "● edit_file  src/a.py" in text
        assert "out 7" not in text
        assert "\x1b[32m+new = 2" in h.sink.transcript and "\x1b[31m-old = 1" in h.sink.transcript
        assert "\x1b[31mError: rate limited" in h.sink.transcript


async def test_status_line_shows_model_cost_and_branch() -> None:
    status = SessionStatus(session_id="s1", model="gpt-x", thinking="high", agent="plan",
                           context_used_pct=42, cost_usd=None, cwd="/w/p", git_branch="main")
    async with Harness(FakeSession(status=status)) as h:
        await h.wait_text("gpt-x · think high · plan · ctx 42% · cost unknown · /w/p · ⎇ main")


def test_farewell_names_the_resume_command() -> None:
    lines = farewell_lines(SessionStatus(session_id="abc123", cost_usd=0.5))
    assert lines == ["Session abc123 · $0.5000", "Resume with: ketch --resume abc123"]


async def test_resize_rewraps_the_open_block() -> None:
    from prompt_toolkit.data_structures import Size

    words = " ".join(f"word{i}" for i in range(40))
    session = FakeSession([[TextDelta(text=words), Gate("end")]])
    async with Harness(session) as h:
        await h.type("wrap\r")
        await h.wait_text("word39")
        app = h.app
        assert app is not None
        assert max(len(line) for line in h.sink.display()) > 60
        h.sink.screen.resize(24, 50)
        app.output._get_size = lambda: Size(rows=24, columns=50)
        app.app._on_resize()
        await h.wait_for(lambda: all(len(line) <= 50 for line in app.view.answer_lines))
        await h.wait_for(lambda: "word39" in h.sink.text() and max(len(x) for x in h.sink.display()) <= 50)
        session.gate("end").set()
        await h.idle()


async def test_every_event_type_renders_without_breaking_the_turn() -> None:
    from ketch.protocol.events import (
        ApprovalResolved, Compacted, Notice, SubagentFinished, SubagentProgress, SubagentStarted,
        TodoUpdated, TurnStarted, Usage, WebSearchResult,
    )

    turn = [
        TurnStarted(prompt="p", model="m"),
        SubagentStarted(subagent_id="s1", kind="explore", description="map the repo"),
        SubagentProgress(subagent_id="s1", tool="grep", detail="TODO"),
        Gate("sub"),
        SubagentFinished(subagent_id="s1", ok=True),
        ApprovalResolved(call_id="c", name="shell", decision="deny", by="guard", reason="rm -rf /", rule="no-rm"),
        ApprovalResolved(call_id="d", name="read_file", decision="allow", by="rule", rule="read:*"),
        Compacted(tokens_before=120000, tokens_after=40000, stage="summary"),
        Usage(input_tokens=10, output_tokens=5, cost_usd=0.001, session_cost_usd=0.002),
        TodoUpdated(items=[{"content": "write tests", "status": "pending"}]),
        WebSearchResult(call_id="w", query="pyte docs", sources=[{"title": "pyte", "url": "https://x"}]),
        WebSearchResult(call_id="w2", query=" \n ", sources=[]),
        WebSearchResult(call_id="w3", query="a\nquery " + "long " * 40, sources=[]),
        Notice(level="warning", text="falling back to Chat Completions"),
        TextDelta(text="Finished."),
    ]
    session = FakeSession([turn])
    async with Harness(session) as h:
        await h.type("all\r")
        await h.wait_text("↳ explore: map the repo  ·  grep TODO")
        session.gate("sub").set()
        await h.idle()
        text = h.sink.text()
        for expected in ("● task  explore: map the repo", "✗ shell denied (no-rm): rm -rf /",
                         "✓ read_file allowed (read:*)", "context compacted: 120,000 → 40,000 tokens",
                         "● web_search  pyte docs", "falling back to Chat Completions", "Finished.",
                         "● web_search  (the provider gave no query)", "no sources came back", "● web_search  a query long"):
            assert expected in text, expected
        row = next(line for line in text.splitlines() if "a query long" in line)
        assert row.rstrip().endswith("…") and "long long" in row, "a long query is cut to its one row, not wrapped"
        assert "↳" not in text


async def test_ctrl_r_shows_the_whole_reasoning_wrapped_in_a_bounded_region_that_follows_it() -> None:
    words = " ".join(f"w{i:03d}" for i in range(60))  # one long paragraph, 299 characters
    turn = [ReasoningDelta(text=words), Gate("more"), ReasoningDelta(text=" " + " ".join(f"z{i:03d}" for i in range(400))),
            Gate("end"), TextDelta(text="Done.\n")]
    session = FakeSession([turn])
    async with Harness(session, columns=60, rows=24) as h:
        await h.type("think\r")
        await h.wait_text("thinking… ~75 tokens (ctrl-r to expand)")
        await h.type("\x12")
        await h.wait_text("w059")
        rows = h.sink.display()
        body = [r for r in rows if r.startswith("  w")]
        assert len(body) >= 5 and all(len(r) <= 59 for r in body)
        assert " ".join(" ".join(r.split()) for r in body) == words  # every word, wrapped, in order
        session.gate("more").set()
        await h.wait_text("z399")
        shown = [r for r in h.sink.display() if r.startswith("  ") and ("z" in r or "w" in r)]
        assert 3 <= len(shown) <= 12  # bounded: half of 24 rows
        assert "w000" not in h.sink.text()  # scrolled to follow the newest reasoning
        await h.type("\x12")
        await h.wait_gone("z399")
        assert "ctrl-r to expand" in h.sink.text()
        session.gate("end").set()
        await h.idle()
