"""A streamable-HTTP MCP server on 127.0.0.1 (test fixture for ketch.extensions.mcp).

Usage: ``python gamma_http.py HEADER_LOG``. Binds a free port, prints ``PORT <n>`` on stdout
once listening, and appends the value of each request's ``X-Probe`` header to HEADER_LOG so a
test can see what the client sent.
"""

from __future__ import annotations

import asyncio
import socket
import sys

import uvicorn
from mcp.server.mcpserver import MCPServer

server = MCPServer("gamma", log_level="WARNING")


@server.tool()
def echo(text: str) -> str:
    """Return the text prefixed with the server's name."""
    return f"gamma:{text}"


def _header_logger(app, log_path: str):
    async def wrapped(scope, receive, send):
        if scope["type"] == "http":
            headers = dict(scope.get("headers") or [])
            probe = headers.get(b"x-probe")
            if probe is not None:
                with open(log_path, "a", encoding="utf-8") as log:
                    log.write(probe.decode() + "\n")
        await app(scope, receive, send)

    return wrapped


async def _serve(log_path: str) -> None:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    sock.listen(128)
    port = sock.getsockname()[1]
    app = _header_logger(server.streamable_http_app(), log_path)
    config = uvicorn.Config(app, log_level="warning", lifespan="on")
    uv = uvicorn.Server(config)
    print(f"PORT {port}", flush=True)
    await uv.serve(sockets=[sock])


if __name__ == "__main__":
    asyncio.run(_serve(sys.argv[1]))
