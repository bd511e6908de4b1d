"""Tool results in the transcript: shell exit and tail (stderr marked), reads, searches,
denials once, and the pager (ctrl-o, the list, /expand N), checked on a pyte screen."""

from __future__ import annotations

from uifakes import Approval, FakeSession, Harness

from ketch.protocol.events import ToolCallFinished, ToolCallStarted, ToolOutputChunk
from ketch.core.tool_brief import OutputTails, brief


def fg_at(h: Harness, text: str) -> str:
    """The foreground colour pyte recorded for the first character of ``text`` on screen."""
    screen = h.sink.screen
    for y, line in enumerate(h.sink.display()):
        x = line.find(text)
        if x >= 0:
            return screen.buffer[y][x].fg
    raise AssertionError(f"{text!r} not on screen:\n{h.sink.text()}")


def shell_turn(call_id: str, command: str, chunks: list[tuple[str, str]], content: str,
               is_error: bool = False) -> list:
    tails = OutputTails()
    steps: list = [ToolCallStarted(call_id=call_id, name="shell", args={"command": command})]
    for stream, text in chunks:
        tails.add(call_id, text, stream)
        steps.append(ToolOutputChunk(call_id=call_id, text=text, stream=stream))  # type: ignore[arg-type]
    summary = brief("shell", {"command": command}, content, is_error=is_error, tail=tails.pop(call_id))
    steps.append(ToolCallFinished(call_id=call_id, name="shell", summary=summary, is_error=is_error))
    return steps


async def test_failed_shell_shows_exit_code_and_last_lines_with_stderr_marked_in_red() -> None:
    chunks = [("stderr", "ls: cannot access '/nonexistent': No such file or directory\n"), ("stdout", "out\n")]
    content = "exit code 3\nls: cannot access '/nonexistent': No such file or directory\nout"
    session = FakeSession([shell_turn("c1", "ls /nonexistent; echo out; exit 3", chunks, content)])
    async with Harness(session, columns=100) as h:
        await h.type("go\r")
        await h.idle()
        lines = h.sink.display()
        head = next(i for i, x in enumerate(lines) if x.startswith("● shell  ls /nonexistent"))
        assert lines[head + 1] == "  ⎿ exit code 3"
        assert lines[head + 2] == "    [stderr] ls: cannot access '/nonexistent': No such file or directory"
        assert lines[head + 3] == "    out"
        assert fg_at(h, "● shell") == "red"
        assert fg_at(h, "exit code 3") == "red"
        assert fg_at(h, "[stderr] ls") == "red"


async def test_successful_shell_is_green_and_long_output_says_how_to_expand() -> None:
    body = "".join(f"line {i}\n" for i in range(50))
    session = FakeSession([shell_turn("c1", "seq", [("stdout", body)], body.rstrip())])
    async with Harness(session, columns=100) as h:
        await h.type("go\r")
        await h.idle()
        text = h.sink.text()
        assert "  ⎿ exit 0" in text
        assert "    line 2\n    … 42 lines not shown\n    line 45" in text and "line 49  (ctrl-o · /expand 1)" in text
        assert "line 44" not in text
        assert fg_at(h, "● shell") == "green"
        await h.type("\x0f")  # ctrl-o: the latest call's whole output
        await h.wait_text("1. shell  seq  lines 1–")
        assert "line 0" in h.sink.text() and "q close" in h.sink.text()
        await h.type("G")
        await h.wait_text("line 49")
        await h.type("q")
        await h.wait_gone("q close")
        assert h.app is not None and h.app.overlay is None


async def test_read_and_search_results_show_range_count_and_first_hits() -> None:
    read = "\n".join(f"{n:>6}\tx = {n}" for n in range(10, 31))
    grep = "src/a.py:3:foo()\nsrc/b.py:9:foo(1)\nsrc/b.py:12:foo(2)\nsrc/c.py:1:foo\n(7 more matches not shown; narrow the pattern, path or glob)"
    turn = [
        ToolCallStarted(call_id="r", name="read_file", args={"path": "src/a.py", "offset": 10, "limit": 21}),
        ToolCallFinished(call_id="r", name="read_file", summary=brief("read_file", {}, read, is_error=False)),
        ToolCallStarted(call_id="g", name="grep", args={"pattern": "foo"}),
        ToolCallFinished(call_id="g", name="grep", summary=brief("grep", {}, grep, is_error=False)),
    ]
    async with Harness(FakeSession([turn]), columns=100) as h:
        await h.type("go\r")
        await h.idle()
        text = h.sink.text()
        assert "● read_file  src/a.py\n  ⎿ lines 10–30 (21 lines)  (ctrl-o · /expand 1)" in text
        assert "● grep  foo\n  ⎿ 11 matches in 3 files\n    src/a.py:3:foo()\n    src/b.py:9:foo(1)\n    src/b.py:12:foo(2)" in text
        assert "src/c.py" not in text


