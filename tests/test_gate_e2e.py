"""The approval gate end to end: guards, permission rules and the user's answers, each
observed at the boundaries (bytes on disk, the events, the JSON the provider received)."""

from __future__ import annotations

import argparse
import ctypes
import json
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from fakeprovider import FakeProvider, ToolCall, Turn, tool_results
from kettle import adhoc, run_ketch, write_project_config

from ketch.protocol import events as ev
from ketch.frontends.assemble import build_session

WIRE = "openai-chat"


# ---------------------------------------------------------------- helpers
def _write(path: str, content: str = "x\n") -> Turn:
    return Turn(tool_calls=[ToolCall("write_file", {"path": path, "content": content})])


def _shell(command: str) -> Turn:
    return Turn(tool_calls=[ToolCall("shell", {"command": command})])


def _stream_events(stdout: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in stdout.splitlines() if line.strip()]


def _only_result(fake: FakeProvider, request_index: int) -> str:
    [(_, content)] = tool_results(fake.model_requests[request_index])
    return content


async def _interactive(fake: FakeProvider, cwd: Path, **flags: Any) -> Any:
    """An interactive session (as the TUI gets it) pointed at the fake provider."""
    args = argparse.Namespace(cwd=str(cwd), base_url=fake.base_url, wire=WIRE, model="fake-model", yolo=False, **flags)
    return await build_session(args, interactive=True)


Answer = Callable[[ev.ApprovalRequested], tuple[str, str]]


async def _turn(session: Any, prompt: str, answer: Answer | None = None) -> list[Any]:
    """Run one turn, answering every approval request with ``answer``; return all events."""
    seen: list[Any] = []
    async for event in session.run_turn(prompt):
        seen.append(event)
        if isinstance(event, ev.ApprovalRequested):
            assert answer is not None, f"unexpected approval request for {event.name}"
            decision, reason = answer(event)
            session.decide(event.request_id, decision, reason)
    return seen


def _of(kind: type, events: list[Any]) -> list[Any]:
    return [e for e in events if isinstance(e, kind)]


# ---------------------------------------------------------------- guards hold under --yolo
GUARD_REASON = "secrets never leave through the agent"


def _plugin_manifest(home: Path) -> None:
    manifest = {
        "name": "keep-secrets",
        "version": "1.0",
        "description": "no secret files",
        "rules": [{"kind": "arg", "tool": "write_file", "arg": "path", "glob": "**/secret*", "reason": GUARD_REASON}],
    }
    target = Path(os.environ["KETCH_CONFIG_DIR"]) / "plugins" / "keep-secrets.json"
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(json.dumps(manifest), encoding="utf-8")


def _config_guard(root: Path) -> None:
    write_project_config(
        root,
        f'guards = [{{kind = "arg", tool = "write_file", arg = "path", glob = "**/secret*", reason = "{GUARD_REASON}"}}]\n',
    )


@pytest.mark.parametrize("install", [_plugin_manifest, _config_guard], ids=["plugin-manifest", "config-guard"])
def test_guard_refusal_holds_under_yolo_and_the_model_reads_why(install: Callable[[Path], None], tmp_path: Path) -> None:
    install(tmp_path)
    with FakeProvider([_write("secret.txt", "k=v\n"), Turn(text="Could not write it.")]) as fake:
        run = run_ketch(["-p", "write the secret", "--yolo", "--output-format", "stream-json", *adhoc(fake, WIRE)], tmp_path)
    assert run.code == 0, run.stderr
    assert not (tmp_path / "secret.txt").exists()
    assert GUARD_REASON in _only_result(fake, 1)
    [resolved] = [e for e in _stream_events(run.stdout) if e["type"] == "approval_resolved"]
    assert (resolved["decision"], resolved["by"]) == ("deny", "guard")
    assert "keep-secrets rule 1" in resolved["rule"] or "config rule 1" in resolved["rule"]


# ---------------------------------------------------------------- permission rules decide without asking
async def test_allow_rule_writes_without_asking_and_names_the_rule(tmp_path: Path) -> None:
    write_project_config(tmp_path, '[permissions]\nwrite_file = "allow"\n')
    with FakeProvider([_write("notes.txt", "ok\n"), Turn(text="done")]) as fake:
        session = await _interactive(fake, tmp_path)
        try:
            seen = await _turn(session, "write notes")
        finally:
            await session.aclose()
    assert (tmp_path / "notes.txt").read_text() == "ok\n"
    assert _of(ev.ApprovalRequested, seen) == []
    [resolved] = _of(ev.ApprovalResolved, seen)
    assert (resolved.decision, resolved.by, resolved.name) == ("allow", "rule", "write_file")
    assert "write_file" in resolved.rule and "allow" in resolved.rule


