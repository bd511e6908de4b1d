"""The demo server: side requests (titles) answered apart from the script; --port works."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import httpx
from fakeprovider_server import DEMO_TITLE, demo_script, serve
from isolation import reserved_port

from ketch.state.titles import TITLE_INSTRUCTIONS


def _chat(url: str, messages: list[dict], tools: bool) -> str:
    body: dict = {"model": "fake-model", "messages": messages, "stream": False}
    if tools:
        body["tools"] = [{"type": "function", "function": {"name": "write_file", "parameters": {"type": "object"}}}]
    reply = httpx.post(f"{url}/chat/completions", json=body, timeout=10).json()
    return reply["choices"][0]["message"].get("content") or ""


def test_a_title_request_does_not_use_up_a_scripted_turn() -> None:
    fake = serve(demo_script(slow=0))
    try:
        prompt = [{"role": "user", "content": "create hello.py"}]
        title = _chat(fake.base_url, [{"role": "system", "content": TITLE_INSTRUCTIONS}, *prompt], tools=False)
        first = _chat(fake.base_url, prompt, tools=True)
    finally:
        fake.stop(check=False)
    assert title == DEMO_TITLE
    assert first == "I'll create the file."


def test_port_flag_is_honoured() -> None:
    script = Path(__file__).parent / "fakeprovider_server.py"
    with reserved_port() as port:  # held until the server has it: nothing else can take it
        proc = subprocess.Popen([sys.executable, str(script), "echo", "--port", str(port)], stdout=subprocess.PIPE,
                                text=True)
        url = proc.stdout.readline().strip()  # type: ignore[union-attr]
    try:
        assert url == f"http://127.0.0.1:{port}/v1"
        assert _chat(f"http://127.0.0.1:{port}/v1", [{"role": "user", "content": "ping"}], tools=False) == "You said: ping"
    finally:
        proc.terminate()
        proc.wait(5)
    bad = subprocess.run([sys.executable, str(script), "--port", "70000"], capture_output=True, text=True)
    assert bad.returncode == 2 and "--port must be 0-65535" in bad.stderr
