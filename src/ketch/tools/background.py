"""Background shell commands: started by ``shell`` with ``background: true``, read with
``shell_output``, stopped with ``shell_kill``; one ``BackgroundJobs`` per session.

A background command is launched like a foreground one (the same sandbox wrap, the same
environment without keys, the same gate before it) but through ``reaper_exec.py``, a small
launcher that is a child subreaper and gets SIGTERM when ketch dies: whatever the command
starts (a daemon that double-forks and calls ``setsid`` included) is stopped when the command
is killed, when it exits, when the session closes, and when ketch is killed with ``kill -9``.

What a command prints waits in a bounded buffer until it is read (``UnreadOutput``): the
newest bytes are kept, and a read says how many older ones were dropped, so a command that
prints without end costs a fixed amount of memory. A turn's end leaves the commands running;
``close`` (a session closer) stops them all.
"""

from __future__ import annotations

import asyncio
import codecs
import os
import secrets
import subprocess
import sys
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from pydantic_ai import RunContext
from pydantic_ai.exceptions import ToolFailed

from ketch.tools.base import ToolDeps, ToolSpec

Stream = Literal["stdout", "stderr"]
REAPER = Path(__file__).with_name("reaper_exec.py")
PIPE_DRAIN_S = 1.0
"""After the launcher exits, how long to wait for its pipes to close."""
STDERR_MARK = "[stderr] "
SHOWN_ENDED = 10
"""Ended commands the model's reminder lists (the newest)."""
COMMAND_CHARS = 120
"""Characters of a command shown in a listing or a reminder."""


def short_command(command: str, limit: int = COMMAND_CHARS) -> str:
    """``command`` on one line, cut to ``limit`` characters."""
    one = " ".join(command.split())
    return one if len(one) <= limit else one[: limit - 1] + "…"


class UnreadOutput:
    """What a command printed since the last read, at most ``limit`` bytes (the newest)."""

    def __init__(self, limit: int) -> None:
        self.limit = max(limit, 1)
        self._chunks: deque[tuple[Stream, bytes]] = deque()
        self._size = 0
        self.dropped = 0
        """Bytes dropped since the last read (the buffer was full)."""
        self.total = 0
        """Bytes the command printed in all."""
        self._decoders = {s: codecs.getincrementaldecoder("utf-8")("replace") for s in ("stdout", "stderr")}
        self._stderr_line_start = True

    def add(self, stream: Stream, data: bytes) -> None:
        if not data:
            return
        self.total += len(data)
        if len(data) > self.limit:
            self.dropped += len(data) - self.limit
            data = data[-self.limit :]
        self._chunks.append((stream, data))
        self._size += len(data)
        while self._size > self.limit:
            old_stream, old = self._chunks.popleft()
            over = self._size - self.limit
            if len(old) > over:
                self._chunks.appendleft((old_stream, old[over:]))
                self._size -= over
                self.dropped += over
            else:
                self._size -= len(old)
                self.dropped += len(old)

    def take(self) -> tuple[str, int]:
        """The unread text (stderr lines marked) and the bytes dropped before it; both reset."""
        pieces: list[str] = []
        for stream, data in self._chunks:
            text = self._decoders[stream].decode(data)
            pieces.append(self._mark(text) if stream == "stderr" else text)
        dropped, self.dropped = self.dropped, 0
        self._chunks.clear()
        self._size = 0
        return "".join(pieces), dropped

    def _mark(self, text: str) -> str:
        if not text:
            return text
        lines = text.split("\n")
        out = []
        for index, line in enumerate(lines):
            last = index == len(lines) - 1
            if last and not line:
                break
            starts = self._stderr_line_start if index == 0 else True
            out.append((STDERR_MARK if starts else "") + line + ("" if last else "\n"))
        self._stderr_line_start = text.endswith("\n")
        return "".join(out)


@dataclass
class BackgroundJob:
    job_id: str
    command: str
    call_id: str
    pid: int
    output: UnreadOutput
    launch: Any = None
    started_at: float = field(default_factory=time.monotonic)
    ended_at: float | None = None
    exit_code: int | None = None
    stopped_by: str = ""
    """Who stopped it ("shell_kill", "/bashes", "the session's end"); empty when it ended by itself."""
    done: asyncio.Event = field(default_factory=asyncio.Event)

    @property
    def running(self) -> bool:
        return not self.done.is_set()

    def how(self) -> str:
        """How it ended, in words ("" while it runs)."""
        if self.running:
            return ""
        if self.stopped_by:
            return f"stopped by {self.stopped_by}"
        from ketch.tools.shell import _describe_exit

        return _describe_exit(self.exit_code)

    def state(self) -> str:
        seconds = (self.ended_at or time.monotonic()) - self.started_at
        if self.running:
            return f"running for {seconds:.0f} s"
        return f"ended after {seconds:.0f} s: {self.how()}"


