"""Interrupting a running command through the real loop: the whole process tree dies
within 2 s, the model is told the command was interrupted, and the turn goes on."""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
from fakeprovider import FakeProvider, ToolCall, Turn, tool_results
from kettle import adhoc, ketch_env

from ketch.protocol import events as ev
from ketch.frontends.assemble import build_session
COMMAND = "bash -c 'sleep 60 & sleep 60; echo after'"
FINAL = "The command was stopped; nothing more to do."
INTERRUPTED_MESSAGE = "The user interrupted this command. It did not finish, so its effects are unknown."


def _script() -> list[Turn]:
    return [Turn(tool_calls=[ToolCall("shell", {"command": COMMAND})]), Turn(text=FINAL)]


def _tree(pid: int) -> list[psutil.Process]:
    try:
        return psutil.Process(pid).children(recursive=True)
    except psutil.NoSuchProcess:
        return []


def _wait_for_sleepers(pid: int, timeout: float = 90.0) -> list[psutil.Process]:
    """The descendants of ``pid`` once both ``sleep 60`` of the command are running."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        procs = _tree(pid)
        sleepers = [p for p in procs if _name(p) == "sleep"]
        if len(sleepers) == 2:
            return procs
        time.sleep(0.02)
    raise AssertionError(f"the command's sleep processes never appeared under pid {pid}")


def _name(proc: psutil.Process) -> str:
    try:
        return proc.name()
    except psutil.Error:
        return ""


def _alive(proc: psutil.Process) -> bool:
    try:
        return proc.status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def _survivors_after(procs: list[psutil.Process], seconds: float) -> list[psutil.Process]:
    deadline = time.monotonic() + seconds
    alive = [p for p in procs if _alive(p)]
    while alive and time.monotonic() < deadline:
        time.sleep(0.02)
        alive = [p for p in alive if _alive(p)]
    return alive


def _kill_all(procs: list[psutil.Process]) -> None:
    for proc in procs:
        if _alive(proc):
            try:
                proc.kill()
            except psutil.Error:
                pass


def _assert_model_heard_the_interrupt(fake: FakeProvider) -> None:
    assert len(fake.model_requests) == 2, "the turn did not go on with one more request"
    [(_, result)] = tool_results(fake.model_requests[1])
    assert INTERRUPTED_MESSAGE in result
    assert "after" not in result.replace(INTERRUPTED_MESSAGE, "")
    assert not fake.exhausted


def test_sigint_kills_the_command_tree_and_the_turn_goes_on(tmp_path: Path) -> None:
    with FakeProvider(_script()) as fake:
        proc = subprocess.Popen(
            [sys.executable, "-m", "ketch", "-p", "run the command", "--yolo", *adhoc(fake, "openai-chat")],
            cwd=tmp_path,
            env=ketch_env(),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        tree: list[psutil.Process] = []
        try:
            tree = _wait_for_sleepers(proc.pid)
            proc.send_signal(signal.SIGINT)
            survivors = _survivors_after(tree, 2.0)
            out, err = proc.communicate(timeout=30)
        finally:
            if proc.poll() is None:
                proc.kill()
            _kill_all(tree)  # never leave a sleeper behind, even when the test fails
    assert survivors == [], f"still running 2 s after SIGINT: {[(p.pid, _name(p)) for p in survivors]}"
    assert proc.returncode == 0, err
    assert out.strip() == FINAL
    _assert_model_heard_the_interrupt(fake)


async def test_interrupt_command_in_process_kills_the_tree_and_the_turn_goes_on(tmp_path: Path) -> None:
    args = argparse.Namespace(cwd=str(tmp_path), model="fake-model", wire="openai-chat", yolo=True)
    seen: list[ev.AgentEvent] = []
    survivors: list[psutil.Process] = []
    tree: list[psutil.Process] = []
    with FakeProvider(_script()) as fake:
        args.base_url = fake.base_url
        session = await build_session(args, interactive=False)
        # processes this test process already had (a session-wide helper interpreter, say) are
        # not the command's
        before = {p.pid for p in _tree(os.getpid())}
        try:
            async for event in session.run_turn("run the command"):
                seen.append(event)
                if isinstance(event, ev.ToolCallStarted):
                    tree = await asyncio.to_thread(_wait_for_sleepers, os.getpid())
                    tree = [p for p in tree if p.pid != os.getpid() and p.pid not in before]
                    assert session.interrupt_command() is True
                    survivors = await asyncio.to_thread(_survivors_after, tree, 2.0)
        finally:
            await session.aclose()
            _kill_all(tree)
    assert survivors == []
    [finished] = [e for e in seen if isinstance(e, ev.ToolCallFinished)]
    assert finished.is_error and INTERRUPTED_MESSAGE in finished.summary
    assert seen[-1] == ev.TurnFinished(reason="done", text=FINAL, session_id=seen[-1].session_id, turn_id=seen[-1].turn_id)
    assert session.interrupt_command() is False, "nothing should be left to interrupt"
    _assert_model_heard_the_interrupt(fake)
