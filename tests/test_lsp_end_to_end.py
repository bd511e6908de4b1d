"""Diagnostics after edits, end to end: the real ``ketch`` binary, the fake provider, and a
real Python language server (pylsp with pyflakes, from the test extra) or a scripted one
that never answers."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import sys
import time
from pathlib import Path
from typing import Any

import psutil
import pytest
from fakeprovider import FakeProvider, Hold, ToolCall, Turn, tool_results
from conftest import LSP_OFF
from kettle import adhoc, ketch_env, run_ketch

FAKE_SERVER = Path(__file__).parent / "fake_lsp_server.py"
WIRE = "openai-chat"


def _user_config(text: str) -> None:
    """The test's ``[lsp]`` table in place of the one that turns servers off in every other test."""
    path = Path(os.environ["KETCH_CONFIG_DIR"]) / "config.toml"
    base = path.read_text()
    assert base.endswith(LSP_OFF)
    path.write_text(base.removesuffix(LSP_OFF) + text, encoding="utf-8")


def _toml_list(words: list[str]) -> str:
    return "[" + ", ".join(json.dumps(w) for w in words) + "]"


def _events(stdout: str) -> list[dict]:
    return [json.loads(line) for line in stdout.splitlines() if line.strip()]


def _servers_of(marker: Path) -> list[int]:
    """Pids of fake servers started for this test (their command line carries ``marker``)."""
    found = []
    for proc in psutil.process_iter(["cmdline"]):
        with contextlib.suppress(psutil.Error):
            line = proc.info["cmdline"] or []
            if str(FAKE_SERVER) in line and str(marker) in line and proc.status() != psutil.STATUS_ZOMBIE:
                found.append(proc.pid)
    return found


def _result(request) -> str:
    """The newest tool result the request carries back to the model."""
    return tool_results(request)[-1][1]


def test_a_name_error_from_pylsp_reaches_the_model_and_the_fix_clears_it(tmp_path: Path, preloaded_ketch: Any) -> None:
    _user_config(f"\n[lsp]\nwait = 60\n[lsp.servers.python]\ncommand = {_toml_list([sys.executable, '-m', 'pylsp'])}\n")
    (tmp_path / "app.py").write_text("import os\n\nprint(os.name)\n")
    script = [
        Turn(tool_calls=[ToolCall("edit_file", {"path": "app.py", "old_string": "print(os.name)", "new_string": "print(os.name, undefined_thing)"})]),
        Turn(tool_calls=[ToolCall("edit_file", {"path": "app.py", "old_string": "undefined_thing", "new_string": "os.sep"})]),
        Turn(tool_calls=[ToolCall("diagnostics", {"path": "app.py"})]),
        Turn(text="done"),
    ]
    with FakeProvider(script) as fake:
        run = run_ketch(["-p", "go", "--yolo", "--output-format", "stream-json", *adhoc(fake, WIRE)], tmp_path,
                        forked_from=preloaded_ketch)  # a ketch process of its own, the imports preloaded
    assert run.code == 0, run.stderr
    assert (tmp_path / "app.py").read_text() == "import os\n\nprint(os.name, os.sep)\n"
    broke, fixed, listed = (_result(fake.model_requests[n]) for n in (1, 2, 3))
    assert "Edited app.py" in broke
    assert "app.py:3:16: error: undefined name 'undefined_thing' [pyflakes]" in broke
    assert "undefined_thing" not in fixed.replace("Edited app.py", "")
    assert "1 problem the python language server reported before this edit no longer appears" in fixed
    assert listed == "The python language server reports no errors or warnings in app.py."
    assert not [e for e in _events(run.stdout) if e["type"] == "language_server"]


def test_a_server_that_never_answers_holds_each_edit_only_for_the_wait(tmp_path: Path) -> None:
    _user_config(f"\n[lsp]\nwait = 1\nstart_timeout = 600\n[lsp.servers.python]\n"
                 f"command = {_toml_list([sys.executable, str(FAKE_SERVER), 'silent', str(tmp_path)])}\n")
    (tmp_path / "app.py").write_text("x = 1\n")
    script = [
        Turn(tool_calls=[ToolCall("edit_file", {"path": "app.py", "old_string": "x = 1", "new_string": "x = 2"})]),
        Turn(tool_calls=[ToolCall("write_file", {"path": "app.py", "content": "x = 3\n"})]),
        Turn(text="done"),
    ]
    started = time.monotonic()
    with FakeProvider(script) as fake:
        run = run_ketch(["-p", "go", "--yolo", "--output-format", "stream-json", *adhoc(fake, WIRE)], tmp_path)
    elapsed = time.monotonic() - started
    assert run.code == 0, run.stderr
    assert (tmp_path / "app.py").read_text() == "x = 3\n"
    first, second = _result(fake.model_requests[1]), _result(fake.model_requests[2])
    assert first.startswith("Edited app.py") and "language server python is still starting" in first
    assert second.startswith("Wrote app.py") and "still starting" in second
    assert elapsed < 120, elapsed  # a liveness bound: the handshake limit is 600 s, the edits did not wait for it
    assert _servers_of(tmp_path) == []  # the session's end stopped the server still in its handshake


