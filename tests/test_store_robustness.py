"""The session store under bad files, other programs and odd text, driven through the real CLI
(or the real ``Store``) on real SQLite files: every failure is one line naming the file and
what to do, exit code 2, and nothing already saved is touched."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest
from fakeprovider import FakeProvider, ToolCall, Turn, tool_results, user_texts
from kettle import adhoc, ketch_env, run_ketch

from ketch.state.store import Store, StoreError

WIRE = "openai-chat"
SRC = Path(__file__).resolve().parents[1] / "src"


def _db() -> Path:
    return Path(os.environ["KETCH_DATA_DIR"]) / "ketch.db"


def _rows(sql: str, *params: object) -> list[tuple[object, ...]]:
    """Read (or change) the store file directly, as another program would, and let go of it."""
    with contextlib.closing(sqlite3.connect(_db())) as conn, conn:
        return conn.execute(sql, params).fetchall()


def _one_line_error(run: object, *needles: str) -> None:
    code, stderr = run.code, run.stderr  # type: ignore[attr-defined]
    assert code == 2, (code, stderr)
    assert len(stderr.strip().splitlines()) == 1, stderr
    assert "internal error" not in stderr and "Traceback" not in stderr and "Error:" not in stderr, stderr
    for needle in needles:
        assert needle in stderr, (needle, stderr)


def _session_with_one_turn(cwd: Path) -> str:
    with FakeProvider([Turn(text="first answer")]) as fake:
        assert run_ketch(["-p", "first", *adhoc(fake, WIRE)], cwd).code == 0
    [(sid,)] = _rows("SELECT id FROM sessions")
    return sid


# ---------------------------------------------------------------- a damaged file


def test_damage_past_the_schema_is_one_line_naming_the_file_and_the_file_is_left_alone(tmp_path: Path) -> None:
    sid = _session_with_one_turn(tmp_path)
    db = _db()
    # the header, the schema and meta stay readable (the store opens); the sessions table does not
    [(root,)] = _rows("SELECT rootpage FROM sqlite_master WHERE name = 'sessions'")
    [(page_size,)] = _rows("PRAGMA page_size")
    data = bytearray(db.read_bytes())
    data[(root - 1) * page_size : root * page_size] = b"\xfe" * page_size
    db.write_bytes(bytes(data))
    with FakeProvider([Turn(text="never")]) as fake:
        for args in (
            ["sessions"],
            ["export", sid],
            ["--continue", "-p", "hi", *adhoc(fake, WIRE)],
            ["--resume", sid, "-p", "hi", *adhoc(fake, WIRE)],
            ["-p", "hi", *adhoc(fake, WIRE)],
        ):
            _one_line_error(run_ketch(args, tmp_path), str(db), "damaged", "move it aside")
            assert db.read_bytes() == bytes(data), args
        assert fake.model_requests == []


def test_an_event_row_that_is_not_utf8_fails_the_export_in_one_line(tmp_path: Path) -> None:
    sid = _session_with_one_turn(tmp_path)
    _rows("UPDATE events SET data = CAST(X'7B22747970' || X'FF' || X'227D' AS TEXT) WHERE seq = 0")
    for fmt in ("md", "json"):
        _one_line_error(run_ketch(["export", sid, "--format", fmt], tmp_path), str(_db()), "damaged")


# ---------------------------------------------------------------- another program holds the file

HOLDER = """
import sqlite3, sys, time
conn = sqlite3.connect(sys.argv[1], isolation_level=None)
conn.execute("BEGIN IMMEDIATE")
conn.execute(sys.argv[2])
print("held", flush=True)
time.sleep(float(sys.argv[3]))
conn.execute("COMMIT")
"""


def _hold(db: Path, statement: str, seconds: float) -> subprocess.Popen[str]:
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(db), statement, str(seconds)], stdout=subprocess.PIPE, text=True
    )
    assert holder.stdout is not None and holder.stdout.readline() == "held\n"
    return holder


def _statements_to_the_store(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """What every store this process opens from now on sends to SQLite, in order."""
    sent: list[str] = []
    opened = Store.open

    def traced(*args: object, **kwargs: object) -> Store:
        store = opened(*args, **kwargs)  # type: ignore[arg-type]
        store.connection.set_trace_callback(sent.append)
        return store

    monkeypatch.setattr(Store, "open", traced)
    return sent


def _writes_that_waited(sent: list[str]) -> int:
    """The write transactions begun while the connection waits out another program's lock."""
    waits, waited = True, 0
    for statement in sent:
        if statement.startswith("PRAGMA busy_timeout="):
            waits = statement != "PRAGMA busy_timeout=0"
        elif statement == "BEGIN IMMEDIATE":
            waited += waits
    return waited


