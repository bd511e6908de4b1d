"""`ketch -p` against a hostile provider and hostile input: the real CLI, a local server.

Every failure is one line on stderr with the right exit code; json output stays one JSON
object; a partial answer is never taken for a finished one."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from fakeprovider import FakeProvider, ToolCall, Turn
from kettle import adhoc, one_line_error, run_ketch, write_project_config

WIRES = ["openai-chat", "openai-responses", "anthropic-messages", "gemini"]
NO_RETRIES = {"KETCH_MAX_RETRIES": "0"}


class _Canned(BaseHTTPRequestHandler):
    """Answers every request with the server's one canned response."""

    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: object) -> None:  # noqa: A002 - stdlib signature
        pass

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("content-length") or 0))
        status, content_type, body = self.server.canned  # type: ignore[attr-defined]
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


@pytest.fixture
def canned() -> Iterator[object]:
    """`canned(status, content_type, body)` starts a server that always answers so; returns its base URL."""
    servers: list[ThreadingHTTPServer] = []

    def start(status: int, content_type: str, body: bytes) -> str:
        server = ThreadingHTTPServer(("127.0.0.1", 0), _Canned)
        server.daemon_threads = True
        server.canned = (status, content_type, body)  # type: ignore[attr-defined]
        threading.Thread(target=server.serve_forever, daemon=True).start()
        servers.append(server)
        return f"http://127.0.0.1:{server.server_address[1]}/v1"

    yield start
    for server in servers:
        server.shutdown()
        server.server_close()


# ------------------------------------------------------------------ streams that stop early


@pytest.mark.parametrize("wire", WIRES)
def test_a_stream_that_ends_cleanly_before_its_end_event_is_an_error_not_an_answer(wire: str, tmp_path: Path) -> None:
    partial = "the first half of an answer that never got its second half"
    with FakeProvider([Turn(text=partial, end_early=True), Turn(text="second answer")]) as fake:
        run = run_ketch(["-p", "first question", "--output-format", "json", *adhoc(fake, wire)], tmp_path, env=NO_RETRIES)
        assert run.code == 1, (run.stdout, run.stderr)
        line = one_line_error(run.stderr)
        assert "broke before the answer was complete" in line and "could not reach" not in line
        payload = json.loads(run.stdout)
        assert payload["is_error"] is True and payload["reason"] == "error"
        assert payload["error"]["kind"] == "provider"

        again = run_ketch(["-p", "second question", "--continue", *adhoc(fake, wire)], tmp_path)
    assert again.code == 0, again.stderr
    assert again.stdout.strip() == "second answer"
    sent = json.dumps(fake.model_requests[-1].body)
    assert "first question" in sent  # the failed turn's prompt was kept
    assert partial[-20:] not in sent  # its half answer was not stored as a finished reply


@pytest.mark.parametrize("wire", WIRES)
def test_a_stream_cut_mid_answer_is_not_reported_as_an_unreachable_server(wire: str, tmp_path: Path) -> None:
    with FakeProvider([Turn(text="an answer cut off in the middle", truncate=True)]) as fake:
        run = run_ketch(["-p", "hi", *adhoc(fake, wire)], tmp_path, env=NO_RETRIES)
    assert run.code == 1
    line = one_line_error(run.stderr)
    assert "broke before the answer was complete" in line, line
    assert "is the server running" not in line


