"""One writer per session: the lock is taken, refused while held by a live process, freed when
its holder dies (even by kill -9) and broken when its record names a process that is gone."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from ketch.state.session_lock import SessionBusy, SessionLocks, acquire, lock_path

HOLD = """
import sys, time
from pathlib import Path
from ketch.state.session_lock import acquire
lock = acquire(Path(sys.argv[1]), "s1")
print("held", flush=True)
time.sleep(60)
"""


def _holder(data: Path) -> subprocess.Popen[str]:
    proc = subprocess.Popen([sys.executable, "-c", HOLD, str(data)], stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None and proc.stdout.readline().strip() == "held"
    return proc


def test_a_live_holder_refuses_a_second_writer_and_its_death_frees_the_lock(tmp_path: Path) -> None:
    proc = _holder(tmp_path)
    try:
        with pytest.raises(SessionBusy) as refused:
            acquire(tmp_path, "s1")
        assert f"pid {proc.pid}" in str(refused.value) and "--fork" in str(refused.value)
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)
        lock = acquire(tmp_path, "s1")  # the kernel dropped the dead holder's lock
        record = json.loads(lock_path(tmp_path, "s1").read_text())
        assert record["pid"] == os.getpid()
        lock.release()
        assert not lock_path(tmp_path, "s1").exists()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_a_lock_whose_record_names_a_dead_process_is_broken(tmp_path: Path) -> None:
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    dead_pid = int(dead.stdout)
    proc = _holder(tmp_path)  # holds the flock, as a descendant that kept the descriptor would
    try:
        path = lock_path(tmp_path, "s1")
        record = json.loads(path.read_text())
        path.write_text(json.dumps({**record, "pid": dead_pid}))
        lock = acquire(tmp_path, "s1")
        assert json.loads(path.read_text())["pid"] == os.getpid()
        lock.release()
    finally:
        proc.kill()
        proc.wait()


def test_claim_moves_the_lock_and_one_process_cannot_open_a_session_twice(tmp_path: Path) -> None:
    locks = SessionLocks(tmp_path)
    locks.claim("a")
    locks.claim("a")  # already held: nothing changes
    with pytest.raises(SessionBusy):
        SessionLocks(tmp_path).claim("a")
    locks.claim("b")
    assert not lock_path(tmp_path, "a").exists() and lock_path(tmp_path, "b").exists()
    SessionLocks(tmp_path).claim("a")  # free again
    locks.release()
    assert not lock_path(tmp_path, "b").exists()
    assert not (tmp_path / "locks").exists()  # no empty folder is left in the data dir
