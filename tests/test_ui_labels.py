"""Labels that say what happens, on a pyte screen at 80 and 120 columns: ``/help CMD`` shows that
command; the first-run hint is whole; "esc again to rewind" goes once used; a denial of running
outside the sandbox names the user; ``/context`` rows add up to its total; ``/think`` that is
not sent says so in the status line too; ``--help`` on ``--approval``; the README's demo server
runs without pytest."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from fakeprovider import Turn
from kettle import adhoc
from test_ui_modes import running, status_row
from uifakes import FakeSession, Harness

from ketch.protocol.events import ApprovalResolved, ToolCallFinished, ToolCallStarted
from ketch.protocol.frontend import SessionStatus
from ketch.extensions.commands import CommandRegistry, builtin_commands
from ketch.ui.layout import FIRST_RUN_HINT
from ketch.ui.panels import context_panel

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize("columns", [80, 120])
async def test_help_for_one_command_shows_that_command_only(columns: int) -> None:
    async with Harness(FakeSession(), columns=columns, commands=CommandRegistry(builtin_commands())) as h:
        await h.type("/help approval\r")
        await h.wait_text("/approval [ask|auto|plan|never]")
        await h.idle()
        text = h.sink.text()
        assert "shift-tab cycles ask, auto, plan" in text
        assert "/model" not in text and "Commands:" not in text


@pytest.mark.parametrize("columns", [80, 120])
async def test_the_first_run_hint_is_whole_at_any_width(columns: int) -> None:
    async with Harness(FakeSession(), columns=columns) as h:
        await h.wait_text("/help")
        lines = h.sink.display()
        shown = " · ".join(line.strip() for line in lines if "·" in line and "fake-model" not in line)
        assert shown == FIRST_RUN_HINT
        assert all(len(line) <= columns for line in lines)


@pytest.mark.parametrize("columns", [80, 120])
async def test_esc_again_to_rewind_goes_when_the_second_esc_comes(columns: int) -> None:
    async with Harness(FakeSession(), columns=columns) as h:
        await h.type("\x1b", pause=0.3)
        await h.wait_text("esc again to rewind")
        await h.type("\x1b", pause=0.3)
        await h.wait_text("/rewind is not available here.")
        await h.wait_gone("esc again to rewind")


@pytest.mark.parametrize("columns", [80, 120])
async def test_a_refused_offer_to_run_outside_the_sandbox_is_denied_by_the_user(columns: int) -> None:
    turn = [ToolCallStarted(call_id="c1", name="shell", args={"command": "touch /etc/x"}),
            ApprovalResolved(call_id="c1", name="shell", decision="deny", by="user", reason="keep it inside", rule="outside the sandbox"),
            ToolCallFinished(call_id="c1", name="shell", is_error=True, summary="refused")]
    async with Harness(FakeSession([turn]), columns=columns) as h:
        await h.type("go\r")
        await h.wait_text("denied by user (outside the sandbox): keep it inside")
        assert "denied by outside the sandbox" not in h.sink.text()


def test_context_rows_add_up_to_the_total_and_the_header_is_the_status_lines_figure() -> None:
    status = SessionStatus(context_tokens=0, context_window=100_000, context_used_pct=0.0,
                           context_parts={"messages": 1200, "tool schemas": 1500, "instructions": 300})
    rows = context_panel(status)
    assert rows[0].startswith("Context: 0 / 100,000 tokens (0%")
    at_total = next(i for i, r in enumerate(rows) if r.strip().startswith("total"))
    figures = [int(r.split()[-2 if "█" in r else -1].replace(",", "")) for r in rows[2:at_total]]
    total_row = rows[at_total].split()
    assert total_row[0] == "total" and int(total_row[1].replace(",", "")) == sum(figures) == 3000
    assert total_row[2] == "(3%)"


async def test_think_that_is_not_sent_says_so_in_the_status_line(tmp_path: Path, isolated_home: Path, fake_provider: Any) -> None:
    fake = fake_provider([Turn(text="hi")])
    async with running(tmp_path, 120, *adhoc(fake, "openai-chat")) as (h, _runtime):
        await h.wait_for(lambda: "think off" in status_row(h), timeout=10)
        await h.type("/think high\r")
        await h.wait_text("is not applied")
        await h.idle()
        assert "think high (not sent)" in status_row(h)


def test_help_on_approval_never_says_what_runs() -> None:
    out = subprocess.run([sys.executable, "-m", "ketch", "--help"], capture_output=True, text=True, timeout=60)
    text = " ".join(out.stdout.split())
    assert "never: sandboxed commands and allowed writes run, whatever would still ask is denied" in text


def test_the_readme_demo_server_runs_without_pytest() -> None:
    code = "import sys; sys.modules['pytest'] = None; sys.path.insert(0, 'tests'); import fakeprovider_server; print('imported')"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=60)
    assert out.stdout.strip() == "imported", out.stderr


async def test_after_a_rewind_to_the_start_the_status_and_context_agree(tmp_path: Path, isolated_home: Path, fake_provider: Any) -> None:
    import argparse

    from ketch.frontends.assemble import build_session

    fake = fake_provider([Turn(text="an answer " * 40, usage=(3000, 200))])
    args = argparse.Namespace(cwd=str(tmp_path), model="fake-model", wire="openai-chat", base_url=fake.base_url, yolo=True)
    session = await build_session(args, interactive=True)
    try:
        [e async for e in session.run_turn("hello")]
        assert session.status().context_tokens == 3200  # measured by the request
        from ketch.protocol.operations import Rewind

        session.apply(Rewind(()))  # what a rewind to the first prompt does
        status = session.status()
    finally:
        await session.aclose()
    assert status.context_tokens == sum(status.context_parts.values()) > 0
    rows = context_panel(status)
    assert rows[0].startswith(f"Context: {status.context_tokens:,} / ")
    assert next(r for r in rows if r.strip().startswith("total")).split()[1] == f"{status.context_tokens:,}"
