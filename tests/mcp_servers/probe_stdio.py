"""A stdio MCP server that, as it starts, tries a write outside the workspace and a TCP
connection to 127.0.0.1, and records both outcomes in a report file (test fixture for the
sandbox): ``probe_stdio.py REPORT OUTSIDE_FILE PORT``."""

from __future__ import annotations

import socket
import sys

from mcp.server.mcpserver import MCPServer

server = MCPServer("probe")


@server.tool()
def ping() -> str:
    """Answer pong."""
    return "pong"


def _attempts(report: str, outside: str, port: int) -> None:
    lines = []
    try:
        with open(outside, "w") as fh:
            fh.write("escaped\n")
        lines.append("write ok")
    except OSError as exc:
        lines.append(f"write refused {exc.strerror}")
    try:
        socket.create_connection(("127.0.0.1", port), 3).close()
        lines.append("connect ok")
    except OSError as exc:
        lines.append(f"connect refused {exc.strerror}")
    with open(report, "w") as fh:
        fh.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    _attempts(sys.argv[1], sys.argv[2], int(sys.argv[3]))
    server.run("stdio")
