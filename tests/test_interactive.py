"""The inline UI driven against the real Session (built by build_session) and the fake
provider: keys go in through a pipe, the screen is read through pyte, and assertions are
on the screen, the files on disk and the JSON the fake provider recorded."""

from __future__ import annotations

import argparse
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
from fakeprovider import ToolCall, Turn, tool_results, user_texts
from kettle import adhoc, run_ketch, write_project_config
from prompt_toolkit.input import create_pipe_input
from uifakes import Harness, ScreenSink, app_config_fields, make_output

import ketch.core.session  # noqa: F401
from ketch.frontends.cli import _main_parser
from ketch.frontends.interactive import Interactive, resume_program, run_with
from ketch.state.store import Store


def parse(tmp_path: Path, *argv: str) -> argparse.Namespace:
    return _main_parser().parse_args([*argv, "--cwd", str(tmp_path)])


@asynccontextmanager
async def running(tmp_path: Path, *argv: str) -> AsyncIterator[tuple[Harness, Interactive]]:
    """The app on a pyte screen, wired exactly as ``run_interactive`` wires it."""
    runtime = Interactive(parse(tmp_path, *argv), tmp_path)
    config = runtime.app_config()
    fields = app_config_fields(config, "rewind", "tool_output", "display_prompt")
    try:
        async with Harness(None, columns=100, rows=30, **fields) as h:
            yield h, runtime
    finally:
        await runtime.close()


async def test_a_prompt_is_answered_on_screen_and_remembered(tmp_path: Path, fake_provider: Any) -> None:
    fake = fake_provider([Turn(text="Hello from the real session.")])
    async with running(tmp_path, *adhoc(fake, "openai-chat")) as (h, runtime):
        await h.wait_text("adhoc:fake-model")
        await h.type("say hello\r")
        await h.wait_text("Hello from the real session.")
        await h.idle()
        session_id = runtime.session.session_id
    assert [user_texts(r) for r in fake.model_requests] == [["say hello"]]
    with Store.open() as store:
        assert [m.kind for m in store.load_messages(session_id)] == ["request", "response"]
    assert Interactive(parse(tmp_path), tmp_path).load_history() == ["say hello"]


@pytest.mark.parametrize("allow", [True, False])
async def test_the_approval_choice_reaches_the_session(tmp_path: Path, fake_provider: Any, allow: bool) -> None:
    fake = fake_provider([
        Turn(tool_calls=[ToolCall("write_file", {"path": "notes.txt", "content": "kept\n"})]),
        Turn(text="All done."),
    ])
    async with running(tmp_path, *adhoc(fake, "openai-chat")) as (h, _):
        await h.wait_text("adhoc:fake-model")
        await h.type("write the notes\r")
        await h.wait_text("Allow write_file?")
        assert "+kept" in h.sink.text()  # the preview diff is shown before deciding
        if allow:
            await h.type("y")
        else:
            await h.type("n")
            await h.wait_text("Reason")
            await h.type("not in this repo\r")
        await h.wait_text("All done.")
        await h.idle()
    target = tmp_path / "notes.txt"
    (result,) = tool_results(fake.model_requests[1])
    if allow:
        assert target.read_text() == "kept\n"
    else:
        assert not target.exists()
        assert "not in this repo" in result[1]


