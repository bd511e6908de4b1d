"""The preview under a finished command shows the cause, at 80 and 120 columns: an early
stderr line above 40 lines of stdout is on screen (red), with the first and last stdout lines
and how many were left out; the sandbox's refusal note is whole (wrapped, yellow) and is in the
pager (ctrl-o) too."""

from __future__ import annotations

import pytest
from test_ui_results import shell_turn
from uifakes import FakeSession, Harness

NOTE = ("[the sandbox refused a write outside the writable places (the output says 'Read-only file system'). "
        "Commands here may write only: /work/project/with/a/long/name and a private /tmp (run-later paths such "
        "as .git stay read-only); the network is off.]")


@pytest.mark.parametrize("columns", [80, 120])
async def test_stderr_above_long_stdout_and_the_refusal_note_are_shown_whole(columns: int) -> None:
    chunks = [("stderr", "ls: cannot access 'missing': No such file or directory\n"),
              ("stdout", "".join(f"row {i}\n" for i in range(40))),
              ("stderr", "touch: cannot touch '/etc/x': Read-only file system\n")]
    content = ("exit code 1\nls: cannot access 'missing': No such file or directory\n"
               + "".join(f"row {i}\n" for i in range(40)) + "touch: cannot touch '/etc/x': Read-only file system\n" + NOTE)
    session = FakeSession([shell_turn("c1", "ls missing; seq; touch /etc/x", chunks, content, is_error=False)])
    async with Harness(session, columns=columns, rows=40) as h:
        await h.type("go\r")
        await h.idle()
        lines = h.sink.display()
        text = "\n".join(lines)
        assert "    [stderr] ls: cannot access 'missing': No such file or directory" in text
        assert "[stderr] touch: cannot touch '/etc/x': Read-only file system" in text
        assert "    row 0\n    row 1" in text and "lines not shown" in text and "    row 39" in text
        start = next(i for i, line in enumerate(lines) if line.startswith("    [the sandbox refused"))
        joined = "".join(line[4:] for line in lines[start:start + 1 + len(NOTE) // (columns - 5)])
        assert joined.startswith(NOTE)
        assert all(len(line) <= columns for line in lines)
        screen = h.sink.screen
        y = next(i for i, line in enumerate(lines) if "[stderr] ls:" in line)
        assert screen.buffer[y][lines[y].index("[stderr]")].fg == "red"
        assert screen.buffer[start][4].fg == "brown"  # yellow (33) as pyte names it
        await h.type("\x0f")  # ctrl-o: the pager has the note too
        await h.wait_text("q close")
        await h.type("G")
        # (rows are compared without spaces: the screen drops a space that ends a wrapped row)
        await h.wait_for(lambda: NOTE.replace(" ", "") in "".join(h.sink.display()[-10:]).replace(" ", ""))
