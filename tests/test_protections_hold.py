"""Protections that held with no test to notice if they broke: each test here fails when
its protection does (the jail's sibling-prefix case, the gate's defaults for network, MCP
and unknown tools, web_fetch dialling the address it checked)."""

from __future__ import annotations

import json
import socket
import sys
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from fakeprovider import FakeProvider, ToolCall, Turn, tool_results
from kettle import adhoc, run_ketch
from pydantic_ai.exceptions import ToolFailed

from ketch.gate.approval import HEADLESS_DENIAL, ApprovalGate
from ketch.tools.base import ToolDeps, ToolSettings
from ketch.tools.files import list_dir, read_file, write_file
from ketch.tools.search import find_rg, search
from ketch.tools.web import web_fetch
from ketch.tools.workspace import Workspace

SERVERS = Path(__file__).parent / "mcp_servers"
SECRET = "sibling-secret-4b1d"


@dataclass
class Ctx:
    deps: ToolDeps
    tool_call_id: str = "call-p"


# ------------------------------------------------------------------ the jail: proj and proj-secrets


@pytest.fixture
def siblings(tmp_path: Path) -> tuple[Path, Path]:
    proj, secrets = tmp_path / "proj", tmp_path / "proj-secrets"
    proj.mkdir()
    secrets.mkdir()
    (proj / "readme.txt").write_text("inside\n")
    (secrets / "key.txt").write_text(f"{SECRET}\n")
    (proj / "link").symlink_to(secrets)
    (proj / "link-file").symlink_to(secrets / "key.txt")
    return proj, secrets


@pytest.mark.parametrize("spelling", [
    "../proj-secrets/key.txt", "{secrets}/key.txt", "{proj}-secrets/key.txt", "{proj}/../proj-secrets/key.txt",
    "link/key.txt", "link-file", "./link/../link/key.txt",
])
async def test_a_sibling_whose_name_starts_with_the_workspace_name_is_outside(
    siblings: tuple[Path, Path], spelling: str
) -> None:
    proj, secrets = siblings
    path = spelling.format(proj=proj, secrets=secrets)
    workspace = Workspace(proj)
    ctx = Ctx(ToolDeps(workspace=workspace))
    assert not workspace.contains(secrets / "key.txt") and not workspace.contains(secrets)
    with pytest.raises(ToolFailed) as caught:
        await read_file(ctx, path)
    assert SECRET not in caught.value.message
    with pytest.raises(ToolFailed):
        await write_file(ctx, path, "overwritten\n")
    assert (secrets / "key.txt").read_text() == f"{SECRET}\n"
    for rg in (find_rg(), None):
        with pytest.raises(ToolFailed):
            await search(workspace, "sibling", path, rg=rg)
    with pytest.raises(ToolFailed):
        await list_dir(ctx, str(Path(path).parent) if "/" in path else "link")


async def test_searching_the_whole_workspace_never_shows_the_sibling(siblings: tuple[Path, Path]) -> None:
    proj, _ = siblings
    for rg in (find_rg(), None):
        assert SECRET not in await search(Workspace(proj), "sibling|secret", rg=rg)


def test_headless_read_of_the_sibling_sends_the_provider_a_refusal_not_the_secret(siblings: tuple[Path, Path]) -> None:
    proj, secrets = siblings
    calls = [ToolCall("read_file", {"path": "../proj-secrets/key.txt"}), ToolCall("read_file", {"path": str(secrets / "key.txt")})]
    with FakeProvider([Turn(tool_calls=calls), Turn(text="Could not.")]) as fake:
        run = run_ketch(["-p", "read the key", "--yolo", *adhoc(fake, "openai-chat")], proj)
    assert run.code == 0, run.stderr
    results = [text for _, text in tool_results(fake.model_requests[1])]
    assert len(results) == 2 and all("outside" in text for text in results), results
    assert all(SECRET not in json.dumps(request.body) for request in fake.model_requests)


# ------------------------------------------------------------------ the gate's defaults


@pytest.mark.parametrize(("kinds", "tool"), [
    ({"read_file": "read"}, "some_new_tool"),  # a tool the gate was never told about
    ({"odd": "reader"}, "odd"),  # a kind the gate does not know
    ({"odd": "Read"}, "odd"),
    ({"odd": ""}, "odd"),
    ({"fetch": "network"}, "web_fetch"),
    ({"web_fetch": "network"}, "web_fetch"),
    ({"srv__tool": "mcp"}, "srv__tool"),
])
async def test_unknown_network_and_mcp_tools_ask_and_never_pass_as_reads(kinds: dict[str, str], tool: str) -> None:
    gate = ApprovalGate(kinds=kinds, key_args={})
    decision = await gate.evaluate(tool, {})
    assert decision.action == "ask" and decision.by == "default"


