"""The real ``ketch`` binary stopped from outside: SIGINT at several points of a turn, ``kill -9``
at every step boundary (a command running included), and two processes on one session.

After each stop two more prompts follow with ``--continue`` (in this process: the binary is
what is being stopped, not what goes on) and the store holds every prompt in order; every
request the provider received passes its wire's strict history rules.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pydantic_ai.models.anthropic  # noqa: F401  (paid at collection)
import pydantic_ai.models.openai  # noqa: F401
import pytest
from durable_session import LONG_ANSWER, stored_messages, stored_prompts, stored_text, workdir
from fakeprovider import FakeProvider, ToolCall, Turn, tool_results
from kettle import adhoc, ketch_env, run_ketch
from wire_rules import assert_valid

from ketch.core.turn_record import CANCELLED_MARKER, CUT_OFF_BY_EXIT
from ketch.state.session_lock import lock_path


def _start(fake: FakeProvider, wire: str, cwd: Path, *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "ketch", *args, "--yolo", *adhoc(fake, wire)],
        cwd=cwd, env=ketch_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )


def _wait(condition, what: str, proc: subprocess.Popen[str], timeout: float = 30) -> None:  # noqa: ANN001
    deadline = time.monotonic() + timeout
    while not condition():
        assert proc.poll() is None, (what, proc.communicate())
        assert time.monotonic() < deadline, f"never: {what}"
        time.sleep(0.02)


def _go_on(fake: FakeProvider, wire: str, cwd: Path, prompts: list[str]) -> None:
    for n, prompt in enumerate(prompts):
        fake.add(Turn(text=f"answer {n}"))
        run = run_ketch(["--continue", "-p", prompt, "--yolo", *adhoc(fake, wire)], cwd)
        assert run.code == 0, run.stderr
        assert run.stdout.strip() == f"answer {n}"


# ---------------------------------------------------------------- SIGINT, headless


def _sigint_script() -> list[Turn]:
    return [
        Turn(text="Reading.", tool_calls=[ToolCall("read_file", {"path": "a.txt"}, id="s_1")]),
        Turn(text="".join(LONG_ANSWER), text_pieces=LONG_ANSWER, chunk_delay=0.15),
    ]


@pytest.mark.parametrize("at", ["turn_started", "tool_call_finished", "text_delta_of_the_answer"])
def test_sigint_headless_keeps_the_prompt_the_partial_answer_and_a_valid_history(tmp_path: Path, at: str) -> None:
    cwd = workdir(tmp_path)
    wire = "anthropic-messages"
    with FakeProvider(_sigint_script()) as fake:
        proc = _start(fake, wire, cwd, "-p", "stopped by SIGINT", "--output-format", "stream-json")
        try:
            seen: list[dict] = []
            assert proc.stdout is not None
            for line in proc.stdout:
                seen.append(json.loads(line))
                kind = seen[-1]["type"]
                answering = kind == "text_delta" and any(e["type"] == "tool_call_finished" for e in seen)
                if kind == at or (at == "text_delta_of_the_answer" and answering):
                    proc.send_signal(signal.SIGINT)
                    break
            rest = [json.loads(line) for line in proc.stdout]
            proc.wait(timeout=30)
        finally:
            if proc.poll() is None:
                proc.kill()
        assert proc.returncode == 130, proc.stderr.read() if proc.stderr else ""
        assert rest[-1]["type"] == "turn_finished" and rest[-1]["reason"] == "cancelled"
        shown = "".join(e["text"] for e in seen if e["type"] == "text_delta")
        fake.script.clear()
        _go_on(fake, wire, cwd, ["next one", "next two"])
    messages = stored_messages()
    assert stored_prompts(messages) == ["stopped by SIGINT", "next one", "next two"]
    text = stored_text(messages)
    assert CANCELLED_MARKER in text
    if at == "text_delta_of_the_answer":
        assert shown.removeprefix("Reading.").strip() in text and "piece0" in shown
    assert_valid(fake.model_requests)


# ---------------------------------------------------------------- kill -9


def _kill_script(command: str) -> list[Turn]:
    return [
        Turn(text="Reading.", tool_calls=[ToolCall("read_file", {"path": "a.txt"}, id="k_1")], delay=0.3),
        Turn(tool_calls=[ToolCall("shell", {"command": command}, id="k_2")]),
        Turn(text="never seen", delay=30),
    ]


def _sleepers(pid: int) -> list[psutil.Process]:
    try:
        return [p for p in psutil.Process(pid).children(recursive=True) if p.name() == "sleep"]
    except psutil.Error:
        return []


@pytest.mark.parametrize(
    ("wire", "at"),
    [
        ("openai-chat", "first request"),
        ("openai-chat", "second request"),
        ("openai-chat", "command running"),
        ("openai-responses", "command running"),
        ("anthropic-messages", "command running"),
        ("openai-chat", "third request"),
    ],
)
def test_kill_9_at_a_step_boundary_loses_nothing_and_a_cut_command_is_told(tmp_path: Path, wire: str, at: str) -> None:
    cwd = workdir(tmp_path)
    command = "sleep 30" if at == "command running" else "echo ran"
    with FakeProvider(_kill_script(command)) as fake:
        proc = _start(fake, wire, cwd, "-p", "killed mid-turn")
        tree: list[psutil.Process] = []
        try:
            if at == "command running":
                _wait(lambda: bool(_sleepers(proc.pid)), "the command runs", proc)
                tree = psutil.Process(proc.pid).children(recursive=True)
            else:
                wanted = {"first request": 1, "second request": 2, "third request": 3}[at]
                _wait(lambda: len(fake.model_requests) >= wanted, at, proc)
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait(timeout=10)
        finally:
            if proc.poll() is None:
                proc.kill()
            for child in tree:
                if child.is_running():
                    child.kill()
        assert proc.returncode == -signal.SIGKILL
        [row] = [r for r in _sessions()]
        assert lock_path(Path(os.environ["KETCH_DATA_DIR"]), row).exists()  # the dead writer's lock is left
        fake.script.clear()
        before = len(fake.model_requests)
        _go_on(fake, wire, cwd, ["next one", "next two"])
        resumed = fake.model_requests[before]
    messages = stored_messages()
    assert stored_prompts(messages) == ["killed mid-turn", "next one", "next two"]
    results = dict(tool_results(resumed))
    if at != "first request":
        assert "alpha" in results["k_1"]
    if at == "command running":
        assert CUT_OFF_BY_EXIT in results["k_2"]
    if at == "third request":
        assert "ran" in results["k_2"] and CUT_OFF_BY_EXIT not in results["k_2"]
    assert_valid(fake.model_requests)
    assert not fake.rejections, fake.rejections


def _sessions() -> list[str]:
    from ketch.state.store import Store

    with Store.open() as store:
        return [r.id for r in store.list_sessions()]


# ---------------------------------------------------------------- one writer per session


def test_two_concurrent_continues_one_proceeds_the_other_exits_2_offering_fork(tmp_path: Path) -> None:
    cwd = workdir(tmp_path)
    wire = "openai-chat"
    with FakeProvider([Turn(text="first answer")]) as fake:
        assert run_ketch(["-p", "start", *adhoc(fake, wire)], cwd).code == 0
        fake.add(Turn(text="slow answer", delay=4))
        first = _start(fake, wire, cwd, "--continue", "-p", "the first writer")
        try:
            _wait(lambda: len(fake.model_requests) >= 2, "the first writer's request", first)
            second = subprocess.run(
                [sys.executable, "-m", "ketch", "--continue", "-p", "the second writer", *adhoc(fake, wire)],
                cwd=cwd, env=ketch_env(), capture_output=True, text=True, timeout=60,
            )
            assert first.poll() is None, "the first writer should still be running"
            out, err = first.communicate(timeout=60)
        finally:
            if first.poll() is None:
                first.kill()
        assert second.returncode == 2, second.stderr
        lines = [line for line in second.stderr.splitlines() if line.strip()]
        assert len(lines) == 1 and "Traceback" not in second.stderr, second.stderr
        assert "open for writing" in lines[0] and "--fork" in lines[0] and str(first.pid) in lines[0]
        assert first.returncode == 0, err
        assert out.strip() == "slow answer"
        assert len(fake.model_requests) == 2  # the second one sent nothing
        fake.add(Turn(text="forked answer"))
        forked = run_ketch(["--continue", "--fork", "-p", "in the copy", *adhoc(fake, wire)], cwd)
        assert forked.code == 0, forked.stderr
    prompts = {sid: stored_prompts(stored_messages(sid)) for sid in _sessions()}
    assert sorted(prompts.values()) == [["start", "the first writer"], ["start", "the first writer", "in the copy"]]
