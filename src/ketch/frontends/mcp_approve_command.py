"""``ketch mcp approve NAME`` / ``ketch mcp deny NAME``: answer for one server of this folder's config.

``approve`` prints the server's exact launch (``extensions.mcp_approval.launch_lines``) and asks; the
answer is stored for the digest of exactly what was printed, so a later change to the command,
an argument or an env entry is not covered. The folder's config is read as ``--trust`` reads
it (to see its servers); approving a server does not trust the folder.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

EXIT_OK, EXIT_NO, EXIT_USAGE = 0, 1, 2


def run_mcp_approve(args: Any) -> int:
    from ketch.extensions import mcp_approval
    from ketch.config.settings import load_config

    config = load_config(Path(os.getcwd()).resolve(), trust_flag=True)
    servers = {a.name: a for a in mcp_approval.project_servers(config)}
    name = getattr(args, "name", None)
    if not name or name not in servers:
        known = ", ".join(sorted(servers)) or "none"
        print(
            f"ketch: {name or '(no name)'} is not an MCP server of this folder's config (its servers: {known}); "
            "servers in your own config need no approval",
            file=sys.stderr,
        )
        return EXIT_USAGE
    approval = servers[name]
    split = config.project_trust.split
    print(f"MCP server {name} from {split.path}:")
    for line in approval.lines():
        print(f"  {line}")
    if args.action == "deny":
        mcp_approval.remember(approval, False)
        print("Declined: ketch will not start it.")
        return EXIT_OK
    if not getattr(args, "yes", False):
        print("Start it when ketch runs here? [y/N] ", end="", flush=True)
        answer = sys.stdin.readline()
        if not answer:
            print("\nNo answer: nothing stored.", file=sys.stderr)
            return EXIT_NO
        if answer.strip().lower() not in ("y", "yes"):
            mcp_approval.remember(approval, False)
            print("Declined: ketch will not start it.")
            return EXIT_NO
    mcp_approval.remember(approval, True)
    print("Approved for exactly this command; a change to it is asked about again.")
    return EXIT_OK