def test_a_hung_handshake_drops_the_server_with_one_notice(tmp_path: Path) -> None:
    _user_config(f"\n[lsp]\nwait = 60\nstart_timeout = 1\n[lsp.servers.python]\n"
                 f"command = {_toml_list([sys.executable, str(FAKE_SERVER), 'silent', str(tmp_path)])}\n")
    (tmp_path / "app.py").write_text("x = 1\n")
    script = [
        Turn(tool_calls=[ToolCall("edit_file", {"path": "app.py", "old_string": "x = 1", "new_string": "x = 2"})]),
        Turn(tool_calls=[ToolCall("edit_file", {"path": "app.py", "old_string": "x = 2", "new_string": "x = 3"})]),
        Turn(text="done"),
    ]
    with FakeProvider(script) as fake:
        run = run_ketch(["-p", "go", "--yolo", "--output-format", "stream-json", *adhoc(fake, WIRE)], tmp_path)
    assert run.code == 0, run.stderr
    assert (tmp_path / "app.py").read_text() == "x = 3\n"
    first, second = _result(fake.model_requests[1]), _result(fake.model_requests[2])
    assert "language server python is off for this session; it did not answer the LSP handshake within 1 s" in first
    assert second == "Edited app.py: +1 -1 (1 line now)."  # the drop is said once, in the first result
    notices = [e for e in _events(run.stdout) if e["type"] == "language_server"]
    assert len(notices) == 1, notices
    assert notices[0]["server"] == "python" and notices[0]["state"] == "dropped" and notices[0]["level"] == "warning"
    assert _servers_of(tmp_path) == []  # the dropped server was killed


@pytest.mark.parametrize("mode, confined", [("workspace-write", True), ("full-access", False)])
def test_a_server_runs_inside_the_sandbox_without_write_access(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                mode: str, confined: bool) -> None:
    _user_config(f"\n[lsp]\nwait = 60\n[lsp.servers.python]\n"
                 f"command = {_toml_list([sys.executable, str(FAKE_SERVER), 'pull', str(tmp_path)])}\n")
    touched = tmp_path / "touched.txt"
    monkeypatch.setenv("FAKE_LSP_TOUCH", str(touched))
    (tmp_path / "app.py").write_text("x = 1\n")
    script = [
        Turn(tool_calls=[ToolCall("edit_file", {"path": "app.py", "old_string": "x = 1", "new_string": "x = BAD"})]),
        Turn(text="done"),
    ]
    with FakeProvider(script) as fake:
        run = run_ketch(["-p", "go", "--yolo", "--sandbox", mode, *adhoc(fake, WIRE)], tmp_path)
    assert run.code == 0, run.stderr
    assert "app.py:1:5: error: BAD is not allowed here [fake]" in _result(fake.model_requests[1])  # it ran
    assert touched.exists() is not confined
    assert _servers_of(tmp_path) == []


def test_no_server_outlives_a_kill_9_of_ketch(tmp_path: Path, tmp_path_factory: pytest.TempPathFactory, preloaded_ketch: Any) -> None:
    """ketch is a process forked from the preloaded interpreter (kill -9 of the binary itself:
    tests/test_durable_processes.py)."""
    _user_config(f"\n[lsp]\nwait = 1\nstart_timeout = 600\n[lsp.servers.python]\n"
                 f"command = {_toml_list([sys.executable, str(FAKE_SERVER), 'stubborn', str(tmp_path)])}\n")
    (tmp_path / "app.py").write_text("x = 1\n")
    held = Hold("after the edit")
    script = [
        Turn(tool_calls=[ToolCall("edit_file", {"path": "app.py", "old_string": "x = 1", "new_string": "x = 2"})]),
        Turn(text="never sent", hold=held),
    ]
    with FakeProvider(script) as fake:
        ketch = preloaded_ketch.start(["-p", "go", "--yolo", *adhoc(fake, WIRE)], tmp_path, ketch_env(),
                                      tmp_path_factory.mktemp("out"))
        try:
            assert held.wait_reached(120)
            assert _servers_of(tmp_path), "the server should be running while the turn goes on"
        finally:
            os.kill(ketch.pid, signal.SIGKILL)
            ketch.wait(30)
            held.release()
        deadline = time.monotonic() + 30
        while _servers_of(tmp_path) and time.monotonic() < deadline:
            time.sleep(0.1)
    assert _servers_of(tmp_path) == []
