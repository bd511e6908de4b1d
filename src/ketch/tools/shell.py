"""The ``shell`` tool: run a command with live output, a timeout, an output cap, and an
interrupt that takes down the command's whole process tree.

Each command runs as ``bash -c <command>`` in the workspace root, in a new session (so the
command and everything it spawns also share one process group), with stdin at
``/dev/null``. Output is published while the command runs as ``ToolOutputChunk`` events and
kept (head and tail) for the tool result.

Interrupting (``ProcessRegistry.interrupt_all``) kills the process tree, waits until it is
gone, and the tool then raises ``ToolFailed(INTERRUPTED_MESSAGE)``: the model learns the
command was stopped, not that it failed. A non-zero exit is an ordinary result.
Under ``ketch acp`` with a client offering terminals, the same launch runs in one of the
editor's (``editor_shell``); ``background: true`` hands the command to ``tools.background``
(which reuses the tree kill). It is one thing, the command's life from launch to result, kept
in one module.
"""

from __future__ import annotations

import asyncio
import codecs
import concurrent.futures
import os
import signal
import subprocess
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from pydantic_ai import RunContext
from pydantic_ai.exceptions import ToolFailed

from ketch.protocol.events import ToolOutputChunk
from ketch.sandbox.escalation import after_shell, shell_launch
from ketch.tools.child_env import child_environment
from ketch.tools.base import ToolDeps, ToolSpec

if TYPE_CHECKING:  # psutil is imported where a process tree is walked: a session starts without it
    import psutil

INTERRUPTED_MESSAGE = "The user interrupted this command. It did not finish, so its effects are unknown."

KILL_GRACE_S = 0.5
"""Time between SIGTERM and SIGKILL when a process tree is killed."""
KILL_CONFIRM_S = 5.0
"""How long to wait, after SIGKILL, for the tree to be confirmed gone."""
PIPE_DRAIN_S = 1.0
"""After the command exits, how long to wait for processes it left behind to close the pipes."""
STREAM_FLUSH_S = 0.1
"""A partial line waits at most this long before it is published."""
STREAM_CHUNK_CHARS = 8192
"""A partial line longer than this is published without waiting for its end."""
LIVE_OUTPUT_LIMIT = 500_000
"""Characters published live per command; the rest only reaches the (capped) result."""

Stream = Literal["stdout", "stderr"]
OutputSink = Callable[[Stream, str], None]


# --------------------------------------------------------------------------- process trees


def _process_tree(pid: int) -> list[psutil.Process]:
    """The process ``pid`` and all its descendants (empty when ``pid`` is gone)."""
    import psutil

    try:
        root = psutil.Process(pid)
        return [root, *root.children(recursive=True)]
    except psutil.NoSuchProcess:
        return []


def _signal_tree(procs: list[psutil.Process], group: int, sig: signal.Signals) -> None:
    """Send ``sig`` to every process in ``procs`` and to the process group ``group``."""
    import psutil

    for proc in procs:
        try:
            proc.send_signal(sig)
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            pass
    try:
        os.killpg(group, sig)
    except (ProcessLookupError, PermissionError):
        pass


def _is_gone(proc: psutil.Process) -> bool:
    """True when the process has exited (a zombie has exited; only its parent's reaping is left)."""
    import psutil

    try:
        return proc.status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


