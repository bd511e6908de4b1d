"""Interrupts that must reach every process a command started: a grandchild whose parent
already exited (``(sleep 61 &); sleep 62``), through the tool and through a real headless
run's SIGINT; and the UI's Ctrl-C stopping a real command of a real session (tmux)."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace

import psutil
import pytest
from fakeprovider import FakeProvider, ToolCall, Turn, tool_results
from isolation import own_processes_running
from ketch_processes import Preloaded
from kettle import adhoc, ketch_env
from tmux_pane import tmux_pane
from pydantic_ai.exceptions import ToolFailed

from ketch.tools.base import ToolDeps, ToolSettings
from ketch.tools.shell import INTERRUPTED_MESSAGE, ProcessRegistry, shell
from ketch.tools.workspace import Workspace

pytestmark = pytest.mark.usefixtures("subreaper")


def orphaning(tag: str) -> str:
    """The issue's ``(sleep 61 &); sleep 62``, with a fraction that tells this test's sleeps apart."""
    return f"(sleep 61.{tag} &); sleep 62.{tag}"


def sleepers(seconds: str) -> list[psutil.Process]:
    """Every ``sleep <seconds>`` of this test's own tree (under the ``subreaper`` fixture the
    worker adopts the orphan, so it is found without a scan of the whole machine)."""
    return own_processes_running(["sleep", seconds])


def wait_for(seconds: str, timeout: float = 60.0) -> psutil.Process:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        procs = sleepers(seconds)
        if procs:
            return procs[0]
        time.sleep(0.02)
    raise AssertionError(f"sleep {seconds} never started")


def alive(proc: psutil.Process) -> bool:
    try:
        return proc.status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def gone_within(proc: psutil.Process, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while alive(proc) and time.monotonic() < deadline:
        time.sleep(0.02)
    return not alive(proc)


def reap(*procs: psutil.Process) -> None:
    for proc in procs:
        if alive(proc):
            proc.kill()


def test_the_orphan_really_is_no_descendant_of_the_command() -> None:
    """The premise: the grandchild's parent exits, so a walk of the tree cannot find it."""
    bash = subprocess.Popen(["bash", "-c", orphaning("03")], start_new_session=True)
    try:
        orphan = wait_for("61.03")
        wait_for("62.03")
        descendants = {p.pid for p in psutil.Process(bash.pid).children(recursive=True)}
        assert orphan.pid not in descendants and orphan.ppid() != bash.pid
        assert os.getpgid(orphan.pid) == bash.pid  # only the process group still holds it
    finally:
        os.killpg(bash.pid, signal.SIGKILL)
        bash.wait()
        reap(*sleepers("61.03"), *sleepers("62.03"))


async def test_interrupt_kills_a_grandchild_whose_parent_already_exited(tmp_path: Path) -> None:
    registry = ProcessRegistry()
    deps = ToolDeps(workspace=Workspace(tmp_path), processes=registry, settings=ToolSettings(shell_timeout_s=60))
    ctx = SimpleNamespace(deps=deps, tool_call_id="call-orphan")
    task = asyncio.create_task(shell(ctx, orphaning("01")))
    orphan = await asyncio.to_thread(wait_for, "61.01")
    parent_sleep = await asyncio.to_thread(wait_for, "62.01")
    try:
        killed = await registry.interrupt_all()
        with pytest.raises(ToolFailed, match="interrupted"):
            await task
        assert await asyncio.to_thread(gone_within, orphan, 2.0), f"the orphan {orphan.pid} survived the interrupt"
        assert not alive(parent_sleep) and parent_sleep.pid in killed
    finally:
        reap(orphan, parent_sleep)


def test_sigint_of_a_headless_run_kills_the_orphaned_grandchild(
    tmp_path: Path, tmp_path_factory: pytest.TempPathFactory, preloaded_ketch: Preloaded
) -> None:
    """A headless ketch forked from the preloaded interpreter (SIGINT of ``python -m ketch``
    itself: tests/test_interrupt_e2e.py, tests/test_headless.py)."""
    script = [Turn(tool_calls=[ToolCall("shell", {"command": orphaning("02")})]), Turn(text="Stopped.")]
    out_dir = tmp_path_factory.mktemp("out")
    with FakeProvider(script) as fake:
        proc = preloaded_ketch.start(["-p", "run it", "--yolo", *adhoc(fake, "openai-chat")], tmp_path, ketch_env(), out_dir)
        orphan = parent_sleep = None
        try:
            orphan, parent_sleep = wait_for("61.02"), wait_for("62.02")
            os.kill(proc.pid, signal.SIGINT)
            orphan_gone = gone_within(orphan, 10.0)
            code = proc.wait(timeout=30)
        finally:
            if proc.code is None:
                os.kill(proc.pid, signal.SIGKILL)
                proc.wait(timeout=30)
            reap(*(p for p in (orphan, parent_sleep) if p is not None))
    assert orphan_gone, "the orphaned grandchild outlived the interrupt"
    assert code == 0, proc.stderr()
    assert (out_dir / "stdout").read_text().strip() == "Stopped."
    [(_, result)] = tool_results(fake.model_requests[1])
    assert INTERRUPTED_MESSAGE in result


# ------------------------------------------------------------------ the UI's Ctrl-C, end to end


@pytest.fixture
def pane(tmp_path: Path) -> Iterator[SimpleNamespace]:
    with tmux_pane(tmp_path, "ctrlc", columns=120, rows=40) as opened:
        yield opened


def test_ctrl_c_in_the_ui_stops_a_real_command_and_the_session_goes_on(tmp_path: Path, pane: SimpleNamespace) -> None:
    (tmp_path / ".git").mkdir()
    script = [
        Turn(text="Running it.", tool_calls=[ToolCall("shell", {"command": "sleep 63.04; echo finished > done.txt"})]),
        Turn(text="It was stopped before it finished."),
    ]
    with FakeProvider(script) as fake:
        pane.keys(f"ketch --yolo --base-url {fake.base_url} --wire openai-chat --model fake-model", "Enter")
        pane.wait("adhoc:fake-model")
        pane.keys("run the long command", "Enter")
        command = wait_for("63.04", timeout=30)
        try:
            pane.keys("C-c")
            stopped = gone_within(command, 10.0)
            screen = pane.wait("It was stopped before it finished.")
        finally:
            reap(command)
        pane.keys("/quit", "Enter")
    assert stopped, "Ctrl-C did not stop the running command"
    assert not (tmp_path / "done.txt").exists()
    [(_, result)] = tool_results(fake.model_requests[1])
    assert INTERRUPTED_MESSAGE in result
    assert "Running it." in screen
