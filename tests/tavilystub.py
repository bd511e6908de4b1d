"""A local stand-in for the Tavily search API on 127.0.0.1 (shared by the web-search tests)."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest


class TavilyStub:
    """Records each request (path, Authorization header, JSON body) and answers with
    ``status``/``body``, which a test may change."""

    def __init__(self) -> None:
        self.requests: list[dict[str, Any]] = []
        self.status: int = 200
        self.body: dict[str, Any] = {"results": []}
        stub = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 - http.server naming
                raw = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                stub.requests.append({"path": self.path, "authorization": self.headers.get("Authorization"), "json": json.loads(raw)})
                payload = json.dumps(stub.body).encode()
                self.send_response(stub.status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
        self.base_url = f"http://127.0.0.1:{self.server.server_address[1]}"

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def tavily_stub() -> Iterator[TavilyStub]:
    stub = TavilyStub()
    yield stub
    stub.close()
