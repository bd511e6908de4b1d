"""Host names with NUL or other control characters are refused before any connection: raw,
percent-encoded, IDNA-folded or inside a punycode label; in web_fetch URLs (the model's), base
URLs, MCP URLs, the registry and the search endpoint (config). End-to-end: the real binary,
a loopback listener the hostile URL would reach, and no connection at it. One host per surface
runs ``python -m ketch`` itself; the others a ketch process forked from the preloaded
interpreter (``ketch_processes``), which does not pay the SDK imports per case."""

from __future__ import annotations

import json
import socket
from collections.abc import Iterator
from pathlib import Path

import pytest
from fakeprovider import FakeProvider, ToolCall, Turn, tool_results
from hypothesis import given, settings
from hypothesis import strategies as st
from ketch_processes import Preloaded
from kettle import adhoc, run_ketch

from ketch.config.hostcheck import url_problem

HOSTILE_HOSTS = {
    "nul": "127.0.0.1\x00.example.com",
    "nul-end": "127.0.0.1\x00",
    "newline": "127.0.0.1\n.example.com",
    "cr": "127.0.0.1\r",
    "tab": "127.0.0.1\t",
    "del": "127.0.0.1\x7f",
    "c1-nel": "127.0.0.1\x85",
    "zero-width": "127.0.0\u200b.1",
    "bidi": "127.0.0.1\u202e",
    "pct-nul": "127.0.0.1%00.example.com",
    "pct-dot": "127%2e0%2e0%2e1",
    "pct-newline": "127.0.0.1%0a",
    "fullwidth-dots": "127\uff0e0\uff0e0\uff0e1",
    "ideographic-dots": "127\u30020\u30020\u30021",
    "halfwidth-dots": "127\uff610\uff610\uff611",
    "one-dot-leader": "127\u20240\u20240\u20241",
    "fullwidth-slash": "127.0.0.1\uff0fx",
    "punycode-nul": "xn--ab-\x00",
    "punycode-bad": "xn--zz-",
}


@pytest.mark.parametrize("name", list(HOSTILE_HOSTS))
def test_each_hostile_host_is_refused(name: str) -> None:
    problem = url_problem(f"http://{HOSTILE_HOSTS[name]}:8080/v1")
    assert problem is not None


@pytest.mark.parametrize("url", ["https://api.openai.com/v1", "http://localhost:11434/v1", "http://[::1]:8080/",
                                 "http://127.0.0.1:1234/v1", "https://bücher.de/", "http://xn--bcher-kva.de/",
                                 "https://example.com/search?q=%00%0a", "https://user:pw@example.com/"])
def test_ordinary_urls_pass(url: str) -> None:
    assert url_problem(url) is None


CONTROL = st.characters(codec="utf-8", categories=["Cc", "Cf", "Zl", "Zp"])


@settings(max_examples=300, deadline=None)
@given(left=st.from_regex(r"[a-z0-9]{1,10}", fullmatch=True), bad=CONTROL, right=st.from_regex(r"[a-z0-9.]{0,10}", fullmatch=True),
       encode=st.booleans())
def test_any_control_or_format_character_in_a_host_is_refused(left: str, bad: str, right: str, encode: bool) -> None:
    text = "".join(f"%{b:02X}" for b in bad.encode()) if encode else bad
    if encode and not (ord(bad) < 0x20 or 0x7F <= ord(bad) <= 0x9F):
        text = bad  # a percent-encoded format character is refused as percent-encoding anyway
    assert url_problem(f"http://{left}{text}{right}.com/") is not None


@settings(max_examples=200, deadline=None)
@given(host=st.from_regex(r"[a-z0-9]([a-z0-9-]{0,20}[a-z0-9])?(\.[a-z0-9]{1,10}){0,3}", fullmatch=True))
def test_plain_host_names_pass(host: str) -> None:
    assert url_problem(f"https://{host}/path?x=1") is None


# ---------------------------------------------------------------- end to end


