"""The approval overlay can be read whole and can be taught: a 400-character command, its
working directory, why it asks and what the sandbox allows appear on screen entire (wrapped,
never cut) at 80 and 120 columns; a body taller than the screen scrolls; "allow commands like
this" shows the proposed rule, lets the user edit it, and sends the edited rule."""

from __future__ import annotations

import pytest
from uifakes import Approval, FakeSession, Harness

from ketch.protocol.events import TextDelta

LONG = " && ".join(f"echo step-{i:03d}-of-the-build-{'x' * 12}" for i in range(12)) + " && rm -rf ~/precious-dir"
REASON = "no allow rule covers it, and under --approval ask every shell command asks (shift-tab switches to auto)"
SANDBOX = "sandboxed (bubblewrap): writes only to /work/project/with/a/long/path and the session's /tmp; no network"


def _rows_between(lines: list[str], first: str, last: str) -> list[str]:
    start = next(i for i, line in enumerate(lines) if line.startswith(first))
    end = next(i for i in range(start + 1, len(lines)) if lines[i].lstrip().startswith(last))
    return lines[start + 1:end]


@pytest.mark.parametrize("columns", [80, 120])
async def test_a_400_character_command_appears_whole_with_cwd_reason_and_sandbox(columns: int) -> None:
    assert len(LONG) >= 400
    session = FakeSession([[Approval("r1", args={"command": LONG}, preview=LONG, cwd="/work/project", reason=REASON,
                                     sandbox=SANDBOX, rule_proposal="echo step-000-of-the-build-xxxxxxxxxxxx *"),
                            TextDelta(text="after\n")]])
    async with Harness(session, columns=columns, rows=40) as h:
        await h.type("go\r")
        await h.wait_text("Allow shell?")
        lines = h.sink.display()
        command_rows = _rows_between(lines, "Allow shell?", "in /work/project")
        assert all(len(r) <= columns for r in command_rows)
        assert "".join(r[2:] for r in command_rows) == LONG  # every character, in order, nothing cut
        text = " ".join(line.strip() for line in lines)
        assert "why it asks: " + REASON in text and "sandbox: " + SANDBOX in text
        assert "Allow this exact command again this session (a)" in text
        # colours: the command is bold and not dim; the notes under it are dim
        screen = h.sink.screen
        y = lines.index(command_rows[0])
        cell = screen.buffer[y][4]
        assert cell.bold and cell.fg == "default"
        y_reason = next(i for i, line in enumerate(lines) if "why it asks:" in line)
        assert lines[y_reason].startswith("  why it asks:")
        await h.type("y")
        await h.wait_text("after")
    assert session.decisions == [("r1", "allow", "")]


@pytest.mark.parametrize("columns", [80, 120])
async def test_a_body_taller_than_the_screen_scrolls_and_shows_every_row(columns: int) -> None:
    long_text = "\n".join(f"echo line-{i:02d}" for i in range(40))
    session = FakeSession([[Approval("r1", args={"command": long_text}, preview=long_text, cwd="/w"), TextDelta(text="after\n")]])
    async with Harness(session, columns=columns, rows=24) as h:
        await h.type("go\r")
        await h.wait_text("pgup/pgdn scroll")
        seen: set[str] = set()

        def where() -> str:
            return next((line for line in h.sink.display() if "pgup/pgdn scroll" in line), "")

        while "in /w" not in h.sink.text():
            seen |= {line.strip() for line in h.sink.display() if line.strip().startswith("echo line-")}
            before = where()
            await h.type("\x1b[6~")  # page down
            await h.wait_for(lambda: where() != before)  # the next page is drawn
        seen |= {line.strip() for line in h.sink.display() if line.strip().startswith("echo line-")}
        assert seen == {f"echo line-{i:02d}" for i in range(40)}
        await h.type("n\r")
        await h.idle()
    assert session.decisions == [("r1", "deny", "")]


@pytest.mark.parametrize("columns", [80, 120])
@pytest.mark.parametrize(("key", "decision"), [("p", "allow_rule"), ("s", "allow_rule_saved")])
async def test_allow_commands_like_this_shows_the_rule_lets_it_be_edited_and_sends_it(columns: int, key: str, decision: str) -> None:
    session = FakeSession([[Approval("r1", args={"command": "python3 src/app.py --x"}, preview="python3 src/app.py --x",
                                     rule_proposal="python3 src/app.py *"), TextDelta(text="after\n")]])
    async with Harness(session, columns=columns) as h:
        await h.type("go\r")
        await h.wait_text("Allow shell?")
        assert "shell(python3 src/app.py *)" in h.sink.text()
        await h.type(key)
        await h.wait_text("enter saves")
        assert "shell(python3 src/app.py *)▏" in h.sink.text()
        await h.type("\x7f" + "--x *")  # edit: narrow it to that option
        await h.wait_text("shell(python3 src/app.py --x *)▏")
        await h.type("\r")
        await h.wait_text("after")
    assert session.decisions == [("r1", decision, "python3 src/app.py --x *")]


async def test_without_a_proposal_the_prompt_says_why_and_offers_no_rule() -> None:
    session = FakeSession([[Approval("r1", args={"command": "echo x > f"}, preview="echo x > f",
                                     no_rule_because="it has a redirection that writes to f, which no rule allows"),
                            TextDelta(text="after\n")]])
    async with Harness(session) as h:
        await h.type("go\r")
        await h.wait_text("Allow shell?")
        text = h.sink.text()
        assert "no rule proposed: it has a redirection" in text and "commands like this" not in text
        await h.type("3")  # the third choice is deny here
        await h.wait_text("Reason")
        await h.type("\r")
        await h.idle()
    assert session.decisions == [("r1", "deny", "")]


@pytest.mark.parametrize("columns", [80, 120])
async def test_the_offer_to_run_outside_the_sandbox_is_whole_and_says_what_it_does(columns: int) -> None:
    why = ("a write outside the writable places (the output says 'Read-only file system'), and commands here may write only "
           "the workspace /work/project/with/a/long/name and the session's /tmp")
    preview = f"Run it again outside the sandbox? The sandbox refused {why}.\n{LONG}"
    session = FakeSession([[Approval("r1", args={"command": LONG, "outside_sandbox": True}, preview=preview, cwd="/work/project",
                                     reason=f"the sandbox refused {why}", sandbox="none if you allow it: it runs unconfined"),
                            TextDelta(text="after\n")]])
    async with Harness(session, columns=columns, rows=50) as h:
        await h.type("go\r")
        await h.wait_text("Allow shell?")
        lines = h.sink.display()
        assert all(len(line) <= columns for line in lines)
        flat = "".join(line[2:] for line in lines)
        assert preview.replace("\n", "") in flat  # the question, the reason and the command, every character
        text = " ".join(line.strip() for line in lines)
        assert "1. Run it outside the sandbox this once (y)" in text
        assert "Run this exact command outside the sandbox whenever it comes again this session (a)" in text
        await h.type("a")
        await h.wait_text("after")
    assert session.decisions == [("r1", "allow_session", "")]