async def test_deny_rule_refuses_the_command_without_asking(tmp_path: Path) -> None:
    write_project_config(tmp_path, '[permissions]\nshell = {"rm *" = "deny"}\n')
    (tmp_path / "keep.txt").write_text("precious\n")
    with FakeProvider([_shell("rm keep.txt"), Turn(text="not allowed")]) as fake:
        session = await _interactive(fake, tmp_path)
        try:
            seen = await _turn(session, "delete keep.txt")
        finally:
            await session.aclose()
    assert (tmp_path / "keep.txt").read_text() == "precious\n"
    assert _of(ev.ApprovalRequested, seen) == []
    [resolved] = _of(ev.ApprovalResolved, seen)
    assert (resolved.decision, resolved.by) == ("deny", "rule")
    assert "rm *" in resolved.rule
    assert "rm *" in _only_result(fake, 1) and "Denied" in _only_result(fake, 1)


# ---------------------------------------------------------------- the user's answers reach the tool
async def test_allow_once_writes_the_file_and_asks_again_next_time(tmp_path: Path) -> None:
    script = [_write("a.txt", "one\n"), Turn(text="first"), _write("a.txt", "one\n"), Turn(text="second")]
    with FakeProvider(script) as fake:
        session = await _interactive(fake, tmp_path)
        try:
            first = await _turn(session, "write a", lambda _r: ("allow", ""))
            assert (tmp_path / "a.txt").read_text() == "one\n"
            (tmp_path / "a.txt").unlink()
            second = await _turn(session, "again", lambda _r: ("allow", ""))
        finally:
            await session.aclose()
    [asked] = _of(ev.ApprovalRequested, first)
    assert asked.name == "write_file" and asked.args == {"path": "a.txt", "content": "one\n"}
    assert "+one" in asked.preview
    assert len(_of(ev.ApprovalRequested, second)) == 1, "allow once must not outlive the call"
    assert (tmp_path / "a.txt").read_text() == "one\n"
    assert [(r.decision, r.by) for r in _of(ev.ApprovalResolved, first)] == [("allow", "user")]


async def test_allow_for_session_is_not_asked_again_in_the_same_session(tmp_path: Path) -> None:
    script = [
        _shell("echo hi >> log.txt"), Turn(text="first"),
        _shell("echo hi >> log.txt"), Turn(text="second"),
        _shell("echo other >> log.txt"), Turn(text="third"),
    ]  # fmt: skip
    asked: list[ev.ApprovalRequested] = []

    def answer(request: ev.ApprovalRequested) -> tuple[str, str]:
        asked.append(request)
        return ("allow_session", "")

    with FakeProvider(script) as fake:
        session = await _interactive(fake, tmp_path)
        try:
            await _turn(session, "log", answer)
            second = await _turn(session, "log again", answer)
            assert len(asked) == 1, "the identical command was asked again"
            await _turn(session, "log something else", answer)
        finally:
            await session.aclose()
    assert (tmp_path / "log.txt").read_text() == "hi\nhi\nother\n"
    assert [r.args["command"] for r in asked] == ["echo hi >> log.txt", "echo other >> log.txt"]
    [resolved] = _of(ev.ApprovalResolved, second)
    assert (resolved.decision, resolved.by) == ("allow", "rule")
    assert "echo hi >> log.txt" in resolved.rule


async def test_deny_with_reason_leaves_no_file_and_the_model_reads_the_reason(tmp_path: Path) -> None:
    with FakeProvider([_write("b.txt"), Turn(text="ok, I will not")]) as fake:
        session = await _interactive(fake, tmp_path)
        try:
            seen = await _turn(session, "write b", lambda _r: ("deny", "use c.txt instead"))
        finally:
            await session.aclose()
    assert not (tmp_path / "b.txt").exists()
    assert len(_of(ev.ApprovalRequested, seen)) == 1
    [resolved] = _of(ev.ApprovalResolved, seen)
    assert (resolved.decision, resolved.by, resolved.reason) == ("deny", "user", "use c.txt instead")
    assert "use c.txt instead" in _only_result(fake, 1)
    assert _of(ev.TurnFinished, seen)[-1].text == "ok, I will not"


