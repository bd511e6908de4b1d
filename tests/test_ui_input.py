"""Typing, submit, history, completion menus: keys in through a pipe, screen out via pyte."""

from __future__ import annotations

from uifakes import FakeSession, Harness

from ketch.protocol.events import TextDelta


def answer(text: str):
    return lambda prompt: [TextDelta(text=text)]


async def test_typed_prompt_is_submitted_and_answer_lands_in_scrollback() -> None:
    session = FakeSession(default_turn=answer("Hello **there**, friend.\n"))
    async with Harness(session) as h:
        await h.type("hi ketch")
        await h.wait_text("› hi ketch")
        await h.type("\r")
        await h.wait_text("Hello there, friend.")
        await h.idle()
        assert session.prompts == ["hi ketch"]
        lines = h.sink.display()
        echo = lines.index("› hi ketch")
        assert lines.index("Hello there, friend.") > echo
        assert h.saved_history == ["hi ketch"]


async def test_up_and_down_recall_history_from_the_injected_store() -> None:
    async with Harness(load_history=lambda: ["first old prompt", "second old prompt"]) as h:
        await h.type("draft")
        await h.type("\x1b[A")
        await h.wait_text("› second old prompt")
        await h.type("\x1b[A")
        await h.wait_text("› first old prompt")
        await h.type("\x1b[B")
        await h.wait_text("› second old prompt")
        await h.type("\x1b[B")
        await h.wait_text("› draft")


async def test_submitted_prompt_joins_history_for_recall() -> None:
    async with Harness() as h:
        await h.type("one\r")
        await h.idle()
        await h.type("\x1b[A")
        await h.wait_text("› one")
        assert h.saved_history == ["one"]


async def test_at_opens_file_picker_and_tab_accepts_into_input() -> None:
    files = ["vendor/src/x.py", "src/app.py", "src/ketch/ui.py", "README.md"]
    async with Harness(candidates=lambda: files) as h:
        await h.type("look at @src")
        await h.wait_text("\n src/app.py")
        shown = h.sink.text()
        assert shown.index("src/app.py") < shown.index("vendor/src/x.py")  # prefix above substring
        await h.type("\x1b[B")  # down claims the picker, not history
        await h.type("\t")
        await h.wait_text("› look at @src/ketch/ui.py")
        assert "vendor/src/x.py" not in h.sink.text()


async def test_enter_accepts_file_then_submits_full_path() -> None:
    session = FakeSession()
    async with Harness(session, candidates=lambda: ["docs/guide.md"]) as h:
        await h.type("read @gui")
        await h.wait_text("docs/guide.md")
        await h.type("\r")
        await h.wait_text("› read @docs/guide.md")
        await h.type("\r")
        await h.idle()
        assert session.prompts == ["read @docs/guide.md "]


async def test_at_inside_a_word_does_not_open_the_picker() -> None:
    async with Harness(candidates=lambda: ["host.txt", "hosts/a"]) as h:
        await h.type("ssh user@ho")
        await h.wait_text("› ssh user@ho")
        assert h.app is not None and h.app.menu is None
        assert "host.txt" not in h.sink.text()


async def test_escape_closes_the_picker_and_leaves_the_text() -> None:
    async with Harness(candidates=lambda: ["alpha.py"]) as h:
        await h.type("@al")
        await h.wait_text("\n alpha.py")
        await h.type("\x1b", pause=0.3)
        await h.wait_gone("\n alpha.py")
        assert "› @al" in h.sink.text()


async def test_multiline_input_with_ctrl_j_and_alt_enter() -> None:
    session = FakeSession()
    async with Harness(session) as h:
        await h.type("line one\nline two\x1b\rline three")
        await h.wait_text("line three")
        assert "› line one" in h.sink.display()
        assert "  line two" in h.sink.display()
        await h.type("\r")
        await h.idle()
        assert session.prompts == ["line one\nline two\nline three"]