class _JobProtocol(asyncio.SubprocessProtocol):
    def __init__(self, output: UnreadOutput) -> None:
        self._output = output
        self._open = {1, 2}
        self.exited = asyncio.Event()
        self.pipes_closed = asyncio.Event()

    def pipe_data_received(self, fd: int, data: bytes) -> None:
        self._output.add("stderr" if fd == 2 else "stdout", data)

    def pipe_connection_lost(self, fd: int, exc: Exception | None) -> None:
        self._open.discard(fd)
        if not self._open:
            self.pipes_closed.set()

    def process_exited(self) -> None:
        self.exited.set()


class BackgroundJobs:
    """One session's background commands by id; ``listeners`` hear of each one that ends."""

    def __init__(self, kill_grace_s: float | None = None) -> None:
        from ketch.tools.shell import KILL_GRACE_S

        self._jobs: dict[str, BackgroundJob] = {}
        self._watchers: set[asyncio.Task[None]] = set()
        self._kill_grace_s = KILL_GRACE_S if kill_grace_s is None else kill_grace_s
        self.listeners: list[Callable[[BackgroundJob], None]] = []
        self.on_start: Callable[[BackgroundJob], None] | None = None
        self.closed = False

    # -- starting ------------------------------------------------------------------------
    async def start(self, deps: Any, call_id: str, command: str) -> BackgroundJob:
        """Start ``command`` as the shell tool would, through the launcher; returns at once."""
        from ketch.sandbox.escalation import shell_launch
        from ketch.tools.child_env import child_environment

        if self.closed:
            raise ToolFailed("The session is ending; no background command can start.")
        settings = deps.settings
        root = deps.workspace.root
        launch = shell_launch(deps, call_id, command, ["bash", "-c", command], root)
        env = {**child_environment(settings.child_env), "PAGER": "cat", "GIT_PAGER": "cat"}
        argv = [sys.executable, "-I", "-S", str(REAPER), str(os.getpid()), f"{self._kill_grace_s:g}", "--", *launch.argv]
        output = UnreadOutput(settings.shell_output_cap)
        loop = asyncio.get_running_loop()
        try:
            transport, protocol = await loop.subprocess_exec(
                lambda: _JobProtocol(output), *argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                stderr=subprocess.PIPE, cwd=str(root), env=env, start_new_session=True,
            )  # fmt: skip
        except OSError as exc:
            raise ToolFailed(f"Could not start bash: {exc}.") from exc
        job = BackgroundJob(self._new_id(), command, call_id, transport.get_pid(), output, launch)
        self._jobs[job.job_id] = job
        if self.on_start is not None:
            self.on_start(job)
        watcher = loop.create_task(self._watch(job, transport, protocol))
        self._watchers.add(watcher)
        watcher.add_done_callback(self._watchers.discard)
        return job

    async def start_for(self, ctx: Any, command: str, *, background: Any = True, timeout: Any = None) -> str:
        """``shell`` with ``background: true``: start the command and say how to follow it."""
        if background is not True:
            raise ToolFailed("background must be true or false.")
        if timeout is not None:
            raise ToolFailed("timeout does not apply to a background command; stop it with shell_kill.")
        job = await self.start(ctx.deps, ctx.tool_call_id or "", command)
        return (
            f"Started in the background as {job.job_id}. Read what it prints with shell_output(id=\"{job.job_id}\"); "
            f"stop it with shell_kill(id=\"{job.job_id}\"). It keeps running after this turn; you are told when it "
            "ends, and it is stopped when the session ends."
        )

    def _new_id(self) -> str:
        while True:
            job_id = "bg-" + secrets.token_hex(3)
            if job_id not in self._jobs:
                return job_id

    async def _watch(self, job: BackgroundJob, transport: Any, protocol: _JobProtocol) -> None:
        try:
            await protocol.exited.wait()
            try:
                await asyncio.wait_for(protocol.pipes_closed.wait(), PIPE_DRAIN_S)
            except TimeoutError:
                pass
            job.exit_code = transport.get_returncode()
        finally:
            if not protocol.exited.is_set():  # the watcher itself was cancelled: never leave it running
                from ketch.tools.shell import _kill_tree_now

                _kill_tree_now(job.pid)
            transport.close()
            job.ended_at = time.monotonic()
            job.done.set()
            for listener in list(self.listeners):
                try:
                    listener(job)
                except Exception:  # noqa: BLE001 - a front end's listener must not keep the job from ending
                    pass

    # -- reading and stopping --------------------------------------------------------------
    def get(self, job_id: Any) -> BackgroundJob:
        """The job ``job_id`` of this session; ToolFailed for any other value."""
        if not isinstance(job_id, str):
            raise ToolFailed("id must be a string such as 'bg-1a2b3c'.")
        job = self._jobs.get(job_id.strip())
        if job is None:
            known = ", ".join(self._jobs) or "none"
            raise ToolFailed(f"No background command {job_id!r} in this session (its ids: {known}).")
        return job

    def read(self, job_id: Any, sandbox: Any = None) -> str:
        """``shell_output``: the state and the output since the last read."""
        job = self.get(job_id)
        text, dropped = job.output.take()
        head = f"{job.job_id}: {job.state()}"
        lines = [head]
        if dropped:
            lines.append(f"[{dropped} earlier bytes were dropped: only the newest {job.output.limit} are kept between reads]")
        lines.append(text.rstrip("\n") if text else "(no new output)")
        if not job.running and sandbox is not None and getattr(job.launch, "confined", False):
            what = sandbox.refusal(text)
            if what:
                from ketch.sandbox.escalation import _refusal_note

                lines.append(_refusal_note(sandbox, what) + " [background commands are not offered a run outside the sandbox.]")
        return "\n".join(lines)

    async def kill(self, job_id: Any, by: str) -> BackgroundJob:
        """Stop the job's whole process tree and wait until it is gone."""
        from ketch.tools.shell import kill_process_tree

        job = self.get(job_id)
        if job.running:
            job.stopped_by = by
            await kill_process_tree(job.pid, self._kill_grace_s)
            await job.done.wait()
        return job

    def jobs(self) -> list[BackgroundJob]:
        return list(self._jobs.values())

    def running(self) -> list[BackgroundJob]:
        return [job for job in self._jobs.values() if job.running]

    def ended_summary(self) -> str | None:
        """The reminder's section: the commands that ended (newest last); None before any did."""
        ended = sorted((j for j in self._jobs.values() if not j.running), key=lambda j: j.ended_at or 0.0)
        if not ended:
            return None
        rows = [f"{j.job_id} `{short_command(j.command, 80)}` ended: {j.how()}" for j in ended[-SHOWN_ENDED:]]
        if len(ended) > SHOWN_ENDED:
            rows.insert(0, f"({len(ended) - SHOWN_ENDED} earlier ones not listed)")
        return "\n".join(rows) + "\nshell_output(id) gives what each printed since it was last read."

    async def close(self) -> None:
        """Stop every running command (the session ends); no new one starts after this."""
        self.closed = True
        running = self.running()
        await asyncio.gather(*(self.kill(job.job_id, "the session's end") for job in running), return_exceptions=True)
        if self._watchers:
            await asyncio.gather(*list(self._watchers), return_exceptions=True)