@pytest.mark.parametrize("wire", ["openai-chat", "anthropic-messages"])
def test_an_error_event_mid_stream_is_reported_as_such_not_as_retried(wire: str, canned, tmp_path: Path) -> None:
    if wire == "openai-chat":
        start = {"id": "c1", "object": "chat.completion.chunk", "created": 1, "model": "m",
                 "choices": [{"index": 0, "delta": {"role": "assistant", "content": "par"}, "finish_reason": None}]}
        body = f"data: {json.dumps(start)}\n\ndata: {json.dumps({'error': {'message': 'overloaded mid-answer', 'type': 'server_error'}})}\n\n"
    else:
        start = {"type": "message_start", "message": {"id": "msg_1", "type": "message", "role": "assistant", "model": "m",
                 "content": [], "stop_reason": None, "stop_sequence": None, "usage": {"input_tokens": 1, "output_tokens": 1}}}
        error = {"type": "error", "error": {"type": "overloaded_error", "message": "overloaded mid-answer"}}
        body = f"event: message_start\ndata: {json.dumps(start)}\n\nevent: error\ndata: {json.dumps(error)}\n\n"
    url = canned(200, "text/event-stream", body.encode())
    if wire == "anthropic-messages":
        url = url.removesuffix("/v1")
    run = run_ketch(["-p", "hi", "--base-url", url, "--wire", wire, "--model", "m"], tmp_path, env=NO_RETRIES)
    assert run.code == 1
    line = one_line_error(run.stderr)
    assert "in the middle of its answer" in line and "overloaded mid-answer" in line
    assert "after retries" not in line


def test_an_html_error_page_is_reported_by_its_title(canned, tmp_path: Path) -> None:
    page = b"<html><head><title>502 Bad Gateway</title></head>\n<body><center><h1>502 Bad Gateway</h1></center><hr>nginx</body></html>\n"
    url = canned(502, "text/html", page)
    run = run_ketch(["-p", "hi", "--base-url", url, "--wire", "openai-chat", "--model", "m"], tmp_path, env=NO_RETRIES)
    assert run.code == 1
    line = one_line_error(run.stderr)
    assert "HTTP 502" in line and "502 Bad Gateway" in line
    assert "<" not in line


# ------------------------------------------------------------------ what the user is told to do


def test_a_rejected_key_on_an_ad_hoc_endpoint_points_at_api_key_env(tmp_path: Path) -> None:
    with FakeProvider() as fake:
        fake.fail_path("/v1/chat/completions", status=401)
        run = run_ketch(["-p", "hi", *adhoc(fake, "openai-chat")], tmp_path, env=NO_RETRIES)
    assert run.code == 1
    line = one_line_error(run.stderr)
    assert "rejected the API key" in line and "--api-key-env" in line
    assert "auth login" not in line  # an ad-hoc endpoint never reads stored keys


def test_a_model_that_keeps_sending_invalid_calls_ends_with_advice_for_the_user(tmp_path: Path) -> None:
    bad = [Turn(tool_calls=[ToolCall("read_file", {"path": 42})]) for _ in range(5)]
    with FakeProvider(bad) as fake:
        run = run_ketch(["-p", "hi", *adhoc(fake, "openai-chat")], tmp_path)
    assert run.code == 1
    line = one_line_error(run.stderr)
    assert "read_file" in line and "another model" in line
    assert "pydantic" not in line and "retry limit" not in line


# ------------------------------------------------------------------ bad command lines and config


@pytest.mark.parametrize("argv", [["-p", "hi", "--frobnicate"], ["-p", "hi", "--output-format", "jsn"], ["models", "--bogus"]])
def test_a_bad_command_line_is_one_line_not_the_usage_block(argv: list[str], tmp_path: Path) -> None:
    run = run_ketch(argv, tmp_path, subprocess_=True)
    assert run.code == 2
    assert "--help" in one_line_error(run.stderr)


def test_p_without_a_prompt_reads_it_from_stdin(tmp_path: Path) -> None:
    with FakeProvider([Turn(text="hello back")]) as fake:
        run = run_ketch([*adhoc(fake, "openai-chat"), "-p"], tmp_path, input="piped question\n")
    assert run.code == 0, run.stderr
    assert run.stdout.strip() == "hello back"
    assert "piped question" in json.dumps(fake.model_requests[0].body)


@pytest.mark.parametrize("url", ["not a url", "localhost:8080", "ftp://127.0.0.1/v1", "http://127.0.0.1:99999/v1", "http://[::1"])
def test_a_base_url_that_is_not_a_url_is_a_usage_error(url: str, tmp_path: Path) -> None:
    run = run_ketch(["-p", "hi", "--base-url", url, "--wire", "openai-chat", "--model", "m"], tmp_path, env=NO_RETRIES)
    assert run.code == 2, run.stderr
    line = one_line_error(run.stderr)
    assert "--base-url" in line and repr(url) in line and "internal error" not in line


