"""The shell tool against real processes: streaming, caps, timeouts, and the tree interrupt."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from types import SimpleNamespace

import psutil
import pytest
from pydantic_ai.exceptions import ToolFailed

from ketch.protocol.events import ToolOutputChunk
from ketch.tools.base import ToolDeps, ToolSettings
from ketch.tools.shell import INTERRUPTED_MESSAGE, TOOLS, CappedOutput, ProcessRegistry, shell


class Recorder:
    """Collects emitted events with the time they arrived."""

    def __init__(self) -> None:
        self.events: list[tuple[float, ToolOutputChunk]] = []

    def __call__(self, event: ToolOutputChunk) -> None:
        self.events.append((time.monotonic(), event))

    @property
    def text(self) -> str:
        return "".join(e.text for _, e in self.events)


def make_ctx(root: Path, **settings: object) -> tuple[SimpleNamespace, Recorder, ProcessRegistry]:
    recorder = Recorder()
    registry = ProcessRegistry()
    deps = ToolDeps(
        workspace=SimpleNamespace(root=root),
        emit=recorder,
        processes=registry,
        settings=ToolSettings(**settings),  # type: ignore[arg-type]
    )
    return SimpleNamespace(deps=deps, tool_call_id="call-1"), recorder, registry


def gone(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


async def wait_for_tree(registry: ProcessRegistry, size: int) -> list[int]:
    """Wait until the running command's tree has ``size`` processes; return their pids."""
    for _ in range(250):
        await asyncio.sleep(0.02)
        if "call-1" in registry._running:  # (is_running() is true from before the pid is known)
            pid = registry._running["call-1"].pid
            root = psutil.Process(pid)
            pids = [pid, *(c.pid for c in root.children(recursive=True))]
            if len(pids) >= size:
                return pids
    raise AssertionError("the command's process tree never appeared")


def test_tool_spec_declares_shell_kind():
    assert [(t.name, t.kind, t.key_arg) for t in TOOLS] == [("shell", "shell", "command")]


async def test_interrupt_kills_the_whole_tree_and_raises(tmp_path: Path):
    ctx, recorder, registry = make_ctx(tmp_path)
    task = asyncio.create_task(shell(ctx, "sleep 60 & sleep 60; echo after"))
    pids = await wait_for_tree(registry, 3)
    assert len(pids) == 3 and registry.is_running()

    killed = await registry.interrupt_all()
    deadline = time.monotonic() + 30.0  # a liveness wait: the sleeps would run 60 s
    while not all(gone(p) for p in pids) and time.monotonic() < deadline:
        await asyncio.sleep(0.02)
    assert all(gone(p) for p in pids), [p for p in pids if not gone(p)]
    assert set(pids) <= set(killed)

    with pytest.raises(ToolFailed) as info:
        await asyncio.wait_for(task, 30.0)
    assert info.value.message == INTERRUPTED_MESSAGE
    assert "after" not in recorder.text
    assert not registry.is_running()


async def test_interrupt_from_another_thread(tmp_path: Path):
    ctx, _, registry = make_ctx(tmp_path)
    task = asyncio.create_task(shell(ctx, "sleep 30; echo after"))
    pids = await wait_for_tree(registry, 2)
    loop = asyncio.get_running_loop()
    future = await loop.run_in_executor(None, registry.interrupt_all_threadsafe)
    assert future is not None
    killed = await asyncio.wrap_future(future)
    assert set(pids) <= set(killed)
    assert all(gone(p) for p in pids)
    with pytest.raises(ToolFailed, match="interrupted"):
        await task


async def test_an_interrupt_while_the_command_starts_stops_the_command(tmp_path: Path):
    """Ctrl-C in the instant between the command's process starting and its pid being known is
    for the command (it used to find nothing running, and the front end cancelled the turn)."""
    ctx, recorder, registry = make_ctx(tmp_path)
    task = asyncio.create_task(shell(ctx, "touch started; sleep 30; echo after"))
    while "call-1" not in registry._starting:
        await asyncio.sleep(0)
    assert registry.is_running() and "call-1" not in registry._running  # starting: no pid yet
    assert registry.interrupt_all_threadsafe() is not None  # a signal handler finds it
    await registry.interrupt_all()
    with pytest.raises(ToolFailed) as info:
        await asyncio.wait_for(task, 5.0)
    assert info.value.message == INTERRUPTED_MESSAGE
    assert "after" not in recorder.text and not registry.is_running()


