"""The other launch sites under the sandbox: user hooks, stdio MCP servers (network on by
default, off per server) and the read-only git tools (nothing writable at all)."""

from __future__ import annotations

import shutil
import socket
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from ketch.extensions.hooks import HookRunner
from ketch.extensions.mcp import start_mcp_servers
from ketch.sandbox.detect import detect
from ketch.sandbox.policy import build_policy
from ketch.sandbox.runtime import Sandbox
from ketch.tools.base import ToolDeps, ToolSettings
from ketch.tools.git import git_status
from ketch.tools.workspace import Workspace

SERVERS = Path(__file__).parent / "mcp_servers"


@pytest.fixture
def outside() -> Iterator[Path]:
    path = Path(tempfile.mkdtemp(prefix="ketch-sites-", dir="/var/tmp"))
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


def _sandbox(ws: Path, mechanism: str = "auto") -> Sandbox:
    return Sandbox(build_policy("workspace-write", ws), detect(mechanism))  # type: ignore[arg-type]


@pytest.mark.parametrize("sandboxed", ["auto", "landlock", ""])
async def test_a_hook_runs_under_the_sandbox(tmp_path: Path, outside: Path, sandboxed: str) -> None:
    # Hooks fail closed (a non-zero exit blocks the call), so the hook records whether the
    # outside write was refused rather than failing on it.
    command = (f"echo in > hook-in.txt; if echo out > {outside}/hook-out.txt; then echo wrote > hook-result.txt; "
               "else echo refused > hook-result.txt; fi")
    runner = HookRunner({"before_tool": [{"command": command}]}, tmp_path, sandbox=_sandbox(tmp_path, sandboxed) if sandboxed else None)
    assert await runner.before_tool("shell", {"command": "ls"}) is None
    assert (tmp_path / "hook-in.txt").read_text() == "in\n"
    assert (outside / "hook-out.txt").exists() is not bool(sandboxed)
    assert (tmp_path / "hook-result.txt").read_text() == ("refused\n" if sandboxed else "wrote\n")


class _Listener:
    def __init__(self) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(8)
        self.port = self.sock.getsockname()[1]


@pytest.mark.parametrize("network", [None, False])
async def test_a_stdio_mcp_server_runs_under_the_sandbox_with_the_network_on_unless_configured(
    tmp_path: Path, outside: Path, network: bool | None
) -> None:
    listener = _Listener()
    report, escaped = tmp_path / "report.txt", outside / "mcp-out.txt"
    spec: dict[str, object] = {"command": sys.executable, "args": [str(SERVERS / "probe_stdio.py"), str(report), str(escaped), str(listener.port)], "cwd": str(tmp_path)}
    if network is not None:
        spec["network"] = network
    hub = await start_mcp_servers({"servers": {"probe": spec}, "timeout": 30}, sandbox=_sandbox(tmp_path))
    try:
        [status] = hub.status()
        assert status.state == "ready", status.error
    finally:
        await hub.aclose()
        listener.sock.close()
    lines = report.read_text().splitlines()
    assert not escaped.exists()
    assert lines[0].startswith("write refused")
    assert lines[1] == ("connect ok" if network is None else "connect refused Operation not permitted")


@dataclass
class _Ctx:
    deps: ToolDeps
    tool_call_id: str = "call-1"


async def test_the_read_only_git_tools_run_in_a_sandbox_that_writes_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))
    repo = tmp_path / "repo"
    repo.mkdir()
    subprocess.run(["git", "init", "-q", "-b", "main", str(repo)], check=True)
    (repo / "a.txt").write_text("a\n")
    sandbox = _sandbox(repo)
    launch = sandbox.wrap(["git", "status"], cwd=repo, read_only=True)
    assert launch.confined and ["--ro-bind", str(repo), str(repo)] == launch.argv[launch.argv.index(str(repo)) - 1 : launch.argv.index(str(repo)) + 2]
    assert "--bind" not in launch.argv
    ctx = _Ctx(ToolDeps(workspace=Workspace(repo), settings=ToolSettings(sandbox=sandbox)))
    assert "?? a.txt" in await git_status(ctx)  # type: ignore[arg-type]
    touched = subprocess.run(sandbox.wrap(["touch", "x"], cwd=repo, read_only=True).argv, capture_output=True, text=True, cwd=repo)
    assert "Read-only file system" in touched.stderr and not (repo / "x").exists()


async def test_a_program_and_workspace_under_tmp_stay_visible_over_the_scratch(outside: Path) -> None:
    """The session scratch is bound at /tmp; a workspace and a script that live under the real
    /tmp (a project checked out there, a CI clone) must still be seen inside the sandbox."""
    ws = Path(tempfile.mkdtemp(prefix="ketch-ws-", dir="/tmp"))
    scripts = Path(tempfile.mkdtemp(prefix="ketch-scripts-", dir="/tmp"))
    try:
        shutil.copy(SERVERS / "probe_stdio.py", scripts / "probe_stdio.py")
        listener = _Listener()
        report, escaped = ws / "report.txt", outside / "mcp-out.txt"
        spec = {"command": sys.executable, "args": [str(scripts / "probe_stdio.py"), str(report), str(escaped), str(listener.port)],
                "cwd": str(ws)}
        hub = await start_mcp_servers({"servers": {"probe": spec}, "timeout": 30}, sandbox=_sandbox(ws))
        try:
            [status] = hub.status()
            assert status.state == "ready", status.error
        finally:
            await hub.aclose()
            listener.sock.close()
        assert report.read_text().splitlines()[0].startswith("write refused")
        assert not escaped.exists()
    finally:
        shutil.rmtree(ws, ignore_errors=True)
        shutil.rmtree(scripts, ignore_errors=True)
