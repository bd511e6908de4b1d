"""The keys ketch holds in one run: which variables carry them and their values.

Collected once per session from the connection in use, every connection and preset the
config knows, the keys stored by ``ketch auth login``, the web-search key, the values of MCP
servers' ``env`` and ``headers``, and every variable whose name looks like a secret. Used to
keep them out of children's environments (``tools/child_env.py``) and out of tool output
(``state/redaction.py``).

What names a secret (``SECRET_NAME``) and the web-search key's variable live here, at the
configuration's floor, so the tools and web search read them from below instead of the
keyring reaching up into them.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

SECRET_NAME = re.compile(r"KEY|SECRET|TOKEN|PASSWORD|CREDENTIAL", re.IGNORECASE)
"""A variable whose name says it holds a secret: kept from children, its value redacted."""

TAVILY_KEY_ENV = "TAVILY_API_KEY"
"""The web-search key's variable (``tools/web_search.py`` reads it)."""

MIN_KEY_LEN = 8
"""Shorter values are not treated as keys: replacing them would garble ordinary output."""


@dataclass(frozen=True)
class KeyRing:
    names: frozenset[str]
    """Variables that hold a key ketch uses."""
    values: tuple[str, ...]
    """The keys, longest first (so a key that contains another is replaced whole)."""


def collect_keys(config: Any, conn: Any = None, environ: Mapping[str, str] | None = None, extra_names: tuple[str, ...] = ()) -> KeyRing:
    from ketch.config.settings import stored_keys
    from ketch.config.presets import PRESETS

    env = os.environ if environ is None else environ
    names = {p.key_env for p in PRESETS.values() if p.key_env}
    names |= {alt for p in PRESETS.values() if (alt := getattr(p, "alt_key_env", ""))}
    names |= {c.api_key_env for c in config.connections.values() if c.api_key_env}
    names |= {n for n in extra_names if n}
    if conn is not None and getattr(conn, "key_env", ""):
        names.add(conn.key_env)
    names.add(TAVILY_KEY_ENV)
    values = {env[n] for n in names if env.get(n)}
    values |= {v for k, v in env.items() if SECRET_NAME.search(k)}
    values |= set(stored_keys().values())
    if conn is not None and getattr(conn, "api_key", None):
        values.add(conn.api_key)
    for spec in ((config.mcp or {}).get("servers") or {}).values():
        if isinstance(spec, Mapping):
            values |= {str(v) for v in (spec.get("env") or {}).values()}
            values |= {str(v) for v in (spec.get("headers") or {}).values()}
    kept = sorted((v for v in values if len(v) >= MIN_KEY_LEN), key=len, reverse=True)
    return KeyRing(frozenset(names), tuple(kept))