# ---------------------------------------------------------------- refusals inside the tools, through the loop
@pytest.mark.parametrize("host", ["127.0.0.1", "localhost"])
def test_web_fetch_refuses_loopback_and_the_model_sees_it(host: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with FakeProvider([Turn(text="unused")]) as target, FakeProvider() as fake:
        url = f"http://{host}:{target.port}/v1/models"
        fake.add(Turn(tool_calls=[ToolCall("web_fetch", {"url": url})]), Turn(text="blocked"))
        run = run_ketch(["-p", "fetch it", "--yolo", *adhoc(fake, WIRE)], tmp_path)
    assert run.code == 0, run.stderr
    assert target.requests == [], "web_fetch reached the loopback address"
    result = _only_result(fake, 1)
    assert "a loopback address" in result and "fake-model" not in result


class _OpenWatch:
    """Records every open of one file, by any path, through Linux inotify (IN_OPEN)."""

    IN_OPEN, IN_NONBLOCK = 0x20, 0o4000

    def __init__(self, path: Path) -> None:
        libc = ctypes.CDLL(None, use_errno=True)
        self.fd = libc.inotify_init1(self.IN_NONBLOCK)
        if self.fd < 0 or libc.inotify_add_watch(self.fd, os.fsencode(path), self.IN_OPEN) < 0:
            pytest.skip("inotify is not available")

    def opened(self) -> bool:
        try:
            return bool(os.read(self.fd, 4096))
        except BlockingIOError:
            return False
        finally:
            os.close(self.fd)


@pytest.mark.skipif(sys.platform != "linux", reason="inotify is Linux only")
@pytest.mark.parametrize("target", ["../outside.txt", "link-out", "link-passwd"])
def test_reading_outside_the_workspace_is_refused_before_any_io(target: str, tmp_path: Path) -> None:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    outside = tmp_path / "outside.txt"
    outside.write_text("TOPSECRET\n")
    (workspace / "link-out").symlink_to(outside)
    (workspace / "link-passwd").symlink_to("/etc/passwd")
    watch = _OpenWatch(outside)
    with FakeProvider([Turn(tool_calls=[ToolCall("read_file", {"path": target})]), Turn(text="cannot")]) as fake:
        run = run_ketch(["-p", "read it", *adhoc(fake, WIRE)], workspace)
    assert not watch.opened(), "the file outside the workspace was opened"
    assert run.code == 0, run.stderr
    result = _only_result(fake, 1)
    assert "TOPSECRET" not in result and "root:" not in result
    assert "outside the workspace" in result and "\n" not in result.strip()


async def test_allow_for_session_of_a_shell_command_is_literal() -> None:
    from ketch.gate.approval import ApprovalGate
    from ketch.gate.rules import RuleSet

    gate = ApprovalGate(kinds={"shell": "shell"}, key_args={"shell": "command"}, rules=RuleSet())
    gate.allow_for_session("shell", {"command": "ls *.py && echo done > out.txt"})
    allowed = await gate.evaluate("shell", {"command": "ls *.py && echo done > out.txt"})
    assert (allowed.action, allowed.by) == ("allow", "rule")
    for other in ("ls secret && echo done > out.txt", "ls *.py", "ls *.py && echo done > /etc/x"):
        assert (await gate.evaluate("shell", {"command": other})).action == "ask", other


# ---------------------------------------------------------------- the prompt says why it asks
async def test_the_approval_request_says_why_the_allow_rule_did_not_cover_the_command(tmp_path: Path) -> None:
    """An allow rule for `git status*` does not cover a redirection into a file: the request
    the user sees carries that reason, and denying it leaves no file."""
    write_project_config(tmp_path, '[permissions]\nshell = {"git status*" = "allow"}\n')
    with FakeProvider([_shell("git status > out.txt"), Turn(text="ok")]) as fake:
        session = await _interactive(fake, tmp_path)
        try:
            seen = await _turn(session, "status into a file", lambda _r: ("deny", ""))
        finally:
            await session.aclose()
    [asked] = _of(ev.ApprovalRequested, seen)
    assert "out.txt" in asked.reason or "redirect" in asked.reason.lower(), asked.reason
    assert not (tmp_path / "out.txt").exists()


async def test_an_ask_rule_is_named_in_the_request(tmp_path: Path) -> None:
    write_project_config(tmp_path, '[permissions]\nwrite_file = "ask"\n')
    with FakeProvider([_write("n.txt"), Turn(text="ok")]) as fake:
        session = await _interactive(fake, tmp_path)
        try:
            seen = await _turn(session, "write", lambda _r: ("deny", ""))
        finally:
            await session.aclose()
    [asked] = _of(ev.ApprovalRequested, seen)
    assert "`write_file = ask`" in asked.reason, asked.reason