async def test_interrupt_with_nothing_running_does_nothing():
    registry = ProcessRegistry()
    assert not registry.is_running()
    assert await registry.interrupt_all() == []
    assert registry.interrupt_all_threadsafe() is None


async def test_cancelling_the_task_kills_the_tree(tmp_path: Path):
    ctx, _, registry = make_ctx(tmp_path)
    task = asyncio.create_task(shell(ctx, "sleep 60 & sleep 60"))
    pids = await wait_for_tree(registry, 3)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    deadline = time.monotonic() + 2.0
    while not all(gone(p) for p in pids) and time.monotonic() < deadline:
        await asyncio.sleep(0.02)
    assert all(gone(p) for p in pids)
    assert not registry.is_running()


async def test_output_streams_before_the_command_ends(tmp_path: Path):
    """The command waits for a gate file the test creates only once the first line and the
    partial one have streamed: were output held to the end, neither would ever arrive."""
    ctx, recorder, _ = make_ctx(tmp_path)
    task = asyncio.create_task(shell(ctx, "echo first; printf partial; while [ ! -e gate ]; do sleep 0.02; done; echo second"))
    deadline = time.monotonic() + 30  # a liveness limit: the command waits for the gate forever
    while not ({"first", "partial"} <= {word for _, e in recorder.events for word in ("first", "partial") if word in e.text}):
        assert not task.done() and time.monotonic() < deadline, "output was held back until the command ended"
        await asyncio.sleep(0.02)
    (tmp_path / "gate").touch()
    result = await asyncio.wait_for(task, 30)
    assert all(e.call_id == "call-1" for _, e in recorder.events)
    assert result == "first\npartialsecond\n"


async def test_stderr_is_streamed_as_stderr(tmp_path: Path):
    ctx, recorder, _ = make_ctx(tmp_path)
    result = await shell(ctx, "echo oops >&2")
    assert [(e.stream, e.text) for _, e in recorder.events] == [("stderr", "oops\n")]
    assert result == "oops\n"


async def test_non_zero_exit_is_a_result(tmp_path: Path):
    ctx, _, _ = make_ctx(tmp_path)
    result = await shell(ctx, "echo broken; exit 3")
    assert result == "exit code 3\nbroken"


async def test_timeout_kills_the_tree_and_reports_it(tmp_path: Path):
    ctx, recorder, registry = make_ctx(tmp_path)
    task = asyncio.create_task(shell(ctx, "echo start; sleep 30 & sleep 30; echo after", timeout=0.5))
    pids = await wait_for_tree(registry, 3)
    with pytest.raises(ToolFailed) as info:
        await asyncio.wait_for(task, 3.0)
    assert info.value.message.startswith("The command timed out after 0.5 s")
    assert "start" in info.value.message
    assert all(gone(p) for p in pids)
    assert "after" not in recorder.text


async def test_output_cap_keeps_head_and_tail(tmp_path: Path):
    ctx, _, _ = make_ctx(tmp_path, shell_output_cap=1000)
    result = await shell(ctx, "for i in $(seq 1 2000); do echo line$i; done")
    total = sum(len(f"line{i}\n") for i in range(1, 2001))
    assert result.startswith("line1\nline2\n")
    assert result.endswith("line1999\nline2000\n")
    assert f"[… {total - 1000} characters omitted …]" in result
    assert len(result) < 1100


def test_capped_output_keeps_everything_under_the_cap():
    out = CappedOutput(10)
    for piece in ["ab", "cd", "ef"]:
        out.append(piece)
    assert out.render() == "abcdef"
    out.append("0123456789")
    assert out.render() == "abcde\n[… 6 characters omitted …]\n56789"


async def test_runs_in_the_workspace_root_with_empty_stdin(tmp_path: Path):
    (tmp_path / "marker.txt").write_text("here")
    ctx, _, _ = make_ctx(tmp_path)
    result = await shell(ctx, "pwd; cat marker.txt; echo; cat; echo stdin-done")
    assert result == f"{tmp_path.resolve()}\nhere\nstdin-done\n"


async def test_background_process_holding_pipes_does_not_hang(tmp_path: Path):
    ctx, _, _ = make_ctx(tmp_path)
    result = await shell(ctx, "sleep 600 & echo $! > bg.pid; echo done")
    assert result.startswith("done\n")
    assert "stopped reading" in result
    bg = int((tmp_path / "bg.pid").read_text())
    assert not gone(bg)  # the shell returned while the holder of its pipes still runs
    psutil.Process(bg).kill()
