"""A conversation that never stored a message leaves no row in the session store: quitting
before a prompt, ``--resume`` then picking an older session, ``/clear`` then quitting. The
real app (and the real binary in tmux) runs against the fake provider; the assertions read
the rows of the SQLite file as another process would."""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
from pathlib import Path
from typing import Any

import pytest
from fakeprovider import FakeProvider, Turn, user_texts
from kettle import adhoc, run_ketch, write_project_config
from test_interactive import running
from test_tmux_e2e import Tmux, tmux  # noqa: F401  (the fixture)

from ketch.state.store import Store

WIRE = "openai-chat"


def _rows(sql: str, *params: Any) -> list[tuple[Any, ...]]:
    db = Path(os.environ["KETCH_DATA_DIR"]) / "ketch.db"
    if not db.exists():
        return []
    with sqlite3.connect(db) as conn:
        return conn.execute(sql, params).fetchall()


def _sessions() -> list[tuple[str, int]]:
    """Every session row with its number of stored messages, oldest first."""
    return _rows("SELECT s.id, (SELECT COUNT(*) FROM messages m WHERE m.session_id = s.id) FROM sessions s ORDER BY s.id")


async def _quit(h: Any) -> None:
    await h.type("/quit\r")
    await h.wait_for(lambda: h.task.done())


@pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed")
def test_quitting_the_real_app_before_a_prompt_leaves_no_session(tmp_path: Path, tmux: Tmux) -> None:  # noqa: F811
    (tmp_path / ".git").mkdir()
    with FakeProvider([]) as fake:
        tmux.keys(f"ketch {' '.join(adhoc(fake, WIRE))}", "Enter")
        tmux.wait("adhoc:fake-model · think off")
        tmux.keys("/quit", "Enter")
        tmux.wait(r"^\$[ \t]*$", whole=True)  # the shell prompt is back
        assert "Resume with" not in tmux.everything()  # there is nothing to resume
    assert fake.model_requests == []
    assert _sessions() == []
    assert run_ketch(["sessions"], tmp_path).stdout.strip() == "No sessions in this directory yet."


async def test_quitting_before_a_prompt_leaves_no_session_and_continue_finds_the_last_real_one(
    tmp_path: Path, fake_provider: Any, preloaded_ketch: Any
) -> None:
    # (this test's event loop is running: each headless run is a ketch process of its own: the
    # --output-format json one ``python -m ketch`` itself, the other forked from the preloaded interpreter)
    fake = fake_provider([Turn(text="Stored."), Turn(text="Continued.")])
    first = run_ketch(["-p", "remember the red kite", "--output-format", "json", *adhoc(fake, WIRE)], tmp_path, subprocess_=True)
    assert first.code == 0, first.stderr
    sid = json.loads(first.stdout)["session_id"]
    assert _sessions() == [(sid, 2)]  # the id headless printed is the stored row

    async with running(tmp_path, *adhoc(fake, WIRE)) as (h, runtime):
        await h.wait_text("adhoc:fake-model")
        fresh = runtime.session.session_id
        assert fresh != sid
        await _quit(h)
    assert _sessions() == [(sid, 2)]

    again = run_ketch(["--continue", "-p", "what did I ask?", *adhoc(fake, WIRE)], tmp_path, forked_from=preloaded_ketch)
    assert again.code == 0, again.stderr
    assert user_texts(fake.model_requests[-1]) == ["remember the red kite", "what did I ask?"]
    assert _sessions() == [(sid, 4)]


async def test_resume_without_an_id_then_a_pick_leaves_only_the_picked_session(tmp_path: Path, fake_provider: Any) -> None:
    fake = fake_provider([Turn(text="First answer."), Turn(text="Picked up again.")])
    async with running(tmp_path, *adhoc(fake, WIRE)) as (h, runtime):
        await h.wait_text("adhoc:fake-model")
        await h.type("remember the blue door\r")
        await h.wait_text("First answer.")
        await h.idle()
        sid = runtime.session.session_id
    assert _sessions() == [(sid, 2)]

    async with running(tmp_path, "--resume", *adhoc(fake, WIRE)) as (h, runtime):
        await h.wait_text(sid)  # the picker
        await h.type("\r")
        await h.wait_text(f"Resumed session {sid}")
        await h.type("and now?\r")
        await h.wait_text("Picked up again.")
        await h.idle()
        await _quit(h)
    assert _sessions() == [(sid, 4)]


