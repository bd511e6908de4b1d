"""Every overlay, menu and line of the UI is readable: no text whose foreground equals its
background, only the terminal's 16 colours (so dark and light themes both work), at 16
colours the same, and with NO_COLOR no colour at all. Checked cell by cell on pyte."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from uifakes import Approval, Ask, FakeSession, Gate, Harness

from ketch.protocol.events import TextDelta, ToolCallFinished, ToolCallStarted, ToolOutputChunk
from ketch.extensions.commands import CommandRegistry, builtin_commands

NAMED = {"default", "black", "red", "green", "brown", "blue", "magenta", "cyan", "white"}
NAMED |= {"bright" + c for c in NAMED - {"default"}}
NAMED |= {"brightyellow", "yellow"}


def cells(h: Harness) -> Iterator[tuple[int, str, str, str]]:
    """(row, char, shown fg, shown bg) of every non-blank cell (reverse applied)."""
    screen = h.sink.screen
    for y in range(screen.lines):
        row = screen.buffer[y]
        for x in range(screen.columns):
            cell = row[x]
            if not cell.data.strip():
                continue
            fg, bg = cell.fg, cell.bg
            if cell.reverse:
                fg, bg = (bg if bg != "default" else "default-bg"), (fg if fg != "default" else "default-fg")
            yield y, cell.data, fg, bg


def check_screen(h: Harness, where: str, *, no_colour: bool = False) -> None:
    lines = h.sink.display()
    for y, ch, fg, bg in cells(h):
        context = f"{where}: {ch!r} in row {y}: {lines[y]!r}"
        assert fg != bg or fg == "default", f"foreground equals background ({fg}) at {context}"
        for colour in (fg, bg):
            assert colour.replace("default-fg", "default").replace("default-bg", "default") in NAMED, \
                f"fixed colour {colour} (not one of the terminal's 16) at {context}"
        if no_colour:
            assert fg in ("default", "default-fg", "default-bg") and bg in ("default", "default-fg", "default-bg"), \
                f"colour {fg}/{bg} with NO_COLOR at {context}"


def script() -> list:
    code = "Here:\n\n```python\ndef f(x):\n    return \"s\"  # note\n```\n\nSome `inline` and **bold** and [a link](http://x).\n"
    return [
        [TextDelta(text=code)],
        [ToolCallStarted(call_id="s1", name="shell", args={"command": "make"}),
         ToolOutputChunk(call_id="s1", text="building\n"), Gate("shell"),
         ToolCallFinished(call_id="s1", name="shell", summary="exit code 2\n[stderr] boom"),
         ToolCallStarted(call_id="e1", name="edit_file", args={"path": "a.py"}),
         Approval("e1", name="edit_file", args={"path": "a.py"}, preview="--- a/a.py\n+++ b/a.py\n@@ -1 +1 @@\n-x\n+y"),
         ToolCallFinished(call_id="e1", name="edit_file", summary="Edited a.py", diff="@@ -1 +1 @@\n-x\n+y"),
         Ask("q1", "Which one?", ["first", "second"])],
    ]


async def walk_every_overlay(h: Harness, session: FakeSession, **kw: bool) -> None:
    await h.type("show code\r")
    await h.idle()
    check_screen(h, "markdown answer", **kw)
    await h.type("/")
    await h.wait_text("/help")
    check_screen(h, "the / menu", **kw)
    await h.type("\x15@")
    await h.wait_text("src/main.py")
    check_screen(h, "the @ menu", **kw)
    await h.type("\x15go\r")
    await h.wait_text("building")
    await h.type("queued prompt\r")
    await h.wait_text("⧗ queued")
    check_screen(h, "working line, live tool tail, queue", **kw)
    session.gate("shell").set()
    await h.wait_text("Allow edit_file?")
    check_screen(h, "approval overlay", **kw)
    await h.type("y")
    await h.wait_text("Which one?")
    check_screen(h, "ask overlay", **kw)
    await h.type("1")
    await h.idle()
    check_screen(h, "results and diff", **kw)
    await h.type("\x0f")
    await h.wait_text("q close")
    check_screen(h, "pager", **kw)
    await h.type("l")
    await h.wait_text("tool calls")
    check_screen(h, "call list", **kw)
    await h.type("\x1b")
    await h.type("/think\r")
    await h.wait_text("medium")
    check_screen(h, "list picker", **kw)
    await h.type("\x1b")
    await h.type("\x03")
    await h.wait_text("press ctrl-c again")
    check_screen(h, "hint line", **kw)


def harness(session: FakeSession) -> Harness:
    return Harness(session, columns=100, rows=30, commands=CommandRegistry(builtin_commands()),
                   candidates=lambda: ["src/main.py", "src/util.py", "README.md"])


@pytest.mark.parametrize("depth", ["", "DEPTH_4_BIT"])
async def test_every_overlay_and_menu_is_readable(depth: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("NO_COLOR", raising=False)
    if depth:
        monkeypatch.setenv("PROMPT_TOOLKIT_COLOR_DEPTH", depth)
    session = FakeSession(script())
    async with harness(session) as h:
        await walk_every_overlay(h, session)


async def test_no_color_means_no_colour_anywhere(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NO_COLOR", "1")
    session = FakeSession(script())
    async with harness(session) as h:
        await walk_every_overlay(h, session, no_colour=True)
    assert "\x1b[31m" not in h.sink.transcript and "\x1b[32m" not in h.sink.transcript
