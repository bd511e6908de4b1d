"""An MCP server that dies before speaking the protocol.

It writes one line to stderr, including the value of ``CRASH_TOKEN`` (so a test can check that
configured secrets are scrubbed from the reported reason), and exits 1.
"""

from __future__ import annotations

import os
import sys

if __name__ == "__main__":
    sys.stderr.write(f"crash_at_start: refusing to start with token {os.environ.get('CRASH_TOKEN', '')}\n")
    sys.exit(1)
