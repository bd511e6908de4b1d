"""kill -9 in the middle of a turn loses nothing finished: a real ketch process (forked from the
preloaded interpreter) against the fake provider is killed while it waits on step 4; --continue then carries steps 1-3."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
from pathlib import Path

import pytest
from fakeprovider import FakeProvider, ToolCall, Turn, tool_results, user_texts
from ketch_processes import Preloaded
from kettle import adhoc, ketch_env, run_ketch

WIRE = "openai-chat"


def _step(n: int) -> Turn:
    return Turn(text=f"step {n}", tool_calls=[ToolCall("read_file", {"path": f"f{n}.txt"}, id=f"call_{n}")])


def test_sigkill_mid_turn_keeps_every_finished_step(tmp_path: Path, tmp_path_factory: pytest.TempPathFactory,
                                                    preloaded_ketch: Preloaded) -> None:
    for n in (1, 2, 3):
        (tmp_path / f"f{n}.txt").write_text(f"contents of file {n}\n")
    script = [_step(1), _step(2), _step(3), Turn(text="too late", delay=30)]
    out = tmp_path_factory.mktemp("out")  # its stdout and stderr, outside the workspace
    with FakeProvider(script) as fake:
        # a ketch process of its own forked from the preloaded interpreter (kill -9 of the binary
        # itself: tests/test_durable_processes.py)
        proc = preloaded_ketch.start(["-p", "read the three files", *adhoc(fake, WIRE)], tmp_path, ketch_env(), out)
        try:
            proc.wait_for(lambda: len(fake.model_requests) >= 4, "ketch reached step 4", timeout=60)
        finally:
            os.kill(proc.pid, signal.SIGKILL)
            code = proc.wait(timeout=10)
        assert code == -signal.SIGKILL

    db = Path(os.environ["KETCH_DATA_DIR"]) / "ketch.db"
    with sqlite3.connect(db) as conn:
        [(sid,)] = conn.execute("SELECT id FROM sessions").fetchall()
        rows = conn.execute("SELECT step, data FROM messages WHERE session_id = ? ORDER BY seq", (sid,)).fetchall()
        event_types = [json.loads(r[0])["type"] for r in conn.execute("SELECT data FROM events ORDER BY seq")]
    kinds = [json.loads(data)["kind"] for _, data in rows]
    assert kinds == ["request"] + ["response", "request"] * 3  # prompt, then three whole steps
    assert [step for step, _ in rows] == [0, 1, 1, 2, 2, 3, 3]
    assert event_types.count("tool_call_finished") == 3

    with FakeProvider([Turn(text="Carrying on.")]) as fake:
        run = run_ketch(["--continue", "-p", "go on", *adhoc(fake, WIRE)], tmp_path)
    assert run.code == 0, run.stderr
    assert run.stdout.strip() == "Carrying on."
    [request] = fake.model_requests
    results = dict(tool_results(request))
    assert list(results) == ["call_1", "call_2", "call_3"]
    assert all(f"contents of file {n}" in results[f"call_{n}"] for n in (1, 2, 3))
    assert user_texts(request) == ["read the three files", "go on"]
