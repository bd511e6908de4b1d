"""Extensions through the real loop: MCP servers, plugin refusals and before-tool hooks."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from fakeprovider import FakeProvider, ToolCall, Turn, tool_names, tool_results
from kettle import adhoc, run_ketch, write_project_config

SERVERS = Path(__file__).parent / "mcp_servers"


@pytest.fixture(scope="module")
def http_mcp_url() -> Iterator[str]:
    """A real streamable-HTTP MCP server on 127.0.0.1, in its own process."""
    log = Path(subprocess.check_output([sys.executable, "-c", "import tempfile;print(tempfile.mkdtemp())"], text=True).strip()) / "h.log"
    proc = subprocess.Popen([sys.executable, str(SERVERS / "gamma_http.py"), str(log)], stdout=subprocess.PIPE, text=True)
    try:
        line = proc.stdout.readline() if proc.stdout else ""
        assert line.startswith("PORT "), line
        yield f"http://127.0.0.1:{int(line.split()[1])}/mcp"
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def _mcp_config(url: str) -> str:
    py = json.dumps(sys.executable)
    return f"""
[mcp.servers.alpha]
command = {py}
args = [{json.dumps(str(SERVERS / "alpha_stdio.py"))}]
timeout = 60

[mcp.servers.beta]
command = {py}
args = [{json.dumps(str(SERVERS / "beta_stdio.py"))}]
timeout = 60

[mcp.servers.crashy]
command = {py}
args = [{json.dumps(str(SERVERS / "crash_at_start.py"))}]
timeout = 60

[mcp.servers.web]
url = "{url}"
timeout = 60