def _user_config(home: Path, extra: str) -> None:
    config = home / "config" / "config.toml"
    config.write_text(config.read_text() + extra)


def test_headless_web_fetch_is_denied_without_yolo_and_reaches_the_tool_with_it(tmp_path: Path, preloaded_ketch: Any) -> None:
    url = "http://127.0.0.1:9/never"
    script = [Turn(tool_calls=[ToolCall("web_fetch", {"url": url})]), Turn(text="ok")]
    with FakeProvider(script) as fake:
        run = run_ketch(["-p", "fetch it", *adhoc(fake, "openai-chat")], tmp_path, forked_from=preloaded_ketch)  # a process of its own
    assert run.code == 0, run.stderr
    [(_, denied)] = tool_results(fake.model_requests[1])
    assert HEADLESS_DENIAL in denied
    with FakeProvider(list(script)) as fake:
        run = run_ketch(["-p", "fetch it", "--yolo", *adhoc(fake, "openai-chat")], tmp_path)
    [(_, reached)] = tool_results(fake.model_requests[1])
    assert HEADLESS_DENIAL not in reached and "loopback" in reached  # the tool ran: netguard refused


def test_headless_mcp_tool_from_the_users_own_config_is_denied_without_yolo(tmp_path: Path, isolated_home: Path, preloaded_ketch: Any) -> None:
    _user_config(isolated_home, (
        f"\n[mcp.servers.alpha]\ncommand = {json.dumps(sys.executable)}\n"
        f"args = [{json.dumps(str(SERVERS / 'alpha_stdio.py'))}]\ntimeout = 60\n"
    ))
    script = [Turn(tool_calls=[ToolCall("alpha__echo", {"text": "ran"})]), Turn(text="ok")]
    with FakeProvider(script) as fake:
        run = run_ketch(["-p", "echo", *adhoc(fake, "openai-chat")], tmp_path, forked_from=preloaded_ketch)  # a process of its own
    assert run.code == 0, run.stderr
    [(_, denied)] = tool_results(fake.model_requests[1])
    assert HEADLESS_DENIAL in denied and "alpha:ran" not in denied
    with FakeProvider(list(script)) as fake:
        run_ketch(["-p", "echo", "--yolo", *adhoc(fake, "openai-chat")], tmp_path)
    [(_, reached)] = tool_results(fake.model_requests[1])
    assert "alpha:ran" in reached


# ------------------------------------------------------------------ web_fetch dials what it checked


class _Recorder(BaseHTTPRequestHandler):
    hits: list[str] = []

    def do_GET(self) -> None:  # noqa: N802
        type(self).hits.append(self.path)
        body = b"private data from loopback"
        self.send_response(200)
        self.send_header("Content-Type", "text/plain")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def loopback_server() -> Iterator[tuple[int, list[str]]]:
    _Recorder.hits = []
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _Recorder)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield httpd.server_address[1], _Recorder.hits
    finally:
        httpd.shutdown()
        httpd.server_close()


async def test_web_fetch_connects_to_the_address_it_checked_when_dns_changes_its_answer(
    loopback_server: tuple[int, list[str]], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The first answer is public (passes the check); every later one is 127.0.0.1, where a
    server waits. A fetch that resolved again to connect would reach it."""
    port, hits = loopback_server
    answers: list[str] = []
    real_getaddrinfo = socket.getaddrinfo

    def rebinding(host: object, *args: object, **kwargs: object) -> object:
        if host != "rebind.example":
            return real_getaddrinfo(host, *args, **kwargs)  # type: ignore[arg-type]
        ip = "93.184.216.34" if not answers else "127.0.0.1"
        answers.append(ip)
        return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", (ip, port))]

    dialled: list[object] = []
    guarded_connect = socket.socket.connect  # the conftest's loopback-only connect

    def recording_connect(self: socket.socket, address: object) -> object:
        dialled.append(address)
        return guarded_connect(self, address)

    monkeypatch.setattr(socket, "getaddrinfo", rebinding)
    monkeypatch.setattr(socket.socket, "connect", recording_connect)
    ctx = Ctx(ToolDeps(workspace=None, settings=ToolSettings(web_timeout_s=5)))
    with pytest.raises(ToolFailed) as caught:
        await web_fetch(ctx, f"http://rebind.example:{port}/secret")
    assert hits == [], "the fetch reached the loopback server the second answer named"
    assert "private data" not in caught.value.message
    assert answers == ["93.184.216.34"], "the name was resolved again after the check"
    assert dialled == [("93.184.216.34", port)]