async def test_a_denied_call_is_shown_once_under_its_headline_in_red() -> None:
    turn = [ToolCallStarted(call_id="d1", name="shell", args={"command": "rm -rf build"}),
            Approval("d1"),
            ToolCallFinished(call_id="d1", name="shell", summary="The user denied this call: not now", is_error=True)]
    session = FakeSession([turn])
    async with Harness(session, columns=100) as h:
        await h.type("go\r")
        await h.wait_text("Allow shell?")
        await h.type("n")
        await h.type("not now\r")
        await h.idle()
        text = h.sink.text()
        assert "● shell  rm -rf build\n  ⎿ denied by user: not now" in text
        assert text.count("not now") == 1 and "✗" not in text
        assert fg_at(h, "denied by user") == "red"


async def test_expand_by_number_and_the_list_open_any_call_with_its_full_output() -> None:
    full = {"c1": "\n".join(f"alpha {i}" for i in range(30)), "c2": "beta only"}
    turn = [
        ToolCallStarted(call_id="c1", name="read_file", args={"path": "a.txt"}),
        ToolCallFinished(call_id="c1", name="read_file", summary="lines 1–30 (30 lines)"),
        ToolCallStarted(call_id="c2", name="glob", args={"pattern": "*.md"}),
        ToolCallFinished(call_id="c2", name="glob", summary="1 file\nbeta only"),
    ]
    async with Harness(FakeSession([turn]), columns=100, tool_output=full.get) as h:
        await h.type("go\r")
        await h.idle()
        await h.type("/expand 1\r")
        await h.wait_text("1. read_file  a.txt")
        assert "alpha 0" in h.sink.text() and "alpha 29" not in h.sink.text()
        await h.type("\x0f")  # ctrl-o inside the pager: the list of calls, newest first
        await h.wait_text("tool calls")
        screen = h.sink.text()
        assert screen.index("2. ✓ glob  *.md") < screen.index("1. ✓ read_file  a.txt")
        await h.type("\r")  # the newest
        await h.wait_text("2. glob  *.md")
        assert "beta only" in h.sink.text()
        await h.type("\x1b")
        await h.wait_gone("q close")
        await h.type("/expand 9\r")
        await h.wait_text("There is no call 9; calls are numbered 1 to 2.")


async def test_ctrl_o_with_no_call_yet_says_so() -> None:
    async with Harness() as h:
        await h.type("\x0f")
        await h.wait_text("No tool call has finished yet.")


async def test_escape_sequences_from_outside_never_reach_the_terminal_but_colours_stay() -> None:
    """A command's output and a provider's search titles are hostile: a clipboard write (OSC 52),
    a window title, a screen clear or a carriage return in them is dropped from what is committed
    to the scrollback; the text around them and ketch's own colours remain."""
    from ketch.protocol.events import TextDelta, WebSearchResult

    hostile = "pwned\x1b]52;c;ZXZpbA==\x07 \x1b]0;evil title\x1b\\here\x1b[2J\x1b[H\rdone"
    chunks = [("stdout", hostile + "\n")]
    steps = shell_turn("c1", "cat notes.txt", chunks, "exit code 1\n" + hostile, is_error=True)
    steps += [WebSearchResult(call_id="w1", query="q", sources=[{"title": "T\x1b]8;;http://x\x1b\\link", "url": "https://e.org"}]),
              TextDelta(text="after\n")]
    async with Harness(FakeSession([steps]), columns=100) as h:
        await h.type("go\r")
        await h.idle()
        written = "".join(h.sink.writes)
        for sequence in ("\x1b]52", "\x1b]0;", "\x1b]8;", "\x1b[2J\x1b[H\r"):
            assert sequence not in written, repr(sequence)
        shown = h.sink.text()
        assert "evil title" not in shown and "ZXZpbA" not in shown  # nor their bodies, as text
        assert "    done" in shown and "Tlink" in shown
        assert fg_at(h, "exit code 1") == "red"  # ketch's own colour is kept
