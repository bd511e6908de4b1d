"""The real ``ketch`` binary stopped from outside: ``kill -9`` at every boundary of a turn on
every wire (a command running included), and two processes on one session. (SIGINT at every
boundary: ``test_cancel_where_users_cancel``.)

The turn is ``cancel_matrix``'s: at each boundary it waits for the test (a held request or
stream, a command waiting for its gate file), so the kill lands exactly there. After each
kill two more prompts follow with ``--continue`` (in this process: the binary is what is being
stopped, not what goes on) and the next boundary's process continues the same session. After
every round: every prompt is stored in order; each call that had finished has its real result
and the one that ran has the note that ketch stopped while it ran; the dead writer's lock is
left (and taken over). At the end every request passes its wire's strict history rules.

Each boundary is its own process: on openai-chat a command running is killed in ``python -m
ketch`` itself, the other processes are forked from an interpreter that has already imported
ketch and the SDKs (``ketch_processes``).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from cancel_matrix import BOUNDARIES, Round, check_round, headless_shows, request_with_prompt
from durable_session import WIRES, stored_messages, stored_prompts, workdir
from fakeprovider import FakeProvider, Hold, Turn, user_texts
from kettle import adhoc, ketch_env, run_ketch
from ketch_processes import Preloaded, start_exec
from wire_rules import assert_valid

from ketch.core.turn_record import CUT_OFF_BY_EXIT
from ketch.state.session_lock import lock_path


def _wait(condition, what: str, proc: subprocess.Popen[str], timeout: float = 30) -> None:  # noqa: ANN001
    deadline = time.monotonic() + timeout
    while not condition():
        assert proc.poll() is None, (what, proc.communicate())
        assert time.monotonic() < deadline, f"never: {what}"
        time.sleep(0.02)


# ---------------------------------------------------------------- kill -9

_KILLED_AT = [b for b in BOUNDARIES if b != "a prompt hook running"]
"""Every step boundary (before the first request nothing of the turn is stored yet)."""
_REAL_EXEC = {"openai-chat": "a command running"}
"""The boundary that runs ``python -m ketch`` itself (the others: a preloaded fork; the SIGINT
matrix runs the binary itself on every wire)."""


@pytest.mark.parametrize("wire", WIRES)
def test_kill_9_at_every_boundary_loses_nothing_and_a_cut_command_is_told(
    tmp_path: Path, wire: str, preloaded_ketch: Preloaded
) -> None:
    cwd = workdir(tmp_path)
    prompts: list[str] = []
    with FakeProvider() as fake:
        for n, boundary in enumerate(_KILLED_AT):
            r = Round(f"k{n}", boundary, cwd)
            fake.add(*r.turns())
            prompt = f"killed at {r.tag}"
            argv = [*(["--continue"] if n else []), "-p", prompt, "--output-format", "stream-json", "--yolo",
                    *adhoc(fake, wire)]
            out = tmp_path / f"run{n}"
            out.mkdir()
            start = start_exec if _REAL_EXEC.get(wire) == boundary else preloaded_ketch.start
            proc = start(argv, cwd, ketch_env(), out)
            try:
                proc.wait_for(lambda: headless_shows(r, proc.events()), boundary)
                os.kill(proc.pid, signal.SIGKILL)  # ketch alone: the command it runs leads its own group
                code = proc.wait()
            finally:
                r.release_all()  # the orphaned command sees its gate and ends
                if proc.code is None:
                    proc.wait(5)
            assert code == -signal.SIGKILL, (boundary, code, proc.stderr())
            [session_id] = _sessions()
            assert lock_path(Path(os.environ["KETCH_DATA_DIR"]), session_id).exists()  # the dead writer's lock
            fake.script.clear()
            for which in ("one", "two"):
                fake.add(Turn(text=f"answer {n} {which}"))
                done = run_ketch(["--continue", "-p", f"next {n} {which}", "--yolo", *adhoc(fake, wire)], cwd)
                assert done.code == 0 and done.stdout.strip() == f"answer {n} {which}", done.stderr
            prompts += [prompt, f"next {n} one", f"next {n} two"]
            check_round(r, prompt, cut_note=CUT_OFF_BY_EXIT, prompts=prompts, cancelled=False,
                        followed_by=request_with_prompt(fake, f"next {n} one"))
    sent = user_texts(fake.model_requests[-1])
    assert "".join(sent) == "".join(prompts) and sent[-1] == prompts[-1]  # (Anthropic merges an unanswered prompt)
    assert stored_prompts(stored_messages()) == prompts
    assert_valid(fake.model_requests)
    assert not fake.rejections, fake.rejections


def _sessions() -> list[str]:
    from ketch.state.store import Store

    with Store.open() as store:
        return [r.id for r in store.list_sessions()]


# ---------------------------------------------------------------- one writer per session


def test_two_concurrent_continues_one_proceeds_the_other_exits_2_offering_fork(
    tmp_path: Path, preloaded_ketch: Preloaded
) -> None:
    cwd = workdir(tmp_path)
    wire = "openai-chat"
    with FakeProvider([Turn(text="first answer")]) as fake:
        assert run_ketch(["-p", "start", *adhoc(fake, wire)], cwd).code == 0
        held = Hold("the first writer's answer")
        fake.add(Turn(text="slow answer", hold=held))
        first = subprocess.Popen(
            [sys.executable, "-m", "ketch", "--continue", "-p", "the first writer", "--yolo", *adhoc(fake, wire)],
            cwd=cwd, env=ketch_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )
        try:
            _wait(held.reached.is_set, "the first writer's request", first)
            second = preloaded_ketch.start(["--continue", "-p", "the second writer", *adhoc(fake, wire)],
                                           cwd, ketch_env(), tmp_path)
            second.wait(60)
            assert first.poll() is None, "the first writer should still be running"
            held.release()
            out, err = first.communicate(timeout=60)
        finally:
            if first.poll() is None:
                first.kill()
        assert second.code == 2, second.stderr()
        lines = [line for line in second.stderr().splitlines() if line.strip()]
        assert len(lines) == 1 and "Traceback" not in second.stderr(), second.stderr()
        assert "open for writing" in lines[0] and "--fork" in lines[0] and str(first.pid) in lines[0]
        assert first.returncode == 0, err
        assert out.strip() == "slow answer"
        assert len(fake.model_requests) == 2  # the second one sent nothing
        fake.add(Turn(text="forked answer"))
        forked = run_ketch(["--continue", "--fork", "-p", "in the copy", *adhoc(fake, wire)], cwd)
        assert forked.code == 0, forked.stderr
    prompts = {sid: stored_prompts(stored_messages(sid)) for sid in _sessions()}
    assert sorted(prompts.values()) == [["start", "the first writer"], ["start", "the first writer", "in the copy"]]
