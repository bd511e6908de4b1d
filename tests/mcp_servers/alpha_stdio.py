"""A stdio MCP server with ``echo`` and ``add`` tools (test fixture for ketch.extensions.mcp).

It also exposes ``env_probe`` so a test can see which environment reached the process.
"""

from __future__ import annotations

import os

from mcp.server.mcpserver import MCPServer

server = MCPServer("alpha")


@server.tool()
def echo(text: str) -> str:
    """Return the text prefixed with the server's name."""
    return f"alpha:{text}"


@server.tool()
def add(a: int, b: int) -> str:
    """Add two integers."""
    return str(a + b)


@server.tool()
def env_probe(name: str) -> str:
    """Return the value of an environment variable, or '<unset>'."""
    return os.environ.get(name, "<unset>")


if __name__ == "__main__":
    server.run("stdio")
