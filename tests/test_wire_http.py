"""ketch's own HTTP client and SSE reader (``ketch.wire``) against a real local server.

Asserted on what crossed the socket: how many requests the server saw and what they held, the
waits the client chose (the sleep is injected, so no test waits for real), and the error the
loop receives for each way a server can fail.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
from isolation import refused_port
from pydantic_ai.exceptions import ModelConnectionError, ModelHTTPError, ModelTimeoutError, UnexpectedModelBehavior

from ketch.wire.http import WireClient, backoff, encode_body, read_lines
from ketch.wire.sse import json_events


class Script:
    """What the server answers, one entry per request: (status, headers, body chunks, hang)."""

    def __init__(self, answers: list[tuple[int, dict[str, str], list[bytes], bool]]) -> None:
        self.answers = answers
        self.seen: list[tuple[dict[str, str], bytes]] = []
        self.release = threading.Event()


@pytest.fixture
def server() -> Iterator[tuple[str, Script]]:
    script = Script([])

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args: Any) -> None:
            pass

        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("content-length") or 0))
            script.seen.append(({k.lower(): v for k, v in self.headers.items()}, body))
            status, headers, chunks, hang = script.answers.pop(0)
            self.send_response(status)
            for name, value in headers.items():
                self.send_header(name, value)
            self.send_header("content-length", str(sum(map(len, chunks)))) if not hang else None
            self.send_header("connection", "close")
            self.end_headers()
            for chunk in chunks:
                self.wfile.write(chunk)
                self.wfile.flush()
            if hang:
                script.release.wait(30)

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}", script
    finally:
        script.release.set()
        httpd.shutdown()
        httpd.server_close()


def client(**kw: Any) -> tuple[WireClient, list[float]]:
    waits: list[float] = []

    async def sleep(seconds: float) -> None:
        waits.append(seconds)

    return WireClient(model_name="m", headers={"authorization": "Bearer k"}, sleep=sleep, **kw), waits


SSE = {"content-type": "text/event-stream"}


async def test_retries_follow_the_servers_retry_after_then_succeed(server: tuple[str, Script]) -> None:
    url, script = server
    script.answers += [(429, {"retry-after": "3"}, [b'{"error":"slow down"}'], False),
                       (503, {"retry-after-ms": "250"}, [b"busy"], False),
                       (200, {"content-type": "application/json"}, [b'{"ok":true}'], False)]
    wire, waits = client(max_retries=2)
    response = await wire.post(url + "/v1/x", encode_body({"a": 1}), stream=False)
    assert response.json() == {"ok": True}
    assert waits == [3.0, 0.25]
    assert [body for _, body in script.seen] == [b'{"a": 1}'] * 3
    assert all(h["authorization"] == "Bearer k" and h["content-type"] == "application/json" for h, _ in script.seen)
    await wire.aclose()


async def test_the_last_failure_is_raised_with_its_status_and_body(server: tuple[str, Script]) -> None:
    url, script = server
    script.answers += [(429, {}, [b'{"error":{"message":"quota"}}'], False)] * 2
    wire, waits = client(max_retries=1)
    with pytest.raises(ModelHTTPError) as caught:
        await wire.post(url, b"{}", stream=True)
    assert caught.value.status_code == 429 and caught.value.body == {"error": {"message": "quota"}}
    assert len(script.seen) == 2 and waits == [0.5]
    await wire.aclose()


async def test_a_client_error_is_not_retried(server: tuple[str, Script]) -> None:
    url, script = server
    script.answers += [(401, {}, [b"bad key"], False)]
    wire, waits = client(max_retries=3)
    with pytest.raises(ModelHTTPError) as caught:
        await wire.post(url, b"{}", stream=False)
    assert caught.value.status_code == 401 and caught.value.body == "bad key"
    assert len(script.seen) == 1 and waits == []
    await wire.aclose()


async def test_a_refused_connection_is_retried_then_reported() -> None:
    with refused_port() as port:
        wire, waits = client(max_retries=2)
        with pytest.raises(ModelConnectionError):
            await wire.post(f"http://127.0.0.1:{port}/", b"{}", stream=True)
    assert waits == [0.5, 1.0]
    await wire.aclose()


def test_a_body_json_cannot_carry_is_refused_before_anything_is_sent() -> None:
    with pytest.raises(UnexpectedModelBehavior):
        encode_body({"temperature": float("nan")})
    assert encode_body({"a": [1, "é"]}, compact=True) == '{"a":[1,"\\u00e9"]}'.encode()


@pytest.mark.parametrize(("headers", "attempt", "wait"), [
    ({"retry-after": "1.5"}, 0, 1.5), ({"retry-after": "600"}, 0, 8.0), ({"retry-after": "nan"}, 1, 1.0),
    ({"retry-after": "-4"}, 2, 2.0), ({"retry-after": "Wed, 21 Oct 2015 07:28:00 GMT"}, 0, 0.5), (None, 9, 8.0),
])
def test_backoff_takes_only_a_usable_server_wait(headers: dict[str, str] | None, attempt: int, wait: float) -> None:
    assert backoff(attempt, headers) == wait


async def _events(wire: WireClient, url: str, **kw: Any) -> list[dict[str, Any]]:
    response = await wire.post(url, b"{}", stream=True)
    try:
        return [payload async for _, payload in json_events(read_lines(response, "m"), model_name="m", **kw)]
    finally:
        await response.aclose()


async def test_a_stream_is_read_to_its_end_event(server: tuple[str, Script]) -> None:
    url, script = server
    body = [b'event: delta\ndata: {"t":"he"}\n\n', b': keep-alive\n\n', b'data: {"t":\ndata: "llo"}\n\n',
            b'data: {"type":"done"}\n\n', b'data: {"after":"ignored"}\n\n']
    script.answers += [(200, SSE, body, False)]
    wire, _ = client()
    events = await _events(wire, url, is_end=lambda frame, payload: payload.get("type") == "done")
    assert events == [{"t": "he"}, {"t": "llo"}, {"type": "done"}]
    assert script.seen[0][0]["accept"] == "text/event-stream"
    await wire.aclose()


async def test_a_done_sentinel_ends_a_chat_stream(server: tuple[str, Script]) -> None:
    url, script = server
    script.answers += [(200, SSE, [b'data: {"n":1}\n\n', b"data: [DONE]\n\n"], False)]
    wire, _ = client()
    assert await _events(wire, url, is_end=lambda *_: False, done_sentinel="[DONE]") == [{"n": 1}]
    await wire.aclose()


async def test_a_stream_cut_before_its_end_event_is_a_broken_connection(server: tuple[str, Script]) -> None:
    url, script = server
    script.answers += [(200, SSE, [b'data: {"n":1}\n\n'], False)]
    wire, _ = client()
    with pytest.raises(ModelConnectionError, match="end-of-answer"):
        await _events(wire, url, is_end=lambda *_: False, done_sentinel="[DONE]")
    await wire.aclose()


@pytest.mark.parametrize("data", [b"data: {not json}\n\n", b"data: [1, 2]\n\n", b'data: {"x": NaN}\n\n'])
async def test_an_event_that_is_not_a_json_object_is_an_error(server: tuple[str, Script], data: bytes) -> None:
    url, script = server
    script.answers += [(200, SSE, [data], False)]
    wire, _ = client()
    with pytest.raises(UnexpectedModelBehavior):
        await _events(wire, url, is_end=lambda *_: True)
    await wire.aclose()


async def test_a_stream_that_goes_silent_fails_after_the_idle_timeout(server: tuple[str, Script]) -> None:
    url, script = server
    script.answers += [(200, SSE, [b'data: {"n":1}\n\n'], True)]  # then silence, connection kept open
    wire, _ = client(idle_timeout=0.3)
    with pytest.raises(ModelTimeoutError):
        await _events(wire, url, is_end=lambda *_: False)
    await wire.aclose()
