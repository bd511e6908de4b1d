"""A second stdio MCP server: its ``echo`` shares a name with alpha's but answers differently; ``die`` kills it."""

from __future__ import annotations

import os

from mcp.server.mcpserver import MCPServer

server = MCPServer("beta")


@server.tool()
def echo(text: str) -> str:
    """Return the text reversed and prefixed with the server's name."""
    return f"beta:{text[::-1]}"


@server.tool()
def die() -> str:
    """Exit the server process abruptly, mid-session."""
    os._exit(3)


if __name__ == "__main__":
    server.run("stdio")
