"""Tracing through a real ``ketch -p`` against the fake provider, exported over OTLP/HTTP to a
receiver this test runs on 127.0.0.1: the spans that arrive (names, parent links, token
counts), that no key appears in them, and that nothing is traced or imported when off."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("opentelemetry.sdk")
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest  # noqa: E402

from fakeprovider import FakeProvider, ToolCall, Turn  # noqa: E402
from kettle import adhoc, ketch_env  # noqa: E402

SECRET = "sk-test-0123456789abcdefSECRET"


class Receiver:
    def __init__(self) -> None:
        self.bodies: list[bytes] = []
        self.paths: list[str] = []
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                receiver.bodies.append(body)
                receiver.paths.append(self.path)
                self.send_response(200)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def spans(self) -> list[Any]:
        out = []
        for body in self.bodies:
            request = ExportTraceServiceRequest.FromString(body)
            for resource in request.resource_spans:
                for scope in resource.scope_spans:
                    out.extend(scope.spans)
        return out

    def close(self) -> None:
        self.server.shutdown()


def _attrs(span: Any) -> dict[str, Any]:
    out = {}
    for kv in span.attributes:
        value = kv.value
        out[kv.key] = value.string_value or value.int_value or value.double_value or value.bool_value
    return out


def _run(tmp_path: Path, fake: FakeProvider, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "ketch", "-p", "read it", "--yolo", *adhoc(fake, "openai-chat"), "--api-key-env", "MY_KEY"],
        cwd=tmp_path, env=ketch_env({"MY_KEY": SECRET, **env}), capture_output=True, text=True, timeout=60,
    )


def test_a_traced_turn_arrives_with_its_model_request_tool_call_and_gate_decision_and_no_key(tmp_path: Path) -> None:
    (tmp_path / "a.txt").write_text(f"alpha {SECRET}\n")  # the key even sits in a file the model reads
    receiver = Receiver()
    try:
        script = [Turn(tool_calls=[ToolCall("read_file", {"path": "a.txt"}, id="r1")]), Turn(text="Read it.")]
        with FakeProvider(script) as fake:
            run = _run(tmp_path, fake, {"OTEL_EXPORTER_OTLP_ENDPOINT": receiver.url})
        assert run.returncode == 0, run.stderr
        spans = receiver.spans()
    finally:
        receiver.close()
    assert set(receiver.paths) == {"/v1/traces"}
    by_id = {s.span_id: s for s in spans}
    names = [s.name for s in spans]
    [turn] = [s for s in spans if s.name == "ketch.turn"]
    chats = [s for s in spans if s.name.startswith("chat ")]
    tools = [s for s in spans if "read_file" in s.name]
    assert len(chats) == 2 and tools, names

    def ancestors(span: Any) -> list[str]:
        chain = []
        while span.parent_span_id and span.parent_span_id in by_id:
            span = by_id[span.parent_span_id]
            chain.append(span.name)
        return chain

    assert "ketch.turn" in ancestors(chats[0]) and "ketch.turn" in ancestors(tools[0])
    usage = _attrs(chats[0])
    assert usage.get("gen_ai.usage.input_tokens", 0) > 0 and "gen_ai.usage.output_tokens" in usage
    turn_attrs = _attrs(turn)
    assert turn_attrs["ketch.reason"] == "done" and turn_attrs["ketch.model"] == "adhoc:fake-model"
    assert turn_attrs["ketch.input_tokens"] >= usage["gen_ai.usage.input_tokens"]
    raw = b"".join(receiver.bodies)
    assert SECRET.encode() not in raw
    assert b"alpha" not in raw  # content capture is off: no tool output in the spans


def test_capture_content_is_the_users_choice_and_a_repository_cannot_turn_tracing_on(tmp_path: Path, isolated_home: Path) -> None:
    receiver = Receiver()
    try:
        (tmp_path / ".ketch").mkdir()
        (tmp_path / ".ketch" / "config.toml").write_text(f'[telemetry]\notlp_endpoint = "{receiver.url}"\ncapture_content = true\n')
        with FakeProvider([Turn(text="hello")]) as fake:
            run = _run(tmp_path, fake, {})
        assert run.returncode == 0, run.stderr
        assert receiver.bodies == []  # the repository's endpoint is ignored
        config = isolated_home / "config" / "config.toml"
        config.write_text(config.read_text() + f'\n[telemetry]\notlp_endpoint = "{receiver.url}"\ncapture_content = true\n')
        (tmp_path / "a.txt").write_text(f"alpha {SECRET}\n")
        script = [Turn(tool_calls=[ToolCall("read_file", {"path": "a.txt"}, id="r1")]), Turn(text="hello from the model")]
        with FakeProvider(script) as fake:
            run = _run(tmp_path, fake, {})
        assert run.returncode == 0, run.stderr
        raw = b"".join(receiver.bodies)
    finally:
        receiver.close()
    assert b"hello from the model" in raw and b"alpha" in raw  # content captured, as the user asked
    assert SECRET.encode() not in raw  # but never the key, even inside a tool's output


def test_without_an_endpoint_a_turn_imports_nothing_of_opentelemetrys_sdk(tmp_path: Path) -> None:
    with FakeProvider([Turn(text="hi")]) as fake:
        code = ("import sys; from ketch.frontends.cli import main; "
                f"rc = main(['-p', 'hi', *{adhoc(fake, 'openai-chat')!r}]); "
                "print(rc, sorted(m for m in sys.modules if m.startswith('opentelemetry.sdk')))")
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=ketch_env(), cwd=tmp_path, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip().endswith("0 []"), out.stdout


def test_a_collector_that_refuses_connections_leaves_no_text_on_stderr_and_the_run_ends(tmp_path: Path) -> None:
    """A port bound and held without listening refuses every connection: the exporter's failures
    (and its retries) stay off the terminal, and the run ends after the answer (the bounded flush;
    the timeout is only a hang guard, bench/telemetry_exit.py measures the time)."""
    import socket

    held = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    held.bind(("127.0.0.1", 0))  # bound, never listening: connections are refused
    try:
        url = f"http://127.0.0.1:{held.getsockname()[1]}"
        script = [Turn(tool_calls=[ToolCall("read_file", {"path": "a.txt"}, id="r1")]), Turn(text="the answer")]
        (tmp_path / "a.txt").write_text("alpha\n")
        with FakeProvider(script) as fake:
            run = _run(tmp_path, fake, {"OTEL_EXPORTER_OTLP_ENDPOINT": url})
    finally:
        held.close()
    assert run.returncode == 0, run.stderr
    assert "the answer" in run.stdout
    assert run.stderr == "", run.stderr