def test_a_step_the_store_cannot_take_while_another_program_holds_it_is_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    sid = _session_with_one_turn(tmp_path)
    db = _db()
    holder = _hold(db, "INSERT INTO prompt_history (project, ts, text) VALUES ('x', 0, 'x')", 15)
    sent = _statements_to_the_store(monkeypatch)
    try:
        with FakeProvider([Turn(text="not stored")]) as fake:
            run = run_ketch(["--continue", "-p", "second", *adhoc(fake, WIRE)], tmp_path)
    finally:
        holder.kill()
        holder.wait()
    _one_line_error(run, str(db), "busy", "try again")
    # the step's write waited the store's limit out; the turn's end tried once more without
    # waiting it out again (the user would wait twice for the same one line)
    assert _writes_that_waited(sent) == 1 and sent.count("BEGIN IMMEDIATE") == 2, sent
    with FakeProvider([Turn(text="stored")]) as fake:  # nothing saved was lost; the store works again
        again = run_ketch(["--continue", "-p", "third", *adhoc(fake, WIRE)], tmp_path)
    assert again.code == 0, again.stderr
    assert user_texts(fake.model_requests[0]) == ["first", "third"]
    assert _rows("SELECT COUNT(*) FROM messages WHERE session_id = ?", sid) == [(4,)]


def test_a_newer_ketch_migrating_meanwhile_is_refused_and_never_downgraded(tmp_path: Path) -> None:
    db = tmp_path / "ketch.db"
    with Store.open(db) as store:
        store.create_session("/p", "m", "a")
    with contextlib.closing(sqlite3.connect(db)) as conn, conn:  # an older store: this ketch migrates it
        conn.execute("DROP TABLE memory_notes")
        conn.execute("UPDATE meta SET schema_version = 1")
    # A newer ketch has migrated it to version 99 but not committed yet: this open reads
    # version 1, then waits for the write lock and must look again once it has it.
    holder = _hold(db, "UPDATE meta SET schema_version = 99", 1.0)
    try:
        with pytest.raises(StoreError) as info:
            Store.open(db)
    finally:
        holder.wait(timeout=30)
    assert "99" in str(info.value) and "newer" in str(info.value) and str(db) in str(info.value)
    with contextlib.closing(sqlite3.connect(db)) as conn:
        assert conn.execute("SELECT schema_version FROM meta").fetchone() == (99,)


# ---------------------------------------------------------------- a write-ahead log without its store

KILLED_WRITER = """
import os, signal, sys
from ketch.state.store import Store
from pydantic_ai.messages import ModelRequest, ModelResponse, TextPart, UserPromptPart
store = Store.open(sys.argv[1])
sid = store.reserve_session(sys.argv[2], "m", "a")
for n in range(5):
    store.append_step(sid, [ModelRequest(parts=[UserPromptPart(f"step {n}")]), ModelResponse(parts=[TextPart("ok")])])
os.kill(os.getpid(), signal.SIGKILL)  # no checkpoint: the steps live in ketch.db-wal
"""