async def _wait_gone(procs: list[psutil.Process], timeout_s: float) -> list[psutil.Process]:
    """Poll until every process is gone or ``timeout_s`` passes; return the survivors."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout_s
    alive = [p for p in procs if not _is_gone(p)]
    while alive and loop.time() < deadline:
        await asyncio.sleep(0.02)
        alive = [p for p in alive if not _is_gone(p)]
    return alive


async def kill_process_tree(pid: int, grace_s: float = KILL_GRACE_S) -> list[int]:
    """Kill ``pid`` and all its descendants: SIGTERM, then SIGKILL after ``grace_s``.

    ``pid`` must lead its own process group (started with ``start_new_session=True``); the
    group is signalled too, so processes orphaned by a dying parent are still reached.
    Returns the pids that were part of the tree once they are confirmed gone.
    """
    procs = _process_tree(pid)
    _signal_tree(procs, pid, signal.SIGTERM)
    alive = await _wait_gone(procs, grace_s)
    if alive:
        late_children = [c for p in alive for c in _process_tree(p.pid)[1:]]
        alive = [*alive, *late_children]
        procs = [*procs, *late_children]
        _signal_tree(alive, pid, signal.SIGKILL)
        await _wait_gone(alive, KILL_CONFIRM_S)
    return sorted({p.pid for p in procs})


def _kill_tree_now(pid: int) -> None:
    """SIGKILL the tree without waiting (for cleanup paths that cannot await)."""
    _signal_tree(_process_tree(pid), pid, signal.SIGKILL)


# --------------------------------------------------------------------------- the registry


@dataclass
class _RunningCommand:
    call_id: str
    pid: int
    interrupted: bool = False
    tree_dead: asyncio.Event = field(default_factory=asyncio.Event)


class ProcessRegistry:
    """Running shell commands by tool call id, and the interrupt that stops them.

    From the event loop: ``await registry.interrupt_all()``.
    From a signal handler or another thread: ``registry.interrupt_all_threadsafe()``; it
    schedules the interrupt on the loop that runs the commands and returns a
    ``concurrent.futures.Future`` with the killed pids (or ``None`` when nothing runs).
    Never block on that future from the loop's own thread. The preferred SIGINT wiring
    is ``loop.add_signal_handler(signal.SIGINT, registry.interrupt_all_threadsafe)``; a
    plain ``signal.signal`` handler calling it works too.
    """

    def __init__(self, kill_grace_s: float = KILL_GRACE_S) -> None:
        self._running: dict[str, _RunningCommand] = {}
        self._starting: dict[str, bool] = {}  # started, pid not known yet: call id -> interrupted since
        self._loop: asyncio.AbstractEventLoop | None = None
        self._kill_grace_s = kill_grace_s

    def is_running(self) -> bool:
        """True while a command runs or starts (Ctrl-C with nothing running keeps its usual meaning)."""
        return bool(self._running or self._starting)

    def running_call_ids(self) -> list[str]:
        """Tool call ids of the commands running now."""
        return list(self._running)

    def _begin(self, call_id: str) -> None:
        """A command is about to start: an interrupt from now on is meant for it."""
        self._loop = asyncio.get_running_loop()
        self._starting[call_id] = False

    def _add(self, command: _RunningCommand) -> bool:
        """The command's process runs; whether an interrupt came while it was starting."""
        self._loop = asyncio.get_running_loop()
        self._running[command.call_id] = command
        return self._starting.pop(command.call_id, False)

    def _remove(self, call_id: str) -> None:
        self._running.pop(call_id, None)
        self._starting.pop(call_id, None)

    async def interrupt_all(self) -> list[int]:
        """Kill every running command's whole process tree, wait until the trees are gone,
        mark those calls interrupted, and return the killed pids. A command still starting is
        killed as soon as its process is known (by ``shell``)."""
        for call_id in self._starting:
            self._starting[call_id] = True
        commands = list(self._running.values())
        for command in commands:
            command.interrupted = True
        try:
            killed = await asyncio.gather(
                *(kill_process_tree(c.pid, self._kill_grace_s) for c in commands)
            )
        finally:
            for command in commands:
                command.tree_dead.set()
        return sorted(pid for pids in killed for pid in pids)

    def interrupt_all_threadsafe(self) -> concurrent.futures.Future[list[int]] | None:
        """Schedule ``interrupt_all`` on the commands' loop; safe from any thread or a signal handler."""
        loop = self._loop
        if loop is None or loop.is_closed() or not self.is_running():
            return None
        return asyncio.run_coroutine_threadsafe(self.interrupt_all(), loop)


# --------------------------------------------------------------------------- output