def test_a_configured_base_url_without_a_scheme_names_the_connection(tmp_path: Path) -> None:
    write_project_config(tmp_path, '[connections.local]\npreset = "openai-compatible"\nbase_url = "localhost:8080/v1"\n')
    run = run_ketch(["-p", "hi", "-m", "local:m"], tmp_path)
    assert run.code == 2
    assert "connection 'local' base_url" in one_line_error(run.stderr)


def test_a_config_file_that_is_not_utf8_names_the_file(tmp_path: Path) -> None:
    path = write_project_config(tmp_path, "")
    path.write_bytes(b'model = "caf\xe9"\n')
    run = run_ketch(["-p", "hi"], tmp_path)
    assert run.code == 2
    line = one_line_error(run.stderr)
    assert str(path) in line and "UTF-8" in line


# ------------------------------------------------------------------ json modes stay JSON


def test_json_output_of_a_failed_turn_carries_the_error(tmp_path: Path) -> None:
    with FakeProvider([Turn(status=500)]) as fake:
        run = run_ketch(["-p", "hi", "--output-format", "json", *adhoc(fake, "openai-chat")], tmp_path, env=NO_RETRIES)
    assert run.code == 1
    payload = json.loads(run.stdout)
    assert payload["is_error"] is True
    assert payload["error"] == {"kind": "provider", "message": one_line_error(run.stderr).removeprefix("ketch: ")}


@pytest.mark.parametrize("fmt", ["json", "stream-json"])
def test_a_configuration_error_still_prints_json(fmt: str, tmp_path: Path) -> None:
    run = run_ketch(["-p", "hi", "-m", "nosuch:model", "--output-format", fmt], tmp_path)
    assert run.code == 2
    message = one_line_error(run.stderr).removeprefix("ketch: ")
    [line] = run.stdout.splitlines()
    payload = json.loads(line)
    if fmt == "json":
        assert payload["is_error"] is True and payload["error"] == {"kind": "config", "message": message}
    else:
        assert payload["type"] == "error" and payload["kind"] == "config" and payload["message"] == message


# ------------------------------------------------------------------ credentials inside a URL


@pytest.mark.parametrize("fmt", ["text", "json"])
def test_credentials_written_into_the_base_url_never_reach_output_or_the_store(fmt: str, tmp_path: Path) -> None:
    """``http://user:password@host/v1?api_key=…``: the URL is named in the error, its secrets are not."""
    import os

    with FakeProvider() as fake:
        fake.fail_path("/v1/chat/completions", status=503)
        url = fake.base_url.replace("http://", "http://deploy:hunter2-pass@")
        run = run_ketch(["-p", "hi", "--wire", "openai-chat", "--base-url", url, "--model", "fake-model",
                         "--output-format", fmt], tmp_path, env=NO_RETRIES)
    unreachable = run_ketch(["-p", "hi", "--wire", "openai-chat", "--model", "fake-model", "--output-format", fmt,
                             "--base-url", "http://deploy:hunter2-pass@127.0.0.1:9/v1?token=tok-query-secret"],
                            tmp_path, env=NO_RETRIES)
    for result in (run, unreachable):
        assert result.code == 1, (result.stdout, result.stderr)
        one_line_error(result.stderr)
        for secret in ("hunter2-pass", "sk-query-secret-1234", "tok-query-secret"):
            assert secret not in result.stderr and secret not in result.stdout
    named = one_line_error(unreachable.stderr)  # the URL is still named, less its secrets
    assert "http://[redacted]@127.0.0.1:9/v1?token=[redacted]" in named
    data = Path(os.environ["KETCH_DATA_DIR"])
    stored = b"".join(p.read_bytes() for p in data.rglob("*") if p.is_file())
    assert stored and b"hunter2-pass" not in stored and b"query-secret" not in stored


