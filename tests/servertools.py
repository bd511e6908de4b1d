"""Helpers of the real-server tests: strict JSON checks of what ketch wrote and sent."""

from __future__ import annotations

import json
import os
import sqlite3
from pathlib import Path
from typing import Any

from fakeprovider import strict_json_problem


def strict_lines(text: str) -> list[dict[str, Any]]:
    """Every line of ``text`` as JSON a strict parser accepts (fails the test otherwise)."""
    out = []
    for line in text.splitlines():
        if not line.strip():
            continue
        problem = strict_json_problem(line.encode("utf-8", "surrogatepass"))
        assert problem is None, f"not strict JSON ({problem}): {line[:200]}"
        out.append(json.loads(line))
    return out


def store_rows() -> list[str]:
    """The JSON text of every message, event and pending row in the session store."""
    path = Path(os.environ["KETCH_DATA_DIR"]) / "ketch.db"
    with sqlite3.connect(path) as db:
        rows = [r[0] for table in ("messages", "events", "pending") for r in db.execute(f"SELECT data FROM {table}")]  # noqa: S608
    return rows


def assert_store_strict() -> None:
    for row in store_rows():
        problem = strict_json_problem(row.encode("utf-8", "surrogatepass"))
        assert problem is None, f"store row is not strict JSON ({problem}): {row[:200]}"


def adhoc_url(fake: Any, wire: str) -> str:
    return fake.base_url if wire != "anthropic-messages" else fake.base_url.removesuffix("/v1")
