"""Replay equals live: a resumed session prints the transcript the live session printed
(same Markdown rendering, same tool results, denials and marks), from the stored history."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pydantic_ai.models.openai  # noqa: F401
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