[permissions]
alpha__echo = "allow"
"""


def test_mcp_tools_pass_the_gate_and_results_reach_the_provider(tmp_path: Path, http_mcp_url: str) -> None:
    write_project_config(tmp_path, _mcp_config(http_mcp_url))
    calls = [
        ToolCall("alpha__echo", {"text": "one"}),
        ToolCall("beta__echo", {"text": "two"}),
        ToolCall("web__echo", {"text": "three"}),
    ]
    with FakeProvider([Turn(tool_calls=calls), Turn(text="all echoed")]) as fake:
        run = run_ketch(["-p", "echo", "--output-format", "stream-json", *adhoc(fake, "openai-chat")], tmp_path)
    assert run.code == 0, run.stderr
    lines = [json.loads(line) for line in run.stdout.splitlines()]
    offered = tool_names(fake.model_requests[0])
    assert {"alpha__echo", "beta__echo", "web__echo"} <= set(offered)
    assert not any(name.startswith("crashy__") for name in offered)
    notices = [line["text"] for line in lines if line["type"] == "notice"]
    assert any("crashy" in text and "failed" in text for text in notices)
    contents = sorted(content for _, content in tool_results(fake.model_requests[1]))
    # alpha is allowed by a rule; beta and web need approval, which headless denies.
    assert any("alpha:one" in c for c in contents)
    assert sum("needs the user's approval" in c for c in contents) == 2, contents
    decided = {line["name"]: line["by"] for line in lines if line["type"] == "approval_resolved"}
    assert decided == {"alpha__echo": "rule", "beta__echo": "default", "web__echo": "default"}


def test_same_named_mcp_tools_both_work_under_yolo(tmp_path: Path, http_mcp_url: str) -> None:
    write_project_config(tmp_path, _mcp_config(http_mcp_url))
    calls = [ToolCall("alpha__echo", {"text": "x"}), ToolCall("beta__echo", {"text": "x"}), ToolCall("web__echo", {"text": "x"})]
    with FakeProvider([Turn(tool_calls=calls), Turn(text="ok")]) as fake:
        run = run_ketch(["-p", "echo", "--yolo", *adhoc(fake, "anthropic-messages")], tmp_path)
    assert run.code == 0, run.stderr
    contents = sorted(content for _, content in tool_results(fake.model_requests[1]))
    assert contents[0].startswith("alpha:x")
    assert any(c.startswith("beta") for c in contents) and any(c.startswith("gamma:x") for c in contents)


def _plugin(root: Path) -> None:
    manifest = {
        "name": "no-secrets",
        "version": "1.0.0",
        "description": "keeps .env files out of reach",
        "rules": [{"kind": "arg", "tool": "write_file", "arg": "path", "glob": "**/.env*", "reason": "env files hold secrets"}],
    }
    path = root / ".ketch" / "plugins" / "no-secrets.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(manifest))


def test_plugin_refusal_holds_under_yolo_and_the_model_hears_the_reason(tmp_path: Path) -> None:
    _plugin(tmp_path)
    script = [Turn(tool_calls=[ToolCall("write_file", {"path": "conf/.env", "content": "TOKEN=1"})]), Turn(text="refused")]
    with FakeProvider(script) as fake:
        run = run_ketch(["-p", "write env", "--yolo", "--output-format", "stream-json", *adhoc(fake, "openai-responses")], tmp_path)
    assert run.code == 0, run.stderr
    assert not (tmp_path / "conf" / ".env").exists()
    [(_, content)] = tool_results(fake.model_requests[1])
    assert "env files hold secrets" in content and "no-secrets" in content
    resolved = [json.loads(line) for line in run.stdout.splitlines() if '"approval_resolved"' in line]
    assert resolved and resolved[0]["by"] == "guard" and resolved[0]["decision"] == "deny"


def test_config_guard_refuses_a_shell_prefix_under_yolo(tmp_path: Path) -> None:
    write_project_config(tmp_path, '[[guards]]\nkind = "command_prefix"\nprefix = "touch"\nreason = "no touching"\n')
    script = [Turn(tool_calls=[ToolCall("shell", {"command": "echo hi && touch made.txt"})]), Turn(text="ok")]
    with FakeProvider(script) as fake:
        run = run_ketch(["-p", "touch", "--yolo", *adhoc(fake, "openai-chat")], tmp_path)
    assert run.code == 0, run.stderr
    assert not (tmp_path / "made.txt").exists()
    assert "no touching" in tool_results(fake.model_requests[1])[0][1]


def test_before_tool_hook_exiting_2_prevents_the_call(tmp_path: Path) -> None:
    hook = tmp_path / "hook.sh"
    hook.write_text("#!/bin/bash\ncat > \"$(dirname \"$0\")/hook-input.json\"\necho 'blocked by policy' >&2\nexit 2\n")
    hook.chmod(0o755)
    write_project_config(tmp_path, f'[[hooks.before_tool]]\ncommand = "{hook}"\nmatcher = "write_file"\n')
    script = [Turn(tool_calls=[ToolCall("write_file", {"path": "out.txt", "content": "x"})]), Turn(text="ok")]
    with FakeProvider(script) as fake:
        run = run_ketch(["-p", "write", "--yolo", *adhoc(fake, "openai-chat")], tmp_path)
    assert run.code == 0, run.stderr
    assert not (tmp_path / "out.txt").exists()
    assert "blocked by policy" in tool_results(fake.model_requests[1])[0][1]
    seen = json.loads((tmp_path / "hook-input.json").read_text())
    assert seen["tool"] == "write_file" and seen["args"]["path"] == "out.txt"


def test_mcp_list_shows_each_servers_state_and_tools(tmp_path: Path, http_mcp_url: str) -> None:
    write_project_config(tmp_path, _mcp_config(http_mcp_url))
    run = run_ketch(["mcp", "list"], tmp_path)
    assert run.code == 0, run.stderr
    rows = {line.split()[0]: line for line in run.stdout.splitlines() if line.strip()}
    assert "ready" in rows["alpha"] and "alpha__echo" in rows["alpha"]
    assert "ready" in rows["beta"] and "beta__echo" in rows["beta"]
    assert "ready" in rows["web"] and "web__echo" in rows["web"]
    assert "failed" in rows["crashy"]
