"""An MCP 'server' that starts but never answers: the client's start timeout must fire."""

from __future__ import annotations

import time

if __name__ == "__main__":
    time.sleep(60)