# --------------------------------------------------------------------------- the tools


def _jobs_of(ctx: Any) -> BackgroundJobs:
    jobs = ctx.deps.extras.get("background")
    if not isinstance(jobs, BackgroundJobs):
        raise ToolFailed("Background commands are not available in this session.")
    return jobs


async def shell_output(ctx: RunContext[ToolDeps], id: str) -> str:
    """A background command's state (exit code once ended) and its output since the last read.

    Args:
        id: The id shell returned.
    """
    return _jobs_of(ctx).read(id, getattr(ctx.deps.settings, "sandbox", None))


async def shell_kill(ctx: RunContext[ToolDeps], id: str) -> str:
    """Stop a background command and every process it started.

    Args:
        id: The id shell returned.
    """
    jobs = _jobs_of(ctx)
    job = jobs.get(id)
    if not job.running:
        return f"{job.job_id} had already ended: {job.how()}."
    await jobs.kill(id, "shell_kill")
    rest = jobs.read(id, getattr(ctx.deps.settings, "sandbox", None))
    return f"Stopped {job.job_id} and every process it started.\n{rest}"


TOOLS: list[ToolSpec] = [
    ToolSpec(name="shell_output", function=shell_output, kind="read", key_arg="id"),
    ToolSpec(name="shell_kill", function=shell_kill, kind="meta", key_arg="id"),
]
