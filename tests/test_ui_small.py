"""The small things: ask needs no approval and is a picker, "allow for this session"
says what it covers, /export writes outside the repository, ``ketch sessions`` rows fit
120 columns, the "no model" error names the config file."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from fakeprovider import ToolCall, Turn, tool_results
from kettle import adhoc, run_ketch
from test_interactive import running
from uifakes import Approval, FakeSession, Harness

from ketch.state.store import Store


async def test_ask_runs_without_approval_and_is_answered_from_a_picker(tmp_path: Path, fake_provider: Any) -> None:
    fake = fake_provider([
        Turn(tool_calls=[ToolCall("ask", {"question": "Which file first?", "choices": ["a.py", "b.py"]})]),
        Turn(text="Starting with b.py."),
    ])
    async with running(tmp_path, *adhoc(fake, "openai-chat")) as (h, _):
        await h.wait_text("adhoc:fake-model")
        await h.type("plan it\r")
        await h.wait_text("Which file first?")
        screen = h.sink.text()
        assert "❯ 1. a.py" in screen and "2. b.py" in screen
        assert "Allow ask" not in screen and "{'question'" not in screen
        await h.type("\x1b[B\r")  # down, enter
        await h.wait_text("Starting with b.py.")
        await h.idle()
        assert "⎿ The user answered: b.py" in h.sink.text()
    assert tool_results(fake.model_requests[1])[0][1] == "The user answered: b.py"


async def test_allow_for_this_session_names_what_it_lets_through() -> None:
    turn = [Approval("r1", name="shell", args={"command": "pytest -q tests"}, preview="pytest -q tests"),
            Approval("r2", name="write_file", args={"path": "a.py"}, preview="+x")]
    session = FakeSession([turn])
    async with Harness(session, columns=100) as h:
        await h.type("go\r")
        await h.wait_text("2. Allow this exact command again this session (a)")
        await h.type("a")
        await h.wait_text("2. Allow write_file calls this session; run-later files (.git, workflows ...) still ask (a)")
        await h.type("y")
        await h.idle()
    assert [d[1] for d in session.decisions] == ["allow_session", "allow"]


async def test_export_goes_to_the_data_dir_unless_a_path_is_given(tmp_path: Path, fake_provider: Any) -> None:
    fake = fake_provider([Turn(text="Hi there.")])
    async with running(tmp_path, *adhoc(fake, "openai-chat")) as (h, runtime):
        await h.wait_text("adhoc:fake-model")
        await h.type("hello\r")
        await h.wait_text("Hi there.")
        await h.idle()
        await h.type("/export\r")
        await h.wait_text("Exported session")
        sid = runtime.session.session_id
        await h.type("/export notes/out.md\r")
        await h.wait_for(lambda: (tmp_path / "notes" / "out.md").exists())
    default = Path(os.environ["KETCH_DATA_DIR"]) / "exports" / f"ketch-{sid}.md"
    assert default.exists() and "Hi there." in default.read_text()
    assert not list(tmp_path.glob("ketch-*.md"))  # nothing left in the repository by default


def test_sessions_rows_fit_120_columns(tmp_path: Path) -> None:
    with Store.open() as store:
        sid = store.create_session(str(tmp_path), "openrouter:anthropic/claude-sonnet-4.5-with-a-long-name", "build")
        store.set_title(sid, "a very long title " * 12)
        from pydantic_ai.messages import ModelRequest, UserPromptPart

        store.append_step(sid, [ModelRequest(parts=[UserPromptPart("hi")])])
    run = run_ketch(["sessions"], tmp_path)
    assert run.code == 0, run.stderr
    rows = run.stdout.splitlines()
    assert rows[0].startswith(sid) and rows[0].endswith("…")
    assert all(len(r) <= 120 for r in rows), [len(r) for r in rows]


def test_no_model_error_says_where_the_config_file_goes(tmp_path: Path) -> None:
    run = run_ketch(["-p", "hi"], tmp_path, env={"KETCH_MODEL": ""})
    assert run.code == 2
    config = Path(os.environ["KETCH_CONFIG_DIR"]) / "config.toml"
    assert "no model chosen" in run.stderr and str(config) in run.stderr and "ketch auth login" in run.stderr
    assert run.stderr.count("\n") == 1
