"""Sessions you can close and come back to, end to end: the rows in the SQLite file, the
requests the fake provider recorded, and what the CLI prints."""

from __future__ import annotations

import argparse
import json
import os
import sqlite3
from pathlib import Path
from typing import Any

from fakeprovider import FakeProvider, ToolCall, Turn, tool_results, user_texts
from kettle import adhoc, run_ketch, write_project_config

from ketch.protocol import events as ev
from ketch.frontends.assemble import build_session

WIRE = "openai-chat"


def _db() -> Path:
    return Path(os.environ["KETCH_DATA_DIR"]) / "ketch.db"


def _rows(sql: str, *params: Any) -> list[tuple[Any, ...]]:
    """Read the store file directly, as another process would."""
    with sqlite3.connect(_db()) as conn:
        return conn.execute(sql, params).fetchall()


def _read_then_answer(answer: str) -> list[Turn]:
    return [Turn(tool_calls=[ToolCall("read_file", {"path": "notes.txt"})]), Turn(text=answer)]


def test_continue_resume_sessions_and_export(tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("the secret word is plover\n")
    with FakeProvider(_read_then_answer("It says plover.")) as fake:
        first = run_ketch(["-p", "what do my notes say?", *adhoc(fake, WIRE)], tmp_path)
    assert first.code == 0, first.stderr
    [(sid, title)] = _rows("SELECT id, title FROM sessions")
    assert title == ""  # headless sessions are not named by a model call
    # steps are committed with their events; streaming fragments are not stored
    assert [r[0] for r in _rows("SELECT step FROM messages WHERE session_id=? ORDER BY seq", sid)] == [0, 1, 1, 2]
    types = [json.loads(r[0])["type"] for r in _rows("SELECT data FROM events WHERE session_id=? ORDER BY seq", sid)]
    assert types.count("usage") == 2 and "tool_call_finished" in types and types[-1] == "turn_finished"
    assert "text_delta" not in types

    with FakeProvider([Turn(text="You asked about notes.")]) as fake:
        again = run_ketch(["--continue", "-p", "what did I ask?", *adhoc(fake, WIRE)], tmp_path)
    assert again.code == 0, again.stderr
    [request] = fake.model_requests
    assert user_texts(request) == ["what do my notes say?", "what did I ask?"]
    assert "plover" in tool_results(request)[0][1]
    assert _rows("SELECT COUNT(*) FROM sessions") == [(1,)]

    with FakeProvider([Turn(text="Third.")]) as fake:
        third = run_ketch(["--resume", sid[:9], "-p", "and now?", *adhoc(fake, WIRE)], tmp_path)
    assert third.code == 0, third.stderr
    assert user_texts(fake.model_requests[0]) == ["what do my notes say?", "what did I ask?", "and now?"]

    listing = run_ketch(["sessions"], tmp_path)
    assert listing.code == 0 and sid in listing.stdout and "8 msgs" in listing.stdout

    md = run_ketch(["export", sid, "--format", "md"], tmp_path)
    assert md.code == 0, md.stderr
    assert "## User" in md.stdout and "what did I ask?" in md.stdout and "It says plover." in md.stdout
    assert "`read_file`" in md.stdout and "notes.txt" in md.stdout
    record = json.loads(run_ketch(["export", sid[:9], "--format", "json"], tmp_path).stdout)
    assert record["session"]["id"] == sid and len(record["messages"]) == 8
    assert any(e["type"] == "tool_call_finished" for e in record["events"])


def test_fork_copies_history_and_leaves_the_parent_alone(tmp_path: Path) -> None:
    from ketch.state.store import Store

    with FakeProvider([Turn(text="one")]) as fake:
        assert run_ketch(["-p", "first", *adhoc(fake, WIRE)], tmp_path).code == 0
    [(parent,)] = _rows("SELECT id FROM sessions")
    with Store.open() as store:
        child = store.fork(parent)
    with FakeProvider([Turn(text="two")]) as fake:
        run = run_ketch(["--resume", child, "-p", "second", *adhoc(fake, WIRE)], tmp_path)
    assert run.code == 0, run.stderr
    assert user_texts(fake.model_requests[0]) == ["first", "second"]
    counts = dict(_rows("SELECT session_id, COUNT(*) FROM messages GROUP BY session_id"))
    assert counts == {parent: 2, child: 4}
    assert _rows("SELECT parent_id FROM sessions WHERE id=?", child) == [(parent,)]


def test_resume_errors_are_one_line(tmp_path: Path) -> None:
    with FakeProvider([Turn(text="a"), Turn(text="b")]) as fake:
        for _ in range(2):
            assert run_ketch(["-p", "hi", *adhoc(fake, WIRE)], tmp_path).code == 0
        ids = [r[0] for r in _rows("SELECT id FROM sessions")]
        common = os.path.commonprefix(ids)
        assert common  # same millisecond range: ids share their leading hex digits
        cases = [
            (["--resume", "-p", "x"], "ketch sessions"),
            (["--resume", common, "-p", "x"], "matches several sessions"),
            (["--resume", "zzzz", "-p", "x"], "no session 'zzzz'"),
        ]
        for args, needle in cases:
            run = run_ketch([*args, *adhoc(fake, WIRE)], tmp_path)
            assert run.code == 2 and needle in run.stderr, (args, run.stderr)
            assert len(run.stderr.strip().splitlines()) == 1 and "Traceback" not in run.stderr
        assert len(fake.model_requests) == 2  # no failed command reached the model
    run = run_ketch(["export", common], tmp_path)
    assert run.code == 2 and "matches several sessions" in run.stderr and len(run.stderr.splitlines()) == 1


def test_unusable_store_is_reported_with_its_path_and_left_untouched(tmp_path: Path) -> None:
    from ketch.state.store import Store

    db = _db()
    db.parent.mkdir(parents=True, exist_ok=True)
    db.write_bytes(b"this is not a database\n" * 10)
    with FakeProvider([Turn(text="never")]) as fake:
        run = run_ketch(["-p", "hi", *adhoc(fake, WIRE)], tmp_path)
        assert run.code == 2 and str(db) in run.stderr and len(run.stderr.strip().splitlines()) == 1
        assert db.read_bytes() == b"this is not a database\n" * 10
        db.unlink()
        Store.open(db).close()
        with sqlite3.connect(db) as conn:
            conn.execute("UPDATE meta SET schema_version = 99")
        before = db.read_bytes()
        run = run_ketch(["--continue", "-p", "hi", *adhoc(fake, WIRE)], tmp_path)
        assert run.code == 2 and str(db) in run.stderr and "newer" in run.stderr
        assert len(run.stderr.strip().splitlines()) == 1
        assert db.read_bytes() == before
        listing = run_ketch(["sessions"], tmp_path)
        assert listing.code == 2 and str(db) in listing.stderr
        assert fake.model_requests == []


# ---------------------------------------------------------------- a pending approval survives closing


async def _interactive(fake: FakeProvider, cwd: Path, **flags: Any) -> Any:
    base = {"yolo": False, "continue_": False, "resume": None}
    args = argparse.Namespace(cwd=str(cwd), base_url=fake.base_url, wire=WIRE, model="fake-model", **(base | flags))
    return await build_session(args, interactive=True)


async def test_a_pending_approval_is_asked_again_after_resume(tmp_path: Path) -> None:
    script = [
        Turn(text="I'll write it.", tool_calls=[ToolCall("write_file", {"path": "out.txt", "content": "hi\n"}, id="call_w")]),
        Turn(text="Written."),
    ]
    with FakeProvider(script) as fake:
        session = await _interactive(fake, tmp_path)
        sid = session.session_id
        async for event in session.run_turn("write out.txt"):
            if isinstance(event, ev.ApprovalRequested):
                break  # the user quits with the approval prompt open
        await session.aclose()
        # on disk: the response whose call awaits a decision, and the pending record
        last = json.loads(_rows("SELECT data FROM messages WHERE session_id=? ORDER BY seq DESC LIMIT 1", sid)[0][0])
        assert last["kind"] == "response" and last["parts"][-1]["tool_call_id"] == "call_w"
        [(pending,)] = _rows("SELECT data FROM pending WHERE session_id=?", sid)
        assert json.loads(pending)[0]["name"] == "write_file"
        assert not (tmp_path / "out.txt").exists()

        resumed = await _interactive(fake, tmp_path, continue_=True)
        assert resumed.session_id == sid and resumed.has_pending()
        seen: list[Any] = []
        async for event in resumed.resume_pending():
            seen.append(event)
            if isinstance(event, ev.ApprovalRequested):
                requests_when_asked = len(fake.model_requests)
                resumed.decide(event.request_id, "allow")
        await resumed.aclose()

    # A --base-url server that names no window is told once per session at info level (local-windows'
    # window probe at the turn's start); the resumed session says it again. It is not part of the order.
    window_notes = [e for e in seen if isinstance(e, ev.Notice) and e.text.startswith("could not read the context window")]
    assert [e.level for e in window_notes] == ["info"]
    seen = [e for e in seen if e not in window_notes]
    kinds = [type(e).__name__ for e in seen]
    assert kinds[:3] == ["TurnStarted", "ToolCallStarted", "ApprovalRequested"], kinds
    assert requests_when_asked == 1  # asked before anything went to the model
    asked = seen[2]
    assert asked.call_id == "call_w" and asked.args == {"path": "out.txt", "content": "hi\n"}
    assert (tmp_path / "out.txt").read_text() == "hi\n"
    assert len(fake.model_requests) == 2
    second = fake.model_requests[1]
    assert [cid for cid, _ in tool_results(second)] == ["call_w"]
    assert user_texts(second) == ["write out.txt"]  # no prompt was invented for the resume
    assert _rows("SELECT COUNT(*) FROM pending") == [(0,)]
    assert seen[-1].reason == "done" and seen[-1].text == "Written."


async def test_a_new_prompt_on_open_calls_closes_them_instead_of_sending_them_dangling(tmp_path: Path) -> None:
    script = [Turn(tool_calls=[ToolCall("write_file", {"path": "o.txt", "content": "x"}, id="call_o")]), Turn(text="ok")]
    with FakeProvider(script) as fake:
        session = await _interactive(fake, tmp_path)
        async for event in session.run_turn("write o.txt"):
            if isinstance(event, ev.ApprovalRequested):
                session.cancel_turn()  # Esc with the approval open
        events = [e async for e in session.run_turn("never mind, say ok")]
        await session.aclose()
    assert events[-1].reason == "done", events
    [(call_id, content)] = tool_results(fake.model_requests[1])
    assert call_id == "call_o" and content
    assert user_texts(fake.model_requests[1])[-1] == "never mind, say ok"
    assert not (tmp_path / "o.txt").exists()


# ---------------------------------------------------------------- cost


def test_cost_is_priced_for_a_known_model_and_null_for_an_unknown_one(tmp_path: Path) -> None:
    with FakeProvider([Turn(text="a", usage=(1000, 500)), Turn(text="b")]) as fake:
        write_project_config(
            tmp_path,
            f'[connections.work]\npreset = "openai"\nbase_url = "{fake.base_url}"\napi_key_env = "WORK_KEY"\n'
            'wire = "openai-chat"\n',
        )
        known = run_ketch(["-p", "hi", "-m", "work:gpt-5", "--output-format", "json"], tmp_path, env={"WORK_KEY": "k"})
        unknown = run_ketch(["-p", "hi", "--output-format", "json", *adhoc(fake, WIRE)], tmp_path)
    assert known.code == 0, known.stderr
    cost = json.loads(known.stdout)["cost_usd"]
    # gpt-5: $1.25 per million input tokens, $10 per million output tokens
    assert cost is not None and abs(cost - (1000 * 1.25 + 500 * 10) / 1e6) < 1e-9
    assert unknown.code == 0 and json.loads(unknown.stdout)["cost_usd"] is None


# ---------------------------------------------------------------- listing many sessions, and no store at all


def _stored_sessions(cwd: Path, count: int) -> list[str]:
    """``count`` sessions of one message each in ``cwd``, written to the real store; newest first."""
    from pydantic_ai.messages import ModelRequest, UserPromptPart

    from ketch.state.store import Store

    ids = []
    with Store.open(_db()) as store:
        for i in range(count):
            sid = store.reserve_session(str(cwd.resolve()), "fake:model", "build")
            store.append_step(sid, [ModelRequest(parts=[UserPromptPart(content=f"prompt {i}")])])
            ids.append(sid)
    return ids[::-1]


def _listed(stdout: str, ids: list[str]) -> list[str]:
    known = set(ids)
    return [line.split()[0] for line in stdout.splitlines() if line.split() and line.split()[0] in known]


def test_sessions_says_when_it_cut_the_list_and_lists_more_on_request(tmp_path: Path) -> None:
    ids = _stored_sessions(tmp_path, 55)

    default = run_ketch(["sessions"], tmp_path)
    assert default.code == 0, default.stderr
    assert _listed(default.stdout, ids) == ids[:50]  # the 50 most recent, newest first
    [note] = [line for line in default.stdout.splitlines() if "most recent of" in line]
    assert "50 most recent of 55 sessions" in note and "--limit N" in note and "--all" in note

    three = run_ketch(["sessions", "--limit", "3"], tmp_path)
    assert three.code == 0, three.stderr
    assert _listed(three.stdout, ids) == ids[:3] and "3 most recent of 55 sessions" in three.stdout
    assert _listed(run_ketch(["sessions", "-n", "3"], tmp_path).stdout, ids) == ids[:3]

    for args in (["--all"], ["--limit", "55"], ["--limit", "500"]):
        everything = run_ketch(["sessions", *args], tmp_path)
        assert everything.code == 0, everything.stderr
        assert _listed(everything.stdout, ids) == ids, args
        assert "most recent of" not in everything.stdout, args  # nothing was cut

    for args in (["--limit", "0"], ["--limit", "-2"], ["--limit", "lots"], ["--limit"], ["--limit", "3", "--all"]):
        bad = run_ketch(["sessions", *args], tmp_path, subprocess_=True)  # argparse exits the process
        assert bad.code == 2 and bad.stdout == "", (args, bad)
        assert len(bad.stderr.strip().splitlines()) == 1 and "--limit" in bad.stderr, (args, bad.stderr)
        assert "Traceback" not in bad.stderr

    help_text = run_ketch(["sessions", "--help"], tmp_path, subprocess_=True).stdout
    assert "--limit N" in help_text and "--all" in help_text and "50" in help_text


def test_reading_commands_create_no_store(tmp_path: Path) -> None:
    data = Path(os.environ["KETCH_DATA_DIR"])
    assert not data.exists()
    listing = run_ketch(["sessions"], tmp_path)
    assert listing.code == 0 and listing.stdout.strip() == "No sessions in this directory yet.", listing
    for args in (["export", "0123abcd"], ["export", "0123abcd", "--format", "json"]):
        run = run_ketch(args, tmp_path)
        assert run.code == 2 and run.stdout == "", run
        assert run.stderr.strip().splitlines() == ["ketch: no session '0123abcd'; list them with 'ketch sessions'"]
    assert not data.exists()

    data.mkdir()  # a data dir without a store: still nothing is made in it
    assert run_ketch(["sessions", "--all"], tmp_path).code == 0
    assert run_ketch(["export", "0123abcd"], tmp_path).code == 2
    assert list(data.iterdir()) == []


def test_resuming_a_session_from_another_directory_says_where_it_was_started(tmp_path: Path) -> None:
    first_dir, second_dir = tmp_path / "first", tmp_path / "second"
    first_dir.mkdir()
    second_dir.mkdir()
    with FakeProvider([Turn(text="one"), Turn(text="two"), Turn(text="three")]) as fake:
        started = run_ketch(["-p", "hello", "--output-format", "json", *adhoc(fake, WIRE)], first_dir)
        sid = json.loads(started.stdout)["session_id"]
        here = run_ketch(["-p", "again", "--resume", sid, *adhoc(fake, WIRE)], first_dir)
        elsewhere = run_ketch(["-p", "and again", "--resume", sid, *adhoc(fake, WIRE)], second_dir)
    assert here.code == 0 and "was started in" not in here.stderr, here.stderr
    assert elsewhere.code == 0, elsewhere.stderr
    assert elsewhere.stdout.strip() == "three"
    assert f"session {sid} was started in {first_dir.resolve()}; it continues here, in {second_dir.resolve()}" in elsewhere.stderr
    assert user_texts(fake.model_requests[-1]) == ["hello", "again", "and again"]  # the history came along
