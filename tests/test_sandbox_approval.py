"""Approval modes built on the sandbox, through real sessions against the fake provider.

``auto``: a sandboxed command runs without a prompt; one the sandbox refused is offered to
the user once to run outside it. ``never``: nothing prompts, and what would is denied with the
reason. ``read-only``: no file changes at all. And a repository's config cannot widen any of it.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fakeprovider import FakeProvider, ToolCall, Turn, tool_results
from kettle import adhoc, run_ketch, write_project_config

from ketch.protocol import events as ev
from ketch.frontends.assemble import build_session

WIRE = "openai-chat"


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    root = tmp_path / "ws"
    (root / ".git" / "hooks").mkdir(parents=True)
    return root


@pytest.fixture
def outside() -> Iterator[Path]:
    path = Path(tempfile.mkdtemp(prefix="ketch-approval-", dir="/var/tmp"))
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


def _shell(command: str) -> Turn:
    return Turn(tool_calls=[ToolCall("shell", {"command": command})])


async def _session(fake: FakeProvider, cwd: Path, **flags: Any) -> Any:
    values = {"yolo": False, "sandbox": None, "approval": None, **flags}
    args = argparse.Namespace(cwd=str(cwd), base_url=fake.base_url, wire=WIRE, model="fake-model", **values)
    return await build_session(args, interactive=True)


async def _turn(session: Any, answers: list[str]) -> list[Any]:
    """One turn; each approval request takes the next answer (none left: the test fails)."""
    seen: list[Any] = []
    async for event in session.run_turn("go"):
        seen.append(event)
        if isinstance(event, ev.ApprovalRequested):
            assert answers, f"unexpected approval request: {event}"
            session.decide(event.request_id, answers.pop(0), "")
    return seen


def _of(kind: type, events: list[Any]) -> list[Any]:
    return [e for e in events if isinstance(e, kind)]


def _result(fake: FakeProvider, index: int) -> str:
    """The newest tool result in the request ``index`` (earlier ones are history)."""
    return tool_results(fake.model_requests[index])[-1][1]


# ---------------------------------------------------------------- auto
async def test_auto_runs_a_sandboxed_test_command_without_a_prompt(ws: Path) -> None:
    (ws / "test_x.py").write_text("def test_ok():\n    assert 1 + 1 == 2\n")
    command = f"{sys.executable} -m pytest -q -p no:cacheprovider test_x.py"
    with FakeProvider([_shell(command), Turn(text="done")]) as fake:
        session = await _session(fake, ws, approval="auto")
        try:
            seen = await _turn(session, [])
        finally:
            await session.aclose()
    assert _of(ev.ApprovalRequested, seen) == []
    [resolved] = _of(ev.ApprovalResolved, seen)
    assert (resolved.decision, resolved.by) == ("allow", "sandbox")
    assert "1 passed" in _result(fake, 1)


async def test_auto_offers_once_to_run_a_refused_write_outside_the_sandbox(ws: Path, outside: Path) -> None:
    target = outside / "escalated.txt"
    with FakeProvider([_shell(f"echo hi > {target}"), Turn(text="done")]) as fake:
        session = await _session(fake, ws, approval="auto")
        try:
            seen = await _turn(session, ["allow"])
        finally:
            await session.aclose()
    [request] = _of(ev.ApprovalRequested, seen)
    assert request.args["outside_sandbox"] is True and request.args["command"] == f"echo hi > {target}"
    assert "refused" in request.preview and "outside the sandbox" in request.preview
    assert target.read_text() == "hi\n"
    result = _result(fake, 1)
    assert "the user let it run again outside the sandbox" in result


async def test_auto_declined_escalation_leaves_nothing_written_and_tells_the_model(ws: Path, outside: Path) -> None:
    target = outside / "declined.txt"
    with FakeProvider([_shell(f"echo hi > {target}"), Turn(text="done")]) as fake:
        session = await _session(fake, ws, approval="auto")
        try:
            await _turn(session, ["deny"])
        finally:
            await session.aclose()
    assert not target.exists()
    assert "declined to run it outside the sandbox" in _result(fake, 1)


async def test_auto_allow_for_the_session_runs_the_same_command_outside_without_asking_again(ws: Path, outside: Path) -> None:
    target = outside / "twice.txt"
    command = f"echo x >> {target}"
    with FakeProvider([_shell(command), Turn(text="one"), _shell(command), Turn(text="two")]) as fake:
        session = await _session(fake, ws, approval="auto")
        try:
            first = await _turn(session, ["allow_session"])
            second = await _turn(session, [])
        finally:
            await session.aclose()
    assert len(_of(ev.ApprovalRequested, first)) == 1
    assert _of(ev.ApprovalRequested, second) == []
    assert target.read_text() == "x\nx\n"


def test_headless_auto_reports_the_refusal_and_offers_nothing(ws: Path, outside: Path) -> None:
    target = outside / "headless.txt"
    with FakeProvider([_shell(f"echo hi > {target}"), Turn(text="done")]) as fake:
        run = run_ketch(["-p", "go", "--approval", "auto", *adhoc(fake, WIRE)], ws)
    assert run.code == 0, run.stderr
    assert not target.exists()
    result = _result(fake, 1)
    assert "the sandbox refused a write outside" in result and "Read-only file system" in result


# ---------------------------------------------------------------- never
def test_headless_never_denies_running_outside_with_the_reason(ws: Path, outside: Path) -> None:
    target = outside / "never.txt"
    with FakeProvider([_shell(f"echo hi > {target}"), Turn(text="done")]) as fake:
        run = run_ketch(["-p", "go", "--approval", "never", *adhoc(fake, WIRE)], ws)
    assert run.code == 0, run.stderr
    assert not target.exists()
    assert "approval = never: running it outside the sandbox would need the user's approval" in _result(fake, 1)


def test_never_lets_sandboxed_work_run_and_denies_what_would_ask(ws: Path) -> None:
    script = [
        _shell("echo built > out.txt"),
        Turn(tool_calls=[ToolCall("write_file", {"path": "notes.md", "content": "n\n"})]),
        Turn(tool_calls=[ToolCall("write_file", {"path": ".git/hooks/post-checkout", "content": "#!/bin/sh\n"})]),
        Turn(tool_calls=[ToolCall("web_fetch", {"url": "http://127.0.0.1:9/"})]),
        Turn(text="done"),
    ]
    with FakeProvider(script) as fake:
        run = run_ketch(["-p", "go", "--approval", "never", *adhoc(fake, WIRE)], ws)
    assert run.code == 0, run.stderr
    assert (ws / "out.txt").read_text() == "built\n"
    assert (ws / "notes.md").read_text() == "n\n"
    assert not (ws / ".git" / "hooks" / "post-checkout").exists()
    assert "approval = never" in _result(fake, 3) and "run code later" in _result(fake, 3)
    assert "approval = never" in _result(fake, 4)


def test_ask_mode_still_asks_for_commands_headless_denied(ws: Path) -> None:
    with FakeProvider([_shell("echo hi > f.txt"), Turn(text="done")]) as fake:
        run = run_ketch(["-p", "go", *adhoc(fake, WIRE)], ws)
    assert run.code == 0
    assert not (ws / "f.txt").exists()
    assert "needs the user's approval" in _result(fake, 1)


# ---------------------------------------------------------------- read-only
def test_read_only_mode_refuses_file_tools_and_command_writes(ws: Path) -> None:
    script = [
        Turn(tool_calls=[ToolCall("write_file", {"path": "a.txt", "content": "a\n"})]),
        _shell("echo b > b.txt"),
        Turn(text="done"),
    ]
    with FakeProvider(script) as fake:
        run = run_ketch(["-p", "go", "--sandbox", "read-only", "--approval", "auto", *adhoc(fake, WIRE)], ws)
    assert run.code == 0, run.stderr
    assert not (ws / "a.txt").exists() and not (ws / "b.txt").exists()
    assert "read-only" in _result(fake, 1)
    assert "Read-only file system" in _result(fake, 2)


def test_yolo_with_an_explicit_sandbox_keeps_it(ws: Path, outside: Path) -> None:
    target = outside / "yolo.txt"
    with FakeProvider([_shell(f"echo hi > {target}"), Turn(text="done")]) as fake:
        run = run_ketch(["-p", "go", "--yolo", "--sandbox", "workspace-write", *adhoc(fake, WIRE)], ws)
    assert run.code == 0
    assert not target.exists()
    with FakeProvider([_shell(f"echo hi > {target}"), Turn(text="done")]) as fake:
        run = run_ketch(["-p", "go", "--yolo", *adhoc(fake, WIRE)], ws)
    assert target.read_text() == "hi\n"


# ---------------------------------------------------------------- a repository cannot widen
def test_a_repository_config_cannot_widen_the_sandbox_or_the_approval_mode(ws: Path, outside: Path) -> None:
    (Path(os.environ["KETCH_CONFIG_DIR"]) / "config.toml").write_text('titles = false\n[permissions]\nshell = "allow"\n')
    write_project_config(
        ws,
        f'approval = "auto"\n[sandbox]\nmode = "full-access"\nnetwork = true\nwritable = ["{outside}"]\nmechanism = "none"\n',
    )
    target = outside / "repo-widened.txt"
    with FakeProvider([_shell(f"echo hi > {target}"), Turn(text="done")]) as fake:
        run = run_ketch(["-p", "go", *adhoc(fake, WIRE)], ws)
    assert run.code == 0, run.stderr
    assert not target.exists()
    assert "Read-only file system" in _result(fake, 1)  # it ran (the user's rule), sandboxed
    for key in ("sandbox.mode", "sandbox.network", "sandbox.writable", "sandbox.mechanism", "approval"):
        assert key in run.stderr
    assert "never widen" in run.stderr


def test_a_repository_config_may_narrow_to_read_only(ws: Path) -> None:
    write_project_config(ws, '[sandbox]\nmode = "read-only"\n')
    with FakeProvider([_shell("echo b > b.txt"), Turn(text="done")]) as fake:
        run = run_ketch(["-p", "go", "--approval", "auto", *adhoc(fake, WIRE)], ws)
    assert run.code == 0, run.stderr
    assert not (ws / "b.txt").exists()
    assert "Read-only file system" in _result(fake, 1)


def test_sandbox_check_reports_the_mechanism_and_why(ws: Path) -> None:
    run = run_ketch(["sandbox", "check"], ws)
    assert run.code == 0, run.stderr
    lines = run.stdout.splitlines()
    assert lines[0].startswith("mechanism: bubblewrap (bubblewrap ")
    assert "mode: workspace-write" in lines and "network: off" in lines
    assert any(line.startswith("read-only inside: ") and ".git" in line for line in lines)


# ---------------------------------------------------------------- /sandbox, /permissions
async def test_the_permissions_panel_gives_one_answer_for_commands_and_file_tools(ws: Path) -> None:
    from ketch.extensions.commands import builtin_commands
    from ketch.frontends.slash_actions import SlashActions

    assert any(c.name == "sandbox" and "permissions" in c.aliases for c in builtin_commands())
    with FakeProvider([]) as fake:
        session = await _session(fake, ws, approval="auto")
        try:
            text = await SlashActions(lambda: session, None, ws).run("sandbox", "")
        finally:
            await session.aclose()
    lines = text.splitlines()
    assert lines[0] == "What ketch may change:"
    assert lines[1].startswith("  mechanism: bubblewrap")
    assert f"  writable: {ws}, a private /tmp" in lines
    assert f"  read-only inside: {ws / '.git'}" in lines
    assert any(line.startswith("  file tools: the same writable places; run-later paths") for line in lines)
    assert any(line.startswith("  approvals: auto: commands that run sandboxed") for line in lines)
    with FakeProvider([]) as fake:
        session = await _session(fake, ws, sandbox="read-only")
        try:
            text = await SlashActions(lambda: session, None, ws).run("sandbox", "")
        finally:
            await session.aclose()
    assert "  writable: nothing" in text.splitlines() and "file tools: no writes (read-only mode)" in text


# ---------------------------------------------------------------- interrupt
async def test_an_interrupt_kills_the_whole_sandboxed_tree(ws: Path, subreaper: None) -> None:
    import asyncio
    import random

    from isolation import own_processes_running

    seconds = f"{random.randint(600, 699)}.{random.randint(100, 999)}"
    command = f"(sleep {seconds} &); sleep {seconds}"
    with FakeProvider([_shell(command), Turn(text="stopped")]) as fake:
        session = await _session(fake, ws, approval="auto")
        try:
            async for event in session.run_turn("go"):
                if isinstance(event, ev.ToolCallStarted):
                    for _ in range(100):
                        await asyncio.sleep(0.05)
                        if len(own_processes_running(["sleep", seconds])) == 2:
                            break
                    assert session.interrupt_command()
        finally:
            await session.aclose()
    left = own_processes_running(["sleep", seconds])
    for proc in left:
        proc.kill()
    assert left == []
    assert "interrupted" in _result(fake, 1)


# ---------------------------------------------------------------- the escalation offer on a real screen
async def test_the_ui_shows_the_escalation_offer_and_the_answer_runs_it_outside(ws: Path, outside: Path) -> None:
    from uifakes import Harness

    target = outside / "from-the-ui.txt"
    with FakeProvider([_shell(f"echo ui > {target}"), Turn(text="all done")]) as fake:
        session = await _session(fake, ws, approval="auto")
        try:
            async with Harness(session, columns=120, rows=40) as h:  # type: ignore[arg-type]
                await h.type("write it\r")
                await h.wait_text("Run it again outside the sandbox?")
                screen = h.sink.text()
                assert "Allow shell?" in screen and "The sandbox refused a write outside" in screen and f"echo ui > {target}" in screen
                assert not target.exists()
                await h.type("y")
                await h.wait_text("all done")
        finally:
            await session.aclose()
    assert target.read_text() == "ui\n"


def test_a_run_later_file_a_command_creates_is_reported_to_the_model_and_the_user(ws: Path) -> None:
    import json

    with FakeProvider([_shell("echo 'echo pwned' > .envrc"), Turn(text="done")]) as fake:
        run = run_ketch(["-p", "go", "--approval", "auto", "--output-format", "stream-json", *adhoc(fake, WIRE)], ws)
    assert run.code == 0, run.stderr
    assert (ws / ".envrc").exists()  # it did not exist, so it was not read-only: reported, not prevented
    result = _result(fake, 1)
    assert f"[warning: this command created {ws / '.envrc'}" in result
    notices = [e for e in map(json.loads, run.stdout.splitlines()) if e["type"] == "notice"]
    assert any(".envrc" in n["text"] and n["level"] == "warning" for n in notices)