class CappedOutput:
    """Collects text, keeping the first and last ``cap / 2`` characters."""

    def __init__(self, cap: int) -> None:
        self._head_limit = max(cap, 0) // 2
        self._tail_limit = max(cap, 0) - self._head_limit
        self._head: list[str] = []
        self._head_len = 0
        self._tail: deque[str] = deque()
        self._tail_len = 0
        self.total = 0

    def append(self, text: str) -> None:
        self.total += len(text)
        room = self._head_limit - self._head_len
        if room > 0:
            self._head.append(text[:room])
            self._head_len += min(room, len(text))
            text = text[room:]
        if not text or not self._tail_limit:
            return
        self._tail.append(text)
        self._tail_len += len(text)
        while self._tail_len - len(self._tail[0]) >= self._tail_limit:
            self._tail_len -= len(self._tail.popleft())

    def render(self) -> str:
        head = "".join(self._head)
        tail = "".join(self._tail)
        if self._tail_len > self._tail_limit:
            tail = tail[self._tail_len - self._tail_limit :]
        omitted = self.total - len(head) - len(tail)
        if omitted <= 0:
            return head + tail
        return f"{head}\n[… {omitted} characters omitted …]\n{tail}"


class _CommandProtocol(asyncio.SubprocessProtocol):
    """Decodes the command's pipes and hands line-ish chunks to a sink."""

    def __init__(self, sink: OutputSink) -> None:
        self._sink = sink
        self._decoders = {fd: codecs.getincrementaldecoder("utf-8")("replace") for fd in (1, 2)}
        self._pending = {1: "", 2: ""}
        self._open = {1, 2}
        self._flush_timer: asyncio.TimerHandle | None = None
        self.exited = asyncio.Event()
        self.pipes_closed = asyncio.Event()

    @staticmethod
    def _stream(fd: int) -> Stream:
        return "stderr" if fd == 2 else "stdout"

    def pipe_data_received(self, fd: int, data: bytes) -> None:
        text = self._pending[fd] + self._decoders[fd].decode(data)
        cut = text.rfind("\n") + 1
        if len(text) >= STREAM_CHUNK_CHARS:
            cut = len(text)
        if cut:
            self._sink(self._stream(fd), text[:cut])
        self._pending[fd] = text[cut:]
        if self._pending[fd] and self._flush_timer is None:
            loop = asyncio.get_running_loop()
            self._flush_timer = loop.call_later(STREAM_FLUSH_S, self._flush_pending)

    def _flush_pending(self) -> None:
        self._flush_timer = None
        for fd in (1, 2):
            if self._pending[fd]:
                self._sink(self._stream(fd), self._pending[fd])
                self._pending[fd] = ""

    def pipe_connection_lost(self, fd: int, exc: Exception | None) -> None:
        rest = self._pending[fd] + self._decoders[fd].decode(b"", final=True)
        self._pending[fd] = ""
        if rest:
            self._sink(self._stream(fd), rest)
        self._open.discard(fd)
        if not self._open:
            self.pipes_closed.set()

    def process_exited(self) -> None:
        self.exited.set()


# --------------------------------------------------------------------------- the tool


def _describe_exit(code: int | None) -> str:
    if code is not None and code < 0:
        try:
            return f"killed by signal {signal.Signals(-code).name}"
        except ValueError:
            return f"killed by signal {-code}"
    return f"exit code {code}"