def test_a_log_left_without_its_store_is_refused_and_kept(tmp_path: Path) -> None:
    db = _db()
    db.parent.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "PYTHONPATH": str(SRC), "PYDANTIC_AI_NO_BANNER": "1"}
    proc = subprocess.run([sys.executable, "-c", KILLED_WRITER, str(db), str(tmp_path.resolve())], env=env)
    assert proc.returncode == -signal.SIGKILL
    wal = db.with_name("ketch.db-wal")
    assert wal.stat().st_size > 0
    db.rename(db.with_name("moved.db"))  # "move it aside", forgetting the log
    log = wal.read_bytes()
    run = run_ketch(["sessions"], tmp_path)
    _one_line_error(run, str(wal), str(db))
    assert wal.read_bytes() == log and not db.exists()
    db.with_name("moved.db").rename(db)  # put back together, every step is there
    listing = run_ketch(["sessions"], tmp_path)
    assert listing.code == 0 and "10 msgs" in listing.stdout, listing


# ---------------------------------------------------------------- a read-only store


def _as_a_user_without_override() -> list[str]:
    """A command prefix under which file permissions apply (root bypasses them)."""
    if os.geteuid() != 0:
        return []
    setpriv = shutil.which("setpriv")
    if setpriv is None:
        pytest.skip("running as root without setpriv: permissions cannot be enforced")
    return [setpriv, "--bounding-set=-dac_override,-dac_read_search,-fowner"]


def _run_restricted(args: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*_as_a_user_without_override(), sys.executable, "-m", "ketch", *args],
        cwd=cwd, env=ketch_env(), capture_output=True, text=True, timeout=60,
    )


def test_a_read_only_store_is_refused_before_any_request_and_still_listed(tmp_path: Path) -> None:
    sid = _session_with_one_turn(tmp_path)
    db = _db()
    db.chmod(0o444)
    before = db.read_bytes()
    try:
        with FakeProvider([Turn(text="never")]) as fake:
            run = _run_restricted(["--continue", "-p", "hi", *adhoc(fake, WIRE)], tmp_path)
            assert fake.model_requests == []
        assert run.returncode == 2 and len(run.stderr.strip().splitlines()) == 1, run.stderr
        assert str(db) in run.stderr and "read-only" in run.stderr, run.stderr
        listing = _run_restricted(["sessions"], tmp_path)  # reading needs no write access
        assert listing.returncode == 0 and sid in listing.stdout, listing.stderr
        exported = _run_restricted(["export", sid], tmp_path)
        assert exported.returncode == 0 and "first answer" in exported.stdout, exported.stderr
        assert db.read_bytes() == before
    finally:
        db.chmod(0o644)


OPEN_TWICE = """
import sys
from ketch.state.store import Store, StoreError
try:
    Store.open(sys.argv[1]).close()
    print("opened to write")
except StoreError as exc:
    print(exc)
Store.open(sys.argv[1], write=False).close()
print("opened to read")
"""


def test_a_read_only_store_is_refused_at_open_to_a_writer_so_the_app_never_starts_on_it(tmp_path: Path) -> None:
    db = tmp_path / "ketch.db"
    Store.open(db).close()
    db.chmod(0o444)
    env = {**ketch_env(), "PYTHONPATH": str(SRC)}
    run = subprocess.run(
        [*_as_a_user_without_override(), sys.executable, "-c", OPEN_TWICE, str(db)],
        env=env, capture_output=True, text=True, timeout=60,
    )
    refused, read = run.stdout.splitlines()
    assert "read-only" in refused and str(db) in refused, run.stdout + run.stderr
    assert read == "opened to read"


def test_a_store_in_a_read_only_folder_is_reported_as_read_only_not_damaged(tmp_path: Path) -> None:
    _session_with_one_turn(tmp_path)
    db = _db()
    assert sorted(p.name for p in db.parent.iterdir()) == ["ketch.db"]  # SQLite must create ketch.db-shm
    db.parent.chmod(0o555)
    try:
        run = _run_restricted(["sessions"], tmp_path)
    finally:
        db.parent.chmod(0o755)
    assert run.returncode == 2 and len(run.stderr.strip().splitlines()) == 1, run.stderr
    assert str(db) in run.stderr and "read-only" in run.stderr and "damaged" not in run.stderr, run.stderr