async def test_emacs_editing_keys() -> None:
    session = FakeSession()
    async with Harness(session) as h:
        await h.type("hello world")
        await h.type("\x17")  # ctrl-w: delete the word
        await h.type("\x01X")  # ctrl-a, insert at the start
        await h.type("\x05Y")  # ctrl-e, insert at the end
        await h.wait_text("› Xhello Y")
        await h.type("\x01\x0b")  # ctrl-a ctrl-k: kill to the end
        await h.type("Z\r")
        await h.idle()
        assert session.prompts == ["Z"]


async def test_bracketed_paste_submits_the_full_text() -> None:
    session = FakeSession()
    pasted = "\n".join(f"pasted line {i}" for i in range(30))
    async with Harness(session) as h:
        await h.type(f"see \x1b[200~{pasted}\x1b[201~ please")
        await h.wait_text("› see [pasted 30 lines #1] please")
        await h.type("\r")
        await h.idle()
        assert session.prompts == [f"see {pasted} please"]


def registry():
    from ketch.extensions.commands import Command, CommandRegistry, builtin_commands

    reg = CommandRegistry(builtin_commands())
    reg.register(Command("review", help="Review a file", template="Review $ARGUMENTS carefully.", source="x.md"))
    return reg


async def test_slash_menu_lists_matching_commands_and_unknown_gets_suggestion() -> None:
    async with Harness(commands=registry()) as h:
        await h.type("/co")
        await h.wait_text("/cost")
        assert "/context" in h.sink.text()
        await h.type("\x15/modle x\r")  # ctrl-u clears, then a typo
        await h.wait_text("Unknown command /modle. Did you mean /model?")


async def test_cost_panel_prints_from_session_status() -> None:
    from ketch.protocol.frontend import SessionStatus

    status = SessionStatus(session_id="s9", model="m", cost_usd=0.0123, input_tokens=1200, output_tokens=34,
                           cache_read_tokens=900, cache_write_tokens=250)
    async with Harness(FakeSession(status=status)) as h:
        await h.type("/cost\r")
        await h.wait_text("Session cost: $0.0123")
        assert "input tokens:  1,200" in h.sink.text()
        assert "cache reads:  900 (75.0% of input)" in h.sink.text()
        assert "cache writes: 250" in h.sink.text()


async def test_alias_runs_the_command_and_user_template_runs_as_a_prompt() -> None:
    session = FakeSession()
    async with Harness(session, commands=registry()) as h:
        await h.type("/usage\r")
        await h.wait_text("Session cost:")
        await h.type("/review src/a.py\r")
        await h.idle()
        assert session.prompts == ["Review src/a.py carefully."]
        assert "› /review src/a.py" in h.sink.text()


async def test_slash_menu_enter_runs_the_highlighted_command() -> None:
    async with Harness(commands=registry()) as h:
        await h.type("/tod")
        await h.wait_text("/todos")
        await h.type("\r")
        await h.wait_text("No todos.")


async def test_accepting_a_directory_keeps_the_picker_open_inside_it() -> None:
    files = ["src/", "src/a.py", "src/b.py", "setup.py"]
    async with Harness(candidates=lambda: files) as h:
        await h.type("@sr")
        await h.wait_text("\n src/")
        await h.type("\t")
        await h.wait_text("› @src/")
        await h.wait_text("\n src/a.py")
        await h.type("\t")
        await h.wait_text("› @src/a.py")


async def test_core_command_is_handed_off_and_its_reply_printed() -> None:
    calls: list[tuple[str, str]] = []

    async def on_command(name: str, args: str) -> str:
        calls.append((name, args))
        return f"switched to {args}"

    async def choices(name: str) -> list[str]:
        return ["alpha-model", "beta-model"]

    async with Harness(commands=registry(), on_command=on_command, command_choices=choices) as h:
        await h.type("/model gamma\r")
        await h.wait_text("switched to gamma")
        await h.type("/model\r")
        await h.wait_text("beta-model")
        await h.type("\x1b[B\r")
        await h.wait_text("switched to beta-model")
        assert calls == [("model", "gamma"), ("model", "beta-model")]
