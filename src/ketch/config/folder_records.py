"""The per-folder answer files ketch keeps in the user's data dir (trust, MCP approvals): one
JSON object ``{"version": N, "folders": {...}}``, read leniently (an unreadable or mistyped
file records nothing, so it grants nothing) and replaced whole, owner-only, so a reader never
sees half a write."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from ketch.protocol import strict_json


def read_folders(path: Path) -> dict[str, Any]:
    """The ``folders`` table of the file at ``path``; empty when missing, unreadable or mistyped."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    folders = data.get("folders") if isinstance(data, dict) else None
    return folders if isinstance(folders, dict) else {}


def write_folders(path: Path, folders: dict[str, Any], version: int) -> None:
    """Replace the file at ``path`` with ``folders`` (mode 0600, through a rename)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        fh.write(strict_json.dumps({"version": version, "folders": folders}, indent=1, sort_keys=True))
    os.replace(tmp, path)
