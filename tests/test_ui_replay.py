"""Replay equals live: a resumed session prints the transcript the live session printed
(same Markdown rendering, same tool results, denials and marks), from the stored history."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from fakeprovider import ToolCall, Turn
from kettle import adhoc
from test_interactive import running

ANSWER = """Created the file. Next steps:

1. run it with `python hello.py`
2. read **the output**

```python
print("hello")
```

Done."""


def transcript(lines: list[str], start: int, end: int) -> list[str]:
    rows = lines[start:end]
    while rows and not rows[-1].strip():
        rows.pop()
    return rows


async def test_a_resumed_session_prints_what_the_live_session_printed(tmp_path: Path, fake_provider: Any) -> None:
    fake = fake_provider([
        Turn(text="I'll create the file.", tool_calls=[ToolCall("write_file", {"path": "hello.py", "content": 'print("hello")\n'})]),
        Turn(text=ANSWER),
        Turn(tool_calls=[ToolCall("shell", {"command": "ls /nonexistent; echo out; exit 3"})]),
        Turn(tool_calls=[ToolCall("shell", {"command": "rm -rf /tmp/nothing-here"})]),
        Turn(text="The listing failed with exit code 3, and you declined the removal."),
    ])
    async with running(tmp_path, *adhoc(fake, "openai-chat")) as (h, runtime):
        await h.wait_text("adhoc:fake-model")
        await h.type("create hello.py\r")
        await h.wait_text("Allow write_file?")
        await h.type("y")
        await h.wait_text("Done.")
        await h.idle()
        await h.type("now check things\r")
        await h.wait_text("Allow shell?")
        await h.type("y")
        await h.wait_text("  ⎿ exit code 3")
        await h.wait_text("Allow shell?")
        await h.type("n")
        await h.type("not that\r")
        await h.wait_text("you declined the removal")
        await h.idle()
        live_lines = h.sink.all_lines()
        session_id = runtime.session.session_id
    start = next(i for i, x in enumerate(live_lines) if x.startswith("› create hello.py"))
    end = max(i for i, x in enumerate(live_lines) if x.startswith("›"))
    live = transcript(live_lines, start, end)
    assert "    [stderr] ls: cannot access '/nonexistent': No such file or directory" in live
    assert "  ⎿ denied by user: not that" in live and "1 run it with python hello.py" in "\n".join(live)

    async with running(tmp_path, *adhoc(fake, "openai-chat"), "--resume", session_id) as (h, runtime):
        await h.wait_text("── end of the earlier conversation ──")
        await h.idle()
        lines = h.sink.all_lines()
    head = next(i for i, x in enumerate(lines) if x.startswith(f"Resumed session {session_id}"))
    foot = next(i for i, x in enumerate(lines) if x.startswith("── end of the earlier conversation"))
    resumed = transcript(lines, head + 2, foot)
    assert resumed == live


async def test_a_cancelled_answer_replays_as_it_was_cut_live() -> None:
    """The core stores a cancelled answer's text with a note for the model; the replay shows
    the text and the UI's own mark, as the live session did."""
    from pydantic_ai.messages import ModelRequest, ModelResponse, TextPart, UserPromptPart
    from uifakes import FakeSession, Gate, Harness

    from ketch.protocol.events import TextDelta
    from ketch.frontends.replay import replay_items

    partial = "The first paragraph is complete.\n\nThe second one is half"
    async with Harness(FakeSession([[TextDelta(text=partial), Gate("never")]]), columns=80) as h:
        await h.type("explain\r")
        await h.wait_text("The second one is half")
        await h.type("\x03")
        await h.idle()
        live = h.sink.display()
    stored = [ModelRequest(parts=[UserPromptPart("explain")]),
              ModelResponse(parts=[TextPart(partial + "\n\n[cancelled by the user: this answer stops here]")])]
    async with Harness(FakeSession(), columns=80) as h:
        assert h.app is not None
        await h.app.play(replay_items("s1", stored, []))
        await h.idle()
        replayed = h.sink.display()
    start = live.index("› explain")
    end = live.index("⎿ stopped by the user; the answer above is incomplete")
    first = replayed.index("› explain")
    assert replayed[first:first + end - start + 1] == live[start:end + 1]
    assert "[cancelled by the user" not in "\n".join(replayed)


async def test_a_real_cancelled_turn_resumes_as_it_looked(tmp_path: Path, fake_provider: Any) -> None:
    pieces = ["The first paragraph is complete.\n\n"] + [f"part{i} " for i in range(400)]
    fake = fake_provider([Turn(text="".join(pieces), text_pieces=pieces, chunk_delay=0.05)])
    async with running(tmp_path, *adhoc(fake, "openai-chat")) as (h, runtime):
        await h.wait_text("adhoc:fake-model")
        await h.type("a long one\r")
        await h.wait_text("part5")
        await h.type("\x03")
        await h.wait_text("⎿ stopped by the user; the answer above is incomplete")
        await h.idle()
        live_lines = h.sink.all_lines()
        session_id = runtime.session.session_id
    start = next(i for i, x in enumerate(live_lines) if x.startswith("› a long one"))
    end = next(i for i, x in enumerate(live_lines) if x.startswith("⎿ stopped by the user"))
    live = live_lines[start:end + 1]
    async with running(tmp_path, *adhoc(fake, "openai-chat"), "--resume", session_id) as (h, _):
        await h.wait_text("── end of the earlier conversation ──")
        lines = h.sink.all_lines()
    first = next(i for i, x in enumerate(lines) if x.startswith("› a long one"))
    assert lines[first:first + len(live)] == live