@pytest.fixture
def listener() -> Iterator[tuple[socket.socket, int]]:
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(16)
    sock.setblocking(False)
    try:
        yield sock, sock.getsockname()[1]
    finally:
        sock.close()


def _connections(sock: socket.socket) -> int:
    count = 0
    while True:
        try:
            conn, _ = sock.accept()
        except BlockingIOError:
            return count
        conn.close()
        count += 1


SURFACES = {
    "base_url": lambda url: f'model = "x:m"\n[connections.x]\npreset = "openai-compatible"\nbase_url = {json.dumps(url)}\n',
    "mcp_url": lambda url: f"[mcp.servers.m]\nurl = {json.dumps(url)}\n",
    "registry_url": lambda url: f"registry_url = {json.dumps(url)}\n",
    "tavily_base_url": lambda url: f'[web_search]\nenabled = true\nsource = "tavily"\ntavily_base_url = {json.dumps(url)}\n',
}
REAL_EXEC_HOST = "nul"
"""The host whose cases run the binary itself (of the config surfaces, ``base_url``'s only; the
others: a preloaded fork, the same ``__main__`` reading the same files in a process of its own)."""
E2E_HOSTS = ["nul", "newline", "del", "zero-width", "pct-nul", "fullwidth-dots", "ideographic-dots", "punycode-nul"]


@pytest.mark.parametrize("surface", list(SURFACES))
@pytest.mark.parametrize("host", E2E_HOSTS)
def test_a_config_url_with_a_hostile_host_is_an_error_before_any_connection(
    tmp_path: Path, isolated_home: Path, listener, surface: str, host: str, preloaded_ketch: Preloaded
) -> None:
    sock, port = listener
    url = f"http://{HOSTILE_HOSTS[host]}:{port}/v1"
    user = isolated_home / "config" / "config.toml"
    user.write_text("titles = false\ncheckpoints = false\n" + SURFACES[surface](url))
    args = ["registry", "list"] if surface == "registry_url" else ["-p", "hello", "--output-format", "stream-json"]
    run = run_ketch(args, tmp_path, env={"TAVILY_API_KEY": "tvly-x", "OPENAI_API_KEY": "sk-x"},
                    subprocess_=True, forked_from=None if (host, surface) == (REAL_EXEC_HOST, "base_url") else preloaded_ketch)
    assert run.code != 0
    assert str(user) in run.stderr + run.stdout
    key = {"base_url": "connections.x.base_url", "mcp_url": "mcp.servers.m.url"}.get(surface, surface)
    assert key.split(".")[-1] in run.stderr + run.stdout
    assert _connections(sock) == 0


@pytest.mark.parametrize("host", list(HOSTILE_HOSTS))
def test_web_fetch_refuses_a_hostile_host_the_model_sends(tmp_path: Path, listener, host: str, preloaded_ketch: Preloaded) -> None:
    sock, port = listener
    url = f"http://{HOSTILE_HOSTS[host]}:{port}/secret"
    with FakeProvider() as fake:
        fake.add(Turn(tool_calls=[ToolCall("web_fetch", {"url": url})]), Turn(text="done"))
        run = run_ketch(["-p", "go", "--yolo", "--output-format", "stream-json", *adhoc(fake, "openai-chat")], tmp_path,
                        subprocess_=True, forked_from=None if host == REAL_EXEC_HOST else preloaded_ketch)
        ((_, result),) = tool_results(fake.model_requests[1])
    assert run.code == 0, run.stderr
    # Two layers may refuse: the argument byte check (core/arg_bytes.py) that runs before any
    # tool for raw control characters in any argument, or web_fetch's own host check.
    by_arg_check = "of web_fetch holds" in result and "so nothing was run" in result
    by_host_check = ("Refused" in result or "refused" in result) and (
        "nothing was fetched" in result or "Invalid URL" in result
    )
    assert by_arg_check or by_host_check, result
    assert _connections(sock) == 0
