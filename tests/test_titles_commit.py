"""Auxiliary model calls (session titles, commit messages): what goes on the wire, what lands on disk."""

from __future__ import annotations

import argparse
import os
import sqlite3
import subprocess
from pathlib import Path
from typing import Any

from fakeprovider import FakeProvider, Turn, instructions, user_texts

from ketch.frontends.assemble import build_session
from ketch.core.commit import propose_commit_message
from ketch.config.settings import load_config, resolve_connection
from ketch.providers.models import build_model
from ketch.state.titles import sanitize_title
from ketch.tools.git import staged_diff

WIRE = "openai-chat"


def _model(fake: FakeProvider, cwd: Path) -> Any:
    conn = resolve_connection(load_config(cwd, {}), "fake-model", base_url=fake.base_url, wire=WIRE)
    return build_model(conn)


async def _session(fake: FakeProvider, cwd: Path) -> Any:
    args = argparse.Namespace(cwd=str(cwd), base_url=fake.base_url, wire=WIRE, model="fake-model", yolo=False)
    (cwd / ".ketch").mkdir(exist_ok=True)
    (cwd / ".ketch" / "config.toml").write_text("titles = true\n")  # the suite's default is off
    return await build_session(args, interactive=True, titles=True)


def _title_in_store(session_id: str) -> str:
    with sqlite3.connect(Path(os.environ["KETCH_DATA_DIR"]) / "ketch.db") as conn:
        return conn.execute("SELECT title FROM sessions WHERE id = ?", (session_id,)).fetchone()[0]


async def test_title_comes_from_a_toolless_call_after_the_first_turn(tmp_path: Path) -> None:
    raw_title = '"Title: Fix the flaky   login test in CI, then make the retry logic cleaner and document it."\nmore'
    with FakeProvider([Turn(text="Done."), Turn(text=raw_title), Turn(text="Second answer.")]) as fake:
        session = await _session(fake, tmp_path)
        [_ async for _ in session.run_turn("please fix the flaky login test")]
        assert session.title_task is not None
        title = await session.title_task
        [_ async for _ in session.run_turn("thanks")]
        await session.aclose()
    turn_request, title_request, next_request = fake.model_requests
    assert turn_request.body.get("tools")  # the agent's own request carries its tools
    assert "tools" not in title_request.body and "tool_choice" not in title_request.body
    assert user_texts(title_request) == ["please fix the flaky login test"]
    assert "title" in instructions(title_request).lower()
    assert title == _title_in_store(session.session_id)
    assert title.startswith("Fix the flaky login test in CI") and len(title) <= 60 and "\n" not in title
    assert '"' not in title and not title.lower().startswith("title")
    assert "tools" in next_request.body and len(fake.model_requests) == 3  # exactly one title call


async def test_a_failed_title_call_leaves_the_session_untitled_and_the_turn_fine(tmp_path: Path) -> None:
    with FakeProvider([Turn(text="Answer."), Turn(status=500), Turn(status=500), Turn(status=500)]) as fake:
        session = await _session(fake, tmp_path)
        events = [e async for e in session.run_turn("hello")]
        assert await session.title_task == ""
        await session.aclose()
    assert events[-1].reason == "done" and events[-1].text == "Answer."
    assert _title_in_store(session.session_id) == ""


def test_sanitize_title() -> None:
    assert sanitize_title("\n\n**Refactor store**.\n") == "Refactor store"
    assert sanitize_title("“Add\ttests”") == "Add tests"
    long = sanitize_title("word " * 40)
    assert len(long) <= 60 and long.endswith("…")
    assert sanitize_title("") == ""


async def test_commit_message_from_the_staged_diff_without_tools(tmp_path: Path) -> None:
    def git(*args: str) -> None:
        subprocess.run(["git", "-C", str(tmp_path), *args], check=True, capture_output=True)

    git("init", "-q")
    git("config", "user.email", "t@example.invalid")
    git("config", "user.name", "t")
    (tmp_path / "app.py").write_text("def greet():\n    return 'hello'\n")
    git("add", "app.py")
    diff = staged_diff(tmp_path)
    assert "+def greet():" in diff
    with FakeProvider([Turn(text="```\nAdd greet()\n\nReturns a greeting.\n```")]) as fake:
        message = await propose_commit_message(_model(fake, tmp_path), diff)
    [request] = fake.model_requests
    assert "tools" not in request.body
    assert any("+def greet():" in text and "app.py" in text for text in user_texts(request))
    assert message == "Add greet()\n\nReturns a greeting.\n"