# ------------------------------------------------------------------ a provider that goes silent


class _Silent(_Canned):
    """Reads the request, then (``stall_after_headers``) sends the SSE headers, and says nothing more."""

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("content-length") or 0))
        self.server.paths.append(self.path)  # type: ignore[attr-defined]
        if self.path.endswith(self.server.helpers):  # type: ignore[attr-defined]
            self.server.release.wait(10)  # type: ignore[attr-defined]
            self.close_connection = True
            return
        self.server.requests += 1  # type: ignore[attr-defined]
        if self.server.stall_after_headers:  # type: ignore[attr-defined]
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.end_headers()
            self.wfile.flush()
        self.server.release.wait(10)  # type: ignore[attr-defined]
        self.close_connection = True  # then hang up: without a limit the client would wait on


@pytest.mark.parametrize(("wire", "stall_after_headers"), [("openai-chat", False), ("openai-responses", True), ("anthropic-messages", True)])
def test_a_provider_that_goes_silent_times_out_with_the_limit_and_how_to_raise_it(
    wire: str, stall_after_headers: bool, tmp_path: Path
) -> None:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Silent)
    server.daemon_threads = True
    server.requests, server.stall_after_headers, server.release = 0, stall_after_headers, threading.Event()  # type: ignore[attr-defined]
    # Requests before the model request that are not the model request (counted apart): the
    # window probe of an unknown server (Ollama's POST /api/show) and Anthropic's token count.
    server.paths, server.helpers = [], ("/api/show", "/count_tokens")  # type: ignore[attr-defined]
    threading.Thread(target=server.serve_forever, daemon=True).start()
    base = f"http://127.0.0.1:{server.server_address[1]}" + ("" if wire == "anthropic-messages" else "/v1")
    try:
        import time

        started = time.monotonic()
        run = run_ketch(
            ["-p", "hello", "--base-url", base, "--wire", wire, "--model", "m"],
            tmp_path,
            env={"KETCH_TIMEOUT": "1.5", "KETCH_MAX_RETRIES": "1"},
        )
        elapsed = time.monotonic() - started
    finally:
        server.release.set()  # type: ignore[attr-defined]
        server.shutdown()
        server.server_close()
    assert run.code == 1, (run.stdout, run.stderr)
    line = one_line_error(run.stderr)
    assert "sent nothing for 1.5 s" in line and "KETCH_TIMEOUT=SECONDS" in line, line
    # Silent before answering: the first try and one retry, each given up after the limit. Silent
    # in the middle of a stream: given up once (the SDKs never retry a stream that had started).
    tries = 1 if stall_after_headers else 2
    assert server.requests == tries, server.paths  # type: ignore[attr-defined]
    # a helper request is asked once and never retried like the model request
    helpers = [path for path in server.paths if path.endswith(server.helpers)]  # type: ignore[attr-defined]
    assert len(helpers) == len(set(helpers)), server.paths  # type: ignore[attr-defined]
    assert elapsed >= 1.5 * tries, elapsed  # each try waited out the limit (a hang would meet the per-test timeout)


def test_a_configured_timeout_is_named_in_the_advice_and_a_bad_one_is_refused(tmp_path: Path) -> None:
    write_project_config(tmp_path, '[connections.box]\npreset = "openai-compatible"\nbase_url = "http://127.0.0.1:9/v1"\ntimeout = 0\n')
    run = run_ketch(["-p", "hi", "--model", "box:m"], tmp_path)
    assert run.code == 2
    assert "timeout" in one_line_error(run.stderr)
    write_project_config(tmp_path, '[connections.box]\npreset = "openai-compatible"\nbase_url = "http://127.0.0.1:9/v1"\n')
    bad_env = run_ketch(["-p", "hi", "--model", "box:m"], tmp_path, env={"KETCH_TIMEOUT": "soon"})
    assert bad_env.code == 2
    assert "KETCH_TIMEOUT must be a number of seconds above 0, not 'soon'" in one_line_error(bad_env.stderr)
