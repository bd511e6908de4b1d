"""Switching modes inside a session, on the real ``Interactive`` runtime and session in a pyte
terminal at 80 and 120 columns: Shift-Tab cycles the approval mode (ask → auto → plan → ask)
and the status line follows; ``/approval MODE`` and ``/sandbox MODE`` switch; each switch is a
line in the transcript; and the switched mode is what the gate then does."""

from __future__ import annotations

import argparse
import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
from fakeprovider import ToolCall, Turn, tool_results
from kettle import adhoc
from prompt_toolkit.input import create_pipe_input
from uifakes import Harness, app_config_fields, make_output

import ketch.core.session  # noqa: F401
from ketch.frontends.cli import _main_parser
from ketch.frontends.interactive import Interactive
from ketch.ui.controller import KetchApp


def parse(tmp_path: Path, *argv: str) -> argparse.Namespace:
    return _main_parser().parse_args([*argv, "--cwd", str(tmp_path)])


class SlowHarness(Harness):
    """The harness, entered once the first frame is drawn (the real session loads meanwhile)."""

    async def __aenter__(self) -> SlowHarness:
        self._pipe_cm = create_pipe_input()
        self.pipe = self._pipe_cm.__enter__()
        self.app = KetchApp(self.config, input=self.pipe, output=make_output(self.sink))
        self.task = asyncio.ensure_future(self.app.run())
        await self.wait_for(lambda: self.app is not None and self.app.session_ready, timeout=30)
        return self


@asynccontextmanager
async def running(tmp_path: Path, columns: int, *argv: str) -> AsyncIterator[tuple[Harness, Interactive]]:
    runtime = Interactive(parse(tmp_path, *argv), tmp_path)
    fields = app_config_fields(runtime.app_config())
    try:
        async with SlowHarness(None, columns=columns, rows=30, **fields) as h:
            yield h, runtime
    finally:
        await runtime.close()


def status_row(h: Harness) -> str:
    return [line for line in h.sink.display() if line.strip()][-1]


@pytest.mark.parametrize("columns", [80, 120])
async def test_shift_tab_cycles_the_approval_mode_in_the_status_line_and_the_transcript(
    tmp_path: Path, isolated_home: Path, fake_provider: Any, columns: int,
) -> None:
    fake = fake_provider([Turn(tool_calls=[ToolCall("write_file", {"path": "plan.txt", "content": "x\n"})]), Turn(text="planned")])
    async with running(tmp_path, columns, *adhoc(fake, "openai-chat")) as (h, runtime):
        await h.wait_for(lambda: "ask ⇧tab" in status_row(h), timeout=10)
        await h.type("\x1b[Z")  # shift-tab
        await h.wait_for(lambda: "auto ⇧tab" in status_row(h))
        await h.wait_text("approval mode: auto")
        await h.type("\x1b[Z")
        await h.wait_for(lambda: "plan ⇧tab" in status_row(h))
        await h.wait_text("approval mode: plan")
        assert runtime.session.gate.approval == "plan"
        # the status line is the terminal's default colours, dim (one of the 16 colours, readable on both themes)
        screen = h.sink.screen
        y = max(i for i, line in enumerate(h.sink.display()) if "plan ⇧tab" in line)
        x = h.sink.display()[y].index("plan ⇧tab")
        assert screen.buffer[y][x].fg == "default"
        await h.type("write the plan\r")
        await h.wait_text("planned", timeout=10)
        await h.idle()
        assert not (tmp_path / "plan.txt").exists()
        assert "Plan mode is on" in tool_results(fake.model_requests[1])[-1][1]
        await h.type("\x1b[Z")
        await h.wait_for(lambda: "ask ⇧tab" in status_row(h))
        await h.wait_text("approval mode: ask")


@pytest.mark.parametrize("columns", [80, 120])
async def test_slash_approval_and_sandbox_switch_and_say_so(tmp_path: Path, isolated_home: Path, fake_provider: Any, columns: int) -> None:
    fake = fake_provider([])
    async with running(tmp_path, columns, *adhoc(fake, "openai-chat")) as (h, runtime):
        await h.wait_for(lambda: "ask ⇧tab" in status_row(h), timeout=10)
        await h.type("/approval auto\r")
        await h.wait_text("approval mode: auto")
        await h.idle()
        assert "auto ⇧tab" in status_row(h) and runtime.session.gate.approval == "auto"
        await h.type("/sandbox read-only\r")
        await h.wait_text("sandbox mode: read-only")
        await h.idle()
        assert runtime.session.sandbox.policy.mode == "read-only"
        await h.type("/sandbox\r")
        await h.wait_text("mode: read-only")
        await h.type("/approval sometimes\r")
        await h.wait_text("unknown approval mode 'sometimes'")
        await h.idle()
        assert runtime.session.gate.approval == "auto"