async def test_clear_then_quit_leaves_no_empty_session_and_the_title_lands_on_its_own_row(
    tmp_path: Path, fake_provider: Any
) -> None:
    write_project_config(tmp_path, "titles = true\n")
    fake = fake_provider([
        Turn(text="First answer."),
        Turn(text="Kite colours", delay=1.0),  # the title call: it answers after /clear
        Turn(text="Second answer."),
    ])
    async with running(tmp_path, *adhoc(fake, WIRE)) as (h, runtime):
        await h.wait_text("adhoc:fake-model")
        await h.type("/fork\r")
        await h.wait_text("Nothing to fork yet")
        await h.type("what colour is the kite?\r")
        await h.wait_text("First answer.")
        await h.idle()
        first = runtime.session.session_id
        title_task = runtime.session.title_task
        await h.type("/clear\r")
        await h.wait_for(lambda: runtime.session.session_id != first)
        assert not title_task.done()  # the title arrives in the new conversation
        assert await title_task == "Kite colours"
        await h.type("a new topic\r")
        await h.wait_text("Second answer.")
        await h.idle()
        second = runtime.session.session_id
        await h.type("/fork\r")
        await h.wait_text(f"Forked {second} into")
        forked = runtime.session.session_id
        await h.type("/clear\r")
        await h.wait_for(lambda: runtime.session.session_id != forked)
        await _quit(h)
    assert _sessions() == [(first, 2), (second, 2), (forked, 2)]
    titles = dict(_rows("SELECT id, title FROM sessions"))
    assert titles == {first: "Kite colours", second: "", forked: ""}
    assert _rows("SELECT parent_id FROM sessions WHERE id = ?", forked) == [(second,)]


def test_sessions_and_continue_skip_empty_rows_an_older_ketch_left(tmp_path: Path, fake_provider: Any) -> None:
    fake = fake_provider([Turn(text="one"), Turn(text="two")])
    assert run_ketch(["-p", "first", *adhoc(fake, WIRE)], tmp_path).code == 0
    [(sid, _)] = _sessions()
    with Store.open() as store:
        empty = store.create_session(str(tmp_path.resolve()), "adhoc:fake-model", "build")  # newer, no messages
    listing = run_ketch(["sessions"], tmp_path)
    assert listing.code == 0 and sid in listing.stdout and empty not in listing.stdout
    run = run_ketch(["--continue", "-p", "second", *adhoc(fake, WIRE)], tmp_path)
    assert run.code == 0, run.stderr
    assert user_texts(fake.model_requests[-1]) == ["first", "second"]


async def test_slash_sessions_says_when_it_cut_the_list_and_lists_more_on_request(tmp_path: Path, fake_provider: Any) -> None:
    from pydantic_ai.messages import ModelRequest, UserPromptPart

    fake = fake_provider([])
    cwd = str(tmp_path.resolve())
    with Store.open(Path(os.environ["KETCH_DATA_DIR"]) / "ketch.db") as store:
        ids = []
        for n in range(23):
            ids.append(store.create_session(cwd, "adhoc:fake-model", "build"))
            store.append_step(ids[-1], [ModelRequest(parts=[UserPromptPart(f"question {n}")])])
            store.set_title(ids[-1], f"topic number {n}")
    async with running(tmp_path, *adhoc(fake, WIRE)) as (h, runtime):
        await h.wait_text("adhoc:fake-model")
        await h.type("/sessions\r")
        await h.wait_text("Showing the newest 20 of 23; /sessions all lists every one.")
        import re

        listed = "\n".join(h.sink.all_lines())
        assert "topic number 22" in listed and "topic number 3" in listed
        assert re.search(r"topic number 2\b", listed) is None  # the 21st newest is left out
        await h.type("/sessions 2\r")
        await h.wait_text("Showing the newest 2 of 23")
        await h.type("/sessions all\r")
        await h.wait_text("topic number 0")
        await h.type("/sessions soon\r")
        await h.wait_text("/sessions takes a number of sessions or 'all', not 'soon'.")
        await _quit(h)
    assert fake.model_requests == []
