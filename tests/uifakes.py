"""Stand-ins for UI tests: a scripted session, a pyte-backed terminal, an app harness.

No mocking framework: the session is a small real class whose turns are scripts of
events and waits; it records every call the UI makes on it.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import Any

import pyte
from prompt_toolkit.data_structures import Size
from prompt_toolkit.input import create_pipe_input

from ketch.protocol.events import (
    AgentEvent, ApprovalRequested, ApprovalResolved, AskRequested, ToolCallFinished,
    ToolCallStarted, TurnFinished,
)
from ketch.protocol.frontend import SessionStatus
from ketch.ui.appconfig import AppConfig
from ketch.ui.controller import KetchApp
from ketch.ui.terminal import FrameOutput


# -- script steps ---------------------------------------------------------------------
@dataclass
class Gate:
    """Wait until the test opens the gate named ``name`` (or the turn is cancelled)."""

    name: str


@dataclass
class Sleep:
    seconds: float


@dataclass
class RunningCommand:
    """A shell call that runs until ``interrupt_command`` (or its gate opens)."""

    call_id: str
    command: str
    gate: str = ""


@dataclass
class Approval:
    """Ask for approval and wait for the decision, like the real session."""

    request_id: str
    name: str = "shell"
    args: dict[str, Any] = field(default_factory=lambda: {"command": "rm -rf build"})
    preview: str = "rm -rf build"
    agent: str = ""
    """The subagent asking, when not the main agent."""
    reason: str = ""
    cwd: str = ""
    sandbox: str = ""
    rule_proposal: str = ""
    no_rule_because: str = ""


@dataclass
class Ask:
    request_id: str
    question: str
    choices: list[str] = field(default_factory=list)


Step = Any


class FakeSession:
    """A scripted SessionLike: each turn plays the next script (or ``default_turn``)."""

    def __init__(self, turns: list[list[Step]] | None = None,
                 default_turn: Callable[[str], list[Step]] | None = None,
                 status: SessionStatus | None = None) -> None:
        self.turns = list(turns or [])
        self.default_turn = default_turn or (lambda prompt: [])
        self._status = status or SessionStatus(session_id="sess-1", model="fake-model", cwd="/tmp/proj")
        self.prompts: list[str] = []
        self.decisions: list[tuple[str, str, str]] = []
        self.answers: list[tuple[str, str]] = []
        self.interrupts = 0
        self.cancels = 0
        self.gates: dict[str, asyncio.Event] = {}
        self._futures: dict[str, asyncio.Future[Any]] = {}
        self._cancelled = asyncio.Event()
        self._interrupted = asyncio.Event()
        self.running_command = False

    def gate(self, name: str) -> asyncio.Event:
        """The event a ``Gate(name)`` step waits on."""
        return self.gates.setdefault(name, asyncio.Event())

    async def _wait(self, event: asyncio.Event) -> bool:
        """Wait for ``event`` or cancellation; True if cancelled."""
        waiters = [asyncio.ensure_future(event.wait()), asyncio.ensure_future(self._cancelled.wait())]
        await asyncio.wait(waiters, return_when=asyncio.FIRST_COMPLETED)
        for w in waiters:
            w.cancel()
        return self._cancelled.is_set()

    async def run_turn(self, prompt: str) -> AsyncIterator[AgentEvent]:
        self.prompts.append(prompt)
        self._cancelled = asyncio.Event()
        script = self.turns.pop(0) if self.turns else self.default_turn(prompt)
        for step in script:
            if self._cancelled.is_set():
                break
            if isinstance(step, Gate):
                if await self._wait(self.gate(step.name)):
                    break
            elif isinstance(step, Sleep):
                await asyncio.sleep(step.seconds)
            elif isinstance(step, RunningCommand):
                yield ToolCallStarted(call_id=step.call_id, name="shell", args={"command": step.command})
                self._interrupted = asyncio.Event()
                self.running_command = True
                stop = self.gate(step.gate) if step.gate else asyncio.Event()
                done = [asyncio.ensure_future(e.wait()) for e in (self._interrupted, stop, self._cancelled)]
                await asyncio.wait(done, return_when=asyncio.FIRST_COMPLETED)
                for d in done:
                    d.cancel()
                self.running_command = False
                killed = self._interrupted.is_set()
                yield ToolCallFinished(call_id=step.call_id, name="shell", is_error=killed,
                                       summary="interrupted by the user" if killed else "exit 0")
            elif isinstance(step, Approval):
                fut: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
                self._futures[step.request_id] = fut
                yield ApprovalRequested(request_id=step.request_id, call_id=step.request_id,
                                        name=step.name, args=step.args, preview=step.preview,
                                        agent=step.agent, reason=step.reason, cwd=step.cwd,
                                        sandbox=step.sandbox, rule_proposal=step.rule_proposal,
                                        no_rule_because=step.no_rule_because)
                decision, reason = await fut
                yield ApprovalResolved(call_id=step.request_id, name=step.name, decision=decision,
                                       by="user", reason=reason)
            elif isinstance(step, Ask):
                fut = asyncio.get_running_loop().create_future()
                self._futures[step.request_id] = fut
                yield AskRequested(request_id=step.request_id, call_id=step.request_id,
                                   question=step.question, choices=step.choices)
                await fut
            else:
                yield step
        reason = "cancelled" if self._cancelled.is_set() else "done"
        yield TurnFinished(reason=reason)

    def decide(self, request_id: str, decision: str, reason: str = "") -> None:
        self.decisions.append((request_id, decision, reason))
        fut = self._futures.pop(request_id, None)
        if fut is not None and not fut.done():
            fut.set_result((decision, reason))

    def answer(self, request_id: str, text: str) -> None:
        self.answers.append((request_id, text))
        fut = self._futures.pop(request_id, None)
        if fut is not None and not fut.done():
            fut.set_result(text)

    def interrupt_command(self) -> bool:
        self.interrupts += 1
        if self.running_command:
            self._interrupted.set()
            return True
        return False

    def cancel_turn(self) -> None:
        self.cancels += 1
        self._cancelled.set()

    def status(self) -> SessionStatus:
        return self._status


# -- the terminal ---------------------------------------------------------------------
class ScreenSink:
    """The 'stdout' of a vt100 output: feeds a pyte screen and keeps every write."""

    encoding = "utf-8"

    def __init__(self, columns: int = 80, rows: int = 24) -> None:
        self.screen = pyte.HistoryScreen(columns, rows, history=5000)
        self.stream = pyte.Stream(self.screen)
        self.writes: list[str] = []

    def write(self, data: str) -> int:
        self.writes.append(data)
        self.stream.feed(data)
        return len(data)

    def flush(self) -> None:
        pass

    def isatty(self) -> bool:
        return False

    @property
    def transcript(self) -> str:
        return "".join(self.writes)

    def display(self) -> list[str]:
        return [line.rstrip() for line in self.screen.display]

    def text(self) -> str:
        return "\n".join(self.display())

    def history_lines(self) -> list[str]:
        rows = []
        for line in self.screen.history.top:
            rows.append("".join(line[x].data for x in range(self.screen.columns)).rstrip())
        return rows

    def all_lines(self) -> list[str]:
        """Scrollback (what scrolled off the top) followed by the screen."""
        return self.history_lines() + self.display()


def make_output(sink: ScreenSink) -> FrameOutput:
    size = Size(rows=sink.screen.lines, columns=sink.screen.columns)
    return FrameOutput(sink, lambda: size, term="xterm-256color")


class Harness:
    """Runs a KetchApp on a pipe input and a pyte screen; helpers to type and wait."""

    def __init__(self, session: FakeSession | None = None, *, columns: int = 80, rows: int = 24,
                 **config: Any) -> None:
        self.session = session or FakeSession()
        self.sink = ScreenSink(columns, rows)
        self.saved_history: list[str] = []
        config.setdefault("approval_grace", 0.0)
        config.setdefault("flush_interval", 0.02)
        config.setdefault("save_history", self.saved_history.append)
        factory = config.pop("session_factory", None)

        async def make_session() -> FakeSession:
            return self.session

        self.config = AppConfig(session_factory=factory or make_session, **config)
        self.app: KetchApp | None = None

    async def __aenter__(self) -> Harness:
        self._pipe_cm = create_pipe_input()
        self.pipe = self._pipe_cm.__enter__()
        self.app = KetchApp(self.config, input=self.pipe, output=make_output(self.sink))
        self.task = asyncio.ensure_future(self.app.run())
        await self.wait_for(lambda: self.app is not None and self.app.session_ready and "›" in self.sink.text())
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self.app is not None
        self.app.exit(0)
        try:
            await asyncio.wait_for(self.task, 3)
        finally:
            self._pipe_cm.__exit__(None, None, None)

    def send(self, keys: str) -> None:
        self.pipe.send_text(keys)

    async def type(self, keys: str, pause: float = 0.0) -> None:
        self.send(keys)
        await asyncio.sleep(pause or 0.02)

    async def wait_for(self, predicate: Callable[[], bool], timeout: float = 30.0) -> None:
        deadline = time.monotonic() + timeout
        while not predicate():
            if time.monotonic() > deadline:
                raise AssertionError("timed out; screen was:\n" + self.sink.text())
            await asyncio.sleep(0.01)

    async def wait_text(self, text: str, timeout: float = 30.0) -> None:
        await self.wait_for(lambda: text in self.sink.text(), timeout)

    async def wait_gone(self, text: str, timeout: float = 30.0) -> None:
        await self.wait_for(lambda: text not in self.sink.text(), timeout)

    async def idle(self) -> None:
        assert self.app is not None
        await self.wait_for(lambda: not self.app.busy and not self.app.queue)
        await asyncio.sleep(0.05)


APP_CONFIG_FIELDS = ("session_factory", "load_history", "save_history", "candidates", "commands",
                     "on_command", "command_choices", "on_ready", "startup_error", "first_input")
"""What the real front end's ``app_config()`` hands the app, as the Harness takes it."""


def app_config_fields(config: Any, *extra: str) -> dict[str, Any]:
    """The Harness keyword arguments from a real ``AppConfig``: ``APP_CONFIG_FIELDS`` plus ``extra``."""
    return {name: getattr(config, name) for name in (*APP_CONFIG_FIELDS, *extra)}
