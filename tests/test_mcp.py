"""MCP servers through ketch.extensions.mcp: real stdio and streamable-HTTP servers in subprocesses.

Slow-ish (about 8-10 s on two cores): every server is a Python process importing the MCP SDK.
The servers of the main scenario start once per module.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import psutil
import pytest
import pytest_asyncio
from pydantic_ai import Agent
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart, ToolReturnPart
from pydantic_ai.models.function import AgentInfo, FunctionModel

from ketch.extensions.mcp import (
    TOOL_NAME_PATTERN,
    ServerStatus,
    namespaced_tool_name,
    start_mcp_servers,
)

SERVERS = Path(__file__).parent / "mcp_servers"
ENV_SECRET = "sk-env-secret-1234567890"
HEADER_SECRET = "hdr-secret-0987654321"
CRASH_SECRET = "crash-secret-5555"

in_module_loop = pytest.mark.asyncio(loop_scope="module")
"""Tests sharing the module's servers run on the loop those servers were started on."""


def _stdio(script: str, **extra: object) -> dict[str, object]:
    return {"command": sys.executable, "args": [str(SERVERS / script)], **extra}


@pytest.fixture(scope="module")
def http_server(tmp_path_factory: pytest.TempPathFactory):
    """The streamable-HTTP server in its own process; yields (url, header log path)."""
    log = tmp_path_factory.mktemp("gamma") / "headers.log"
    proc = subprocess.Popen(
        [sys.executable, str(SERVERS / "gamma_http.py"), str(log)],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        line = proc.stdout.readline() if proc.stdout else ""
        assert line.startswith("PORT "), f"http server did not start: {line!r}"
        yield f"http://127.0.0.1:{int(line.split()[1])}/mcp", log
    finally:
        proc.terminate()
        proc.wait(timeout=10)


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def hub(http_server):
    url, _ = http_server
    config = {
        "servers": {
            "alpha": _stdio("alpha_stdio.py", env={"PROBE_TOKEN": ENV_SECRET}),
            "beta": _stdio("beta_stdio.py"),
            "crashy": _stdio("crash_at_start.py", env={"CRASH_TOKEN": CRASH_SECRET}),
            "missing": {"command": str(SERVERS / "no-such-server")},
            "web": {"url": url, "headers": {"X-Probe": HEADER_SECRET}},
            "quiet": _stdio("silent_stdio.py", timeout=3),
            "lost": {"url": url.replace("/mcp", "/nowhere") + "?token=" + HEADER_SECRET},
            "closed": {"url": "http://127.0.0.1:9/mcp"},
        },
        "timeout": 20,
    }
    hub = await start_mcp_servers(config)
    yield hub
    await hub.aclose()


def _by_name(statuses: list[ServerStatus]) -> dict[str, ServerStatus]:
    return {status.name: status for status in statuses}


@in_module_loop
async def test_status_reports_ready_servers_with_namespaced_tools_and_failed_ones_with_a_reason(hub, http_server):
    url, _ = http_server
    statuses = _by_name(hub.status())
    assert [s.name for s in hub.status()] == ["alpha", "beta", "crashy", "missing", "web", "quiet", "lost", "closed"]
    assert statuses["alpha"] == ServerStatus(
        "alpha", "ready", tools=["alpha__add", "alpha__echo", "alpha__env_probe"], transport="stdio"
    )
    assert statuses["beta"] == ServerStatus("beta", "ready", tools=["beta__die", "beta__echo"], transport="stdio")
    assert statuses["web"] == ServerStatus("web", "ready", tools=["web__echo"], transport="http")
    crashy = statuses["crashy"]
    assert (crashy.state, crashy.tools) == ("failed", [])
    assert crashy.error == "exited during start (crash_at_start: refusing to start with token ***)"
    assert statuses["missing"].state == "failed"
    assert statuses["missing"].error == f"command not found: {SERVERS / 'no-such-server'}"
    assert statuses["quiet"].state == "failed"
    assert statuses["quiet"].error.startswith("did not answer within 3 s")
    assert statuses["lost"].error == f"{url.replace('/mcp', '/nowhere')}: Not Found"
    assert statuses["closed"].error == "could not connect to http://127.0.0.1:9/mcp"
    assert len(hub.toolsets) == 3


@in_module_loop
async def test_no_secret_from_env_or_headers_appears_in_any_status(hub):
    text = repr(hub.status())
    for secret in (ENV_SECRET, HEADER_SECRET, CRASH_SECRET):
        assert secret not in text
    assert all("\n" not in s.error for s in hub.status())


def _scripted_model(calls: list[tuple[str, dict]]) -> tuple[FunctionModel, list[list[str]]]:
    """A model that makes the given tool calls in its first response, then answers with the results."""
    seen_tools: list[list[str]] = []

    def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        seen_tools.append(sorted(t.name for t in info.function_tools))
        returns = [p for m in messages for p in m.parts if isinstance(p, ToolReturnPart)]
        if not returns:
            return ModelResponse(
                parts=[ToolCallPart(name, args, tool_call_id=f"c{i}") for i, (name, args) in enumerate(calls)]
            )
        return ModelResponse(parts=[TextPart(" | ".join(f"{r.tool_name}={r.content}" for r in returns))])

    return FunctionModel(respond), seen_tools


@in_module_loop
async def test_same_named_tools_on_two_servers_both_work_through_an_agent(hub):
    model, seen_tools = _scripted_model(
        [("alpha__echo", {"text": "hello"}), ("beta__echo", {"text": "hello"}), ("alpha__add", {"a": 2, "b": 40})]
    )
    result = await Agent(model, toolsets=hub.toolsets).run("go")
    assert result.output == "alpha__echo=alpha:hello | beta__echo=beta:olleh | alpha__add=42"
    assert seen_tools[0] == [
        "alpha__add", "alpha__echo", "alpha__env_probe", "beta__die", "beta__echo", "web__echo",
    ]
    assert all(TOOL_NAME_PATTERN.match(name) for name in seen_tools[0])


@in_module_loop
async def test_http_server_tool_works_and_receives_configured_headers(hub, http_server):
    _, header_log = http_server
    model, _ = _scripted_model([("web__echo", {"text": "ping"})])
    result = await Agent(model, toolsets=hub.toolsets).run("go")
    assert result.output == "web__echo=gamma:ping"
    assert HEADER_SECRET in header_log.read_text().splitlines()


@in_module_loop
async def test_configured_env_reaches_the_stdio_server(hub):
    model, _ = _scripted_model([("alpha__env_probe", {"name": "PROBE_TOKEN"})])
    result = await Agent(model, toolsets=hub.toolsets).run("go")
    assert result.output == f"alpha__env_probe={ENV_SECRET}"


@in_module_loop
async def test_tool_origin_maps_namespaced_names_back(hub):
    assert hub.tool_origin("beta__echo") == ("beta", "echo")
    assert hub.tool_origin("alpha__add") == ("alpha", "add")
    assert hub.tool_origin("read_file") is None


def _server_processes(script: str, *, exclude: set[int] = frozenset()) -> list[psutil.Process]:
    """Live descendants of this test process whose command line mentions ``script``."""
    me = psutil.Process(os.getpid())
    found = []
    for child in me.children(recursive=True):
        if child.pid in exclude:
            continue
        try:
            if child.status() != psutil.STATUS_ZOMBIE and any(script in part for part in child.cmdline()):
                found.append(child)
        except psutil.NoSuchProcess:
            continue
    return found


@in_module_loop
async def test_failed_servers_leave_no_process_behind(hub):
    assert _server_processes("silent_stdio.py") == []
    assert _server_processes("crash_at_start.py") == []


@in_module_loop
async def test_server_dying_mid_session_is_a_tool_failure_and_close_stops_the_rest():
    before = {p.pid for p in _server_processes("_stdio.py")}
    hub = await start_mcp_servers(
        {"servers": {"keeper": _stdio("beta_stdio.py"), "doomed": _stdio("beta_stdio.py")}}, timeout=20
    )
    try:
        assert [s.state for s in hub.status()] == ["ready", "ready"]
        assert len(_server_processes("beta_stdio.py", exclude=before)) == 2
        model, _ = _scripted_model([("doomed__die", {}), ("keeper__echo", {"text": "ok"})])
        result = await Agent(model, toolsets=hub.toolsets).run("go")
        assert result.output == "doomed__die=Connection closed | keeper__echo=beta:ko"
    finally:
        await hub.aclose()
    assert _server_processes("beta_stdio.py", exclude=before) == []


@in_module_loop
async def test_invalid_entries_fail_without_starting_anything():
    hub = await start_mcp_servers({"servers": {"empty": {}, "ftp": {"url": "ftp://example.invalid/x"}}})
    statuses = _by_name(hub.status())
    assert statuses["empty"].error == "needs either 'command' or 'url' in its configuration"
    assert statuses["ftp"].state == "failed"
    assert "http:// or https://" in statuses["ftp"].error
    assert hub.toolsets == []
    await hub.aclose()


def test_namespaced_names_are_provider_safe_and_distinct():
    assert namespaced_tool_name("my server", "files.read") == "my_server__files_read"
    long_a = namespaced_tool_name("s", "x" * 80 + "a")
    long_b = namespaced_tool_name("s", "x" * 80 + "b")
    assert long_a != long_b
    assert all(TOOL_NAME_PATTERN.match(n) for n in (long_a, long_b))