async def shell(ctx: RunContext[ToolDeps], command: str, timeout: float | None = None, background: bool = False) -> str:
    """Run a bash command in the workspace root and return its output.

    stdout and stderr are combined; long output keeps its beginning and end. A non-zero
    exit status is reported together with the output. stdin is empty, so interactive
    programs get no input: pass flags that avoid prompts.

    Args:
        command: The bash command line to run.
        timeout: Seconds before the command and everything it started are killed.
            Defaults to the configured shell timeout.
        background: Return at once with an id (servers, watchers); see shell_output.
    """
    if background is not False:  # tools.background checks the rest and starts it
        if (jobs := ctx.deps.extras.get("background")) is None:
            raise ToolFailed("Background commands are not available in this session.")
        return str(await jobs.start_for(ctx, command, background=background, timeout=timeout))
    deps = ctx.deps
    settings = deps.settings
    timeout_s = settings.shell_timeout_s if timeout is None else timeout
    if timeout_s <= 0:
        raise ToolFailed("timeout must be a positive number of seconds.")
    registry: ProcessRegistry = deps.processes if deps.processes is not None else ProcessRegistry()
    call_id = ctx.tool_call_id or ""
    captured = CappedOutput(settings.shell_output_cap)
    live_budget = [LIVE_OUTPUT_LIMIT]

    def sink(stream: Stream, text: str) -> None:
        captured.append(text)
        if live_budget[0] <= 0:
            return
        if len(text) >= live_budget[0]:
            text = text[: live_budget[0]] + "\n[… live output stops here; the result keeps the end …]\n"
        live_budget[0] -= len(text)
        deps.emit(ToolOutputChunk(call_id=call_id, text=text, stream=stream))

    loop = asyncio.get_running_loop()
    env = {**child_environment(settings.child_env), "PAGER": "cat", "GIT_PAGER": "cat"}
    launch = shell_launch(deps, call_id, command, ["bash", "-c", command], deps.workspace.root)
    if deps.extras.get("editor_terminal") is not None:  # ketch acp: in a terminal the editor shows
        return await _in_editor_terminal(ctx, command, timeout, launch, env, timeout_s, captured, sink)
    registry._begin(call_id)  # a Ctrl-C while the process starts is for this command, not the turn
    try:
        transport, protocol = await loop.subprocess_exec(
            lambda: _CommandProtocol(sink),
            *launch.argv,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            cwd=str(deps.workspace.root),
            env=env,
            start_new_session=True,
        )
    except OSError as exc:
        registry._remove(call_id)
        raise ToolFailed(f"Could not start bash: {exc}.") from exc
    except BaseException:
        registry._remove(call_id)
        raise

    pid = transport.get_pid()
    running = _RunningCommand(call_id=call_id, pid=pid)
    interrupted_while_starting = registry._add(running)
    timed_out = False
    try:
        if interrupted_while_starting:
            running.interrupted = True
            try:
                await kill_process_tree(pid)
            finally:
                running.tree_dead.set()
        try:
            await asyncio.wait_for(protocol.exited.wait(), timeout_s)
        except TimeoutError:
            timed_out = True
            await kill_process_tree(pid)
            await protocol.exited.wait()
        if running.interrupted:
            await running.tree_dead.wait()
        try:
            await asyncio.wait_for(protocol.pipes_closed.wait(), PIPE_DRAIN_S)
            left_running = False
        except TimeoutError:
            left_running = True
    finally:
        registry._remove(call_id)
        if not protocol.exited.is_set():
            _kill_tree_now(pid)
        transport.close()

    if running.interrupted:
        raise ToolFailed(INTERRUPTED_MESSAGE)
    output = captured.render()
    if left_running:
        output += "\n[processes started by the command still hold its output open; stopped reading]"
    if timed_out:
        raise ToolFailed(
            f"The command timed out after {timeout_s:g} s; it and every process it started were killed.\n"
            f"{output}".rstrip()
        )
    code = transport.get_returncode()
    result = (output or "(no output)") if code == 0 else f"{_describe_exit(code)}\n{output}".rstrip()
    return await after_shell(deps, call_id, command, launch, output, result, lambda: shell(ctx, command, timeout))


async def _in_editor_terminal(ctx: RunContext[ToolDeps], command: str, timeout: float | None, launch: Any, env: dict[str, str],
                              timeout_s: float, captured: CappedOutput, sink: Callable[[Stream, str], None]) -> str:
    from ketch.tools.editor_shell import run_in_editor_terminal

    deps, call_id = ctx.deps, ctx.tool_call_id or ""
    run = await run_in_editor_terminal(deps.extras["editor_terminal"], call_id, launch.argv, deps.workspace.root, env,
                                       timeout_s, lambda text: sink("stdout", text), deps.settings.shell_output_cap)
    output = captured.render()
    if run.timed_out:
        raise ToolFailed(f"The command timed out after {timeout_s:g} s and was killed.\n{output}".rstrip())
    code = run.code if run.code is not None else -getattr(signal, str(run.signal or ""), signal.SIGKILL)
    result = (output or "(no output)") if code == 0 else f"{_describe_exit(code)}\n{output}".rstrip()
    return await after_shell(deps, call_id, command, launch, output, result, lambda: shell(ctx, command, timeout))


TOOLS: list[ToolSpec] = [ToolSpec(name="shell", function=shell, kind="shell", key_arg="command")]