async def test_think_command_changes_the_next_request(tmp_path: Path, fake_provider: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    fake = fake_provider([Turn(text="first answer"), Turn(text="second answer")])
    write_project_config(tmp_path, f'[connections.openai]\npreset = "openai"\nbase_url = "{fake.base_url}"\nmax_retries = 0\n')
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-1234567890")
    async with running(tmp_path, "-m", "openai:gpt-5") as (h, _):
        await h.wait_text("openai:gpt-5")
        await h.type("one\r")
        await h.wait_text("first answer")
        await h.idle()
        await h.type("/think high\r")
        await h.wait_text("Thinking: high")
        await h.wait_text("think high")  # the status line follows
        await h.type("two\r")
        await h.wait_text("second answer")
        await h.idle()
    first, second = (r.body for r in fake.model_requests)
    assert "reasoning_effort" not in first
    assert second["reasoning_effort"] == "high"


async def test_resume_shows_the_conversation_and_continues_it(tmp_path: Path, fake_provider: Any) -> None:
    fake = fake_provider([Turn(text="The answer is 42."), Turn(text="Still 42.")])
    async with running(tmp_path, *adhoc(fake, "openai-chat")) as (h, runtime):
        await h.wait_text("adhoc:fake-model")
        await h.type("what is the answer?\r")
        await h.wait_text("The answer is 42.")
        await h.idle()
        session_id = runtime.session.session_id
    async with running(tmp_path, "--resume", session_id, *adhoc(fake, "openai-chat")) as (h, runtime):
        await h.wait_text(f"Resumed session {session_id}")
        assert "› what is the answer?" in h.sink.text() and "The answer is 42." in h.sink.text()
        await h.type("are you sure?\r")
        await h.wait_text("Still 42.")
        await h.idle()
        assert runtime.session.session_id == session_id
    assert user_texts(fake.model_requests[-1]) == ["what is the answer?", "are you sure?"]


async def test_resuming_an_unreadable_session_is_one_line_and_keeps_the_current_one(
    tmp_path: Path, fake_provider: Any
) -> None:
    fake = fake_provider([Turn(text="first"), Turn(text="still here")])
    with Store.open() as store:
        broken = store.create_session(str(tmp_path), "adhoc:fake-model", "build")
        store.connection.execute(
            "INSERT INTO messages (session_id, seq, step, data) VALUES (?, 0, 1, ?)", (broken, '{"kind": "nonsense"}'))
    async with running(tmp_path, *adhoc(fake, "openai-chat")) as (h, runtime):
        await h.wait_text("adhoc:fake-model")
        await h.type("hello\r")
        await h.wait_text("first")
        await h.idle()
        current = runtime.session.session_id
        await h.type(f"/resume {broken}\r")
        await h.wait_text("cannot read")
        assert "Traceback" not in h.sink.text()
        await h.type("and now?\r")
        await h.wait_text("still here")
        await h.idle()
        assert runtime.session.session_id == current
    assert user_texts(fake.model_requests[-1]) == ["hello", "and now?"]


async def test_clear_starts_a_new_session_with_empty_history(tmp_path: Path, fake_provider: Any) -> None:
    fake = fake_provider([Turn(text="noted"), Turn(text="fresh start")])
    async with running(tmp_path, *adhoc(fake, "openai-chat")) as (h, runtime):
        await h.wait_text("adhoc:fake-model")
        await h.type("remember the number 7\r")
        await h.wait_text("noted")
        await h.idle()
        before = runtime.session.session_id
        await h.type("/clear\r")
        await h.wait_text("New conversation")
        await h.type("what number?\r")
        await h.wait_text("fresh start")
        await h.idle()
        after = runtime.session.session_id
    assert after != before
    assert user_texts(fake.model_requests[-1]) == ["what number?"]
    with Store.open() as store:
        assert len(store.load_messages(before)) == 2 and len(store.load_messages(after)) == 2


async def test_a_config_error_ends_the_app_with_exit_code_2(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """No model anywhere: the first-run setup is offered (tests/test_first_run.py); leaving
    it with esc ends the app with the configuration error."""
    import asyncio

    monkeypatch.setenv("KETCH_SETUP_PORTS", "ollama=1,lmstudio=1,llamacpp=1")
    runtime = Interactive(parse(tmp_path), tmp_path)
    sink = ScreenSink(100, 30)
    with create_pipe_input() as pipe:
        task = asyncio.ensure_future(run_with(runtime, runtime.app_config(), input=pipe, output=make_output(sink)))
        for _ in range(300):
            if "set up ketch" in sink.text():
                break
            await asyncio.sleep(0.05)
        await asyncio.sleep(0.4)  # past the overlay's key grace period
        pipe.send_text("\x1b")
        code = await asyncio.wait_for(task, 10)
    assert code == 2
    assert "no model chosen" in str(runtime.error)
    assert "Traceback" not in sink.transcript


def test_without_a_terminal_the_ui_refuses_in_one_line(tmp_path: Path) -> None:
    run = run_ketch(["-m", "openai:gpt-5"], tmp_path, input="hello\n")
    assert run.code == 2
    assert run.stderr.startswith("ketch: the interactive UI needs a terminal") and run.stderr.count("\n") == 1
    assert run.stdout == ""


def test_at_candidates_come_from_the_ignore_aware_walker(tmp_path: Path) -> None:
    (tmp_path / ".git").mkdir()
    (tmp_path / ".gitignore").write_text("build/\n")
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "app.py").write_text("")
    (tmp_path / "build").mkdir()
    (tmp_path / "build" / "out.bin").write_text("")
    runtime = Interactive(parse(tmp_path), tmp_path)
    assert sorted(runtime.candidates()) == ["src/", "src/app.py"]


def test_the_farewell_command_reaches_the_same_endpoint(tmp_path: Path) -> None:
    args = parse(tmp_path, "--base-url", "http://127.0.0.1:9/v1", "--wire", "openai-chat", "--model", "m1")
    assert resume_program(args) == "ketch --base-url http://127.0.0.1:9/v1 --wire openai-chat --model m1"
    assert resume_program(parse(tmp_path, "-m", "openai:gpt-5")) == "ketch -m openai:gpt-5"


async def test_a_pending_approval_is_asked_again_on_resume(tmp_path: Path, fake_provider: Any) -> None:
    fake = fake_provider([
        Turn(tool_calls=[ToolCall("write_file", {"path": "later.txt", "content": "yes\n"})]),
        Turn(text="Written after resuming."),
    ])
    async with running(tmp_path, *adhoc(fake, "openai-chat")) as (h, runtime):
        await h.wait_text("adhoc:fake-model")
        await h.type("write later.txt\r")
        await h.wait_text("Allow write_file?")
        session_id = runtime.session.session_id
    # The app closed with the question open: nothing was written, nothing was answered.
    assert not (tmp_path / "later.txt").exists()
    async with running(tmp_path, "--resume", session_id, *adhoc(fake, "openai-chat")) as (h, _):
        await h.wait_text("Allow write_file?")  # asked again before any new prompt
        await h.type("y")
        await h.wait_text("Written after resuming.")
        await h.idle()
    assert (tmp_path / "later.txt").read_text() == "yes\n"
    assert len(fake.model_requests) == 2
    assert "later.txt" in tool_results(fake.model_requests[1])[0][1]


async def test_resume_without_an_id_opens_the_picker(tmp_path: Path, fake_provider: Any) -> None:
    fake = fake_provider([Turn(text="First answer."), Turn(text="Picked up again.")])
    async with running(tmp_path, *adhoc(fake, "openai-chat")) as (h, runtime):
        await h.wait_text("adhoc:fake-model")
        await h.type("remember the blue door\r")
        await h.wait_text("First answer.")
        await h.idle()
        session_id = runtime.session.session_id
    async with running(tmp_path, "--resume", *adhoc(fake, "openai-chat")) as (h, runtime):
        await h.wait_text(session_id)  # the picker lists the stored session
        await h.type("\r")
        await h.wait_text(f"Resumed session {session_id}")
        await h.type("and now?\r")
        await h.wait_text("Picked up again.")
        await h.idle()
        assert runtime.session.session_id == session_id
    assert user_texts(fake.model_requests[-1]) == ["remember the blue door", "and now?"]


async def test_context_panel_shows_tokens_by_part(tmp_path: Path, fake_provider: Any) -> None:
    fake = fake_provider([Turn(text="An answer " * 200)])
    async with running(tmp_path, *adhoc(fake, "openai-chat")) as (h, _):
        await h.wait_text("adhoc:fake-model")
        await h.type("go\r")
        await h.wait_text("An answer")
        await h.idle()
        await h.type("/context\r")
        await h.wait_text("tool schemas")
        text = h.sink.text()
    rows = {line.split()[0]: line for line in text.splitlines() if line.strip().startswith(("instructions", "messages"))}
    assert int(rows["messages"].split()[1].replace(",", "")) >= 400  # ~2,000 chars of answer
    assert int(rows["instructions"].split()[1].replace(",", "")) > 100