# ---------------------------------------------------------------- where the output goes


def _ketch_process(args: list[str], cwd: Path, **kwargs: object) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "ketch", *args], cwd=cwd, env=ketch_env(), stderr=subprocess.PIPE, text=True, **kwargs
    )


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="needs /dev/full")
def test_export_to_a_full_disk_a_closed_pipe_or_no_stdout(tmp_path: Path) -> None:
    sid = _session_with_one_turn(tmp_path)
    with open("/dev/full", "w") as full:
        proc = _ketch_process(["export", sid, "--format", "json"], tmp_path, stdout=full)
        _, err = proc.communicate(timeout=60)
    assert proc.returncode == 2 and len(err.strip().splitlines()) == 1, err
    assert "could not write the export" in err and "No space left" in err and "internal error" not in err

    proc = _ketch_process(["export", sid], tmp_path, stdout=subprocess.PIPE)
    assert proc.stdout is not None
    proc.stdout.close()  # the reader went away, as with 'ketch export ID | head -0'
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 141 and err == "", err

    proc = _ketch_process(["sessions"], tmp_path, stdout=subprocess.DEVNULL, preexec_fn=lambda: os.close(1))
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 2 and "standard output is closed" in err and len(err.strip().splitlines()) == 1, err


# ---------------------------------------------------------------- text that is not UTF-8


def test_a_file_name_and_a_prompt_that_are_not_utf8_are_sent_stored_resumed_and_exported(tmp_path: Path) -> None:
    try:
        (tmp_path / os.fsdecode(b"caf\xe9.txt")).write_text("x")
    except (OSError, UnicodeEncodeError):
        pytest.skip("this file system refuses file names that are not UTF-8")
    script = [Turn(tool_calls=[ToolCall("list_dir", {"path": "."})]), Turn(text="listed"), Turn(text="again")]
    with FakeProvider(script) as fake:
        # argv bytes that are not UTF-8 reach Python as lone surrogates, as here
        first = run_ketch(["-p", "look \udcff here", *adhoc(fake, WIRE)], tmp_path)
        assert first.code == 0 and first.stdout.strip() == "listed", first.stderr
        [(_, listing)] = tool_results(fake.model_requests[1])
        assert "caf\ufffd.txt" in listing
        assert user_texts(fake.model_requests[0]) == ["look \ufffd here"]
        resumed = run_ketch(["--continue", "-p", "and now?", *adhoc(fake, WIRE)], tmp_path)
        assert resumed.code == 0, resumed.stderr
        assert user_texts(fake.model_requests[2]) == ["look \ufffd here", "and now?"]
    [(sid, count)] = _rows("SELECT session_id, COUNT(*) FROM messages GROUP BY session_id")
    assert count == 6
    md = run_ketch(["export", sid], tmp_path)
    assert md.code == 0 and "caf\ufffd.txt" in md.stdout, md.stderr
    record = json.loads(run_ketch(["export", sid, "--format", "json"], tmp_path).stdout)
    finished = [e for e in record["events"] if e["type"] == "tool_call_finished"]
    assert "caf\ufffd.txt" in finished[0]["summary"]


def test_an_event_holding_a_lone_surrogate_is_stored_and_read_back_unchanged(tmp_path: Path) -> None:
    from pydantic_ai.messages import ModelRequest, UserPromptPart

    with Store.open(tmp_path / "ketch.db") as store:
        sid = store.reserve_session("/p", "m", "a")
        event = {"type": "notice", "text": "caf\udce9.txt\x00 and \u2028 more"}
        store.append_step(sid, [ModelRequest(parts=[UserPromptPart("hi")])], [event])
        assert store.load_events(sid) == [event]
