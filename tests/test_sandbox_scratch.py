"""The session's scratch space: every sandboxed command of a session sees the same writable
/tmp (and TMPDIR), a directory ketch made for the session and removes when it ends; writes
anywhere else the sandbox refuses fail loudly."""

from __future__ import annotations

import subprocess
import tempfile
from pathlib import Path

import pytest
from fakeprovider import FakeProvider, ToolCall, Turn, tool_results
from kettle import adhoc, run_ketch

from ketch.sandbox import detect
from ketch.sandbox.policy import build_policy
from ketch.sandbox.runtime import Sandbox, cleanup_tmp

WIRE = "openai-chat"


def _bubblewrap() -> detect.Mechanism:
    mechanism = detect.Detector().detect("bubblewrap")
    if mechanism.name != "bubblewrap":
        pytest.skip(f"no bubblewrap here: {mechanism.reason}")
    return mechanism


def _shell(command: str) -> Turn:
    return Turn(tool_calls=[ToolCall("shell", {"command": command})])


def test_two_commands_share_the_scratch_tmp_and_cleanup_removes_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    host_tmp = tmp_path / "host-tmp"
    host_tmp.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(host_tmp))  # where ketch makes the session's scratch directory
    ws = tmp_path / "ws"
    ws.mkdir()
    sandbox = Sandbox(build_policy("workspace-write", ws), _bubblewrap())

    def run(script: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(sandbox.wrap(["sh", "-c", script], cwd=ws).argv, capture_output=True, text=True, cwd=ws, timeout=30)

    first = run('echo x > /tmp/f && echo "$TMPDIR" > "$TMPDIR/where" && echo wrote-it')
    assert first.returncode == 0 and first.stdout == "wrote-it\n", first.stderr
    second = run("cat /tmp/f /tmp/where; echo w > in-ws")
    assert second.stdout == "x\n/tmp\n", second.stderr
    assert (ws / "in-ws").read_text() == "w\n"  # the workspace (under the host's /tmp here) stays writable
    [scratch] = [p for p in host_tmp.iterdir() if p.name.startswith("ketch-tmp-")]
    assert (scratch / "f").read_text() == "x\n"
    refused = run("echo y > /etc/ketch-scratch-probe")
    assert refused.returncode != 0 and "Read-only file system" in refused.stderr  # loud, not a throwaway mount
    cleanup_tmp(sandbox)
    assert not scratch.exists()


def test_a_headless_session_shares_tmp_between_commands_and_leaves_nothing_behind(tmp_path: Path, preloaded_ketch: object) -> None:
    _bubblewrap()
    host_tmp = tmp_path / "host-tmp"
    host_tmp.mkdir()
    ws = tmp_path / "ws"
    ws.mkdir()
    script = [_shell("echo x > /tmp/f && echo wrote-it"), _shell("cat /tmp/f"), Turn(text="done")]
    with FakeProvider(script) as fake:
        run = run_ketch(["-p", "go", "--approval", "auto", *adhoc(fake, WIRE)], ws, env={"TMPDIR": str(host_tmp)},
                       forked_from=preloaded_ketch)  # a ketch process of its own (its TMPDIR, its end: test_ketch_processes)
    assert run.code == 0, run.stderr
    assert "wrote-it" in tool_results(fake.model_requests[1])[-1][1]
    second = tool_results(fake.model_requests[2])[-1][1]
    assert "x" in second.splitlines() and "No such file" not in second, second
    assert [p.name for p in host_tmp.iterdir() if p.name.startswith("ketch-tmp-")] == []  # gone with the session
