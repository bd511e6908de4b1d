"""Base URLs as users write them, corrected to what each wire's SDK expects.

The Anthropic SDK appends ``/v1/messages`` to its base URL, so a base URL that already ends
in ``/v1`` posts to ``/v1/v1/messages`` (a 404). The OpenAI SDK appends only
``/chat/completions`` or ``/responses``, so a local OpenAI-compatible server given as its bare
root (``http://localhost:8080``) is missing the ``/v1`` its endpoints live under (a hosted API
may serve at its root, so only local servers get it added; a 404 elsewhere says what to try). Both are
corrected here, each with a notice that says what was changed and how to say it right.
"""

from __future__ import annotations

import dataclasses
from typing import Any
from urllib.parse import urlsplit, urlunsplit

ROOT_PRESETS = ("ollama", "lmstudio", "llamacpp")
"""Local presets whose servers serve under ``/v1``; a bare root gets it added."""


def _split(base_url: str | None) -> Any:
    """A base URL's parts, written with or without its scheme."""
    text = base_url or ""
    return urlsplit(text if "//" in text else f"//{text}")


def host_of(base_url: str | None) -> str:
    """The lower-case host of a base URL, written with or without its scheme ("" when none)."""
    return (_split(base_url).hostname or "").lower() if base_url else ""


def path_of(base_url: str | None) -> str:
    """A base URL's path with one trailing slash (``/api/paas/v4/``; ``/`` when none)."""
    return _split(base_url).path.rstrip("/") + "/"


def _local_host(host: str | None) -> bool:
    """A server on this machine or the local network (a hosted API may serve at its root)."""
    import ipaddress

    if not host:
        return False
    if host == "localhost" or host.endswith(".local"):
        return True
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return False
    return address.is_loopback or address.is_private


def corrected_base_url(base_url: str, wire: str, preset: str) -> str | None:
    """The base URL ``wire`` needs instead of ``base_url``, or None when it is fine as it is."""
    if not base_url:
        return None
    parts = urlsplit(base_url)
    path = parts.path.rstrip("/")
    if wire == "anthropic-messages" and path.endswith("/v1"):
        return urlunsplit((parts.scheme, parts.netloc, path[: -len("/v1")], parts.query, parts.fragment))
    if wire == "gemini":  # the SDK adds /v1beta/models/... itself
        for suffix in ("/v1beta", "/v1"):
            if path.endswith(suffix):
                return urlunsplit((parts.scheme, parts.netloc, path[: -len(suffix)], parts.query, parts.fragment))
        return None
    local = preset in ROOT_PRESETS or (preset == "openai-compatible" and _local_host(parts.hostname))
    if wire != "anthropic-messages" and local and path == "" and parts.netloc:
        return urlunsplit((parts.scheme, parts.netloc, "/v1", parts.query, parts.fragment))
    return None


def forgiving_connection(conn: Any) -> tuple[Any, str | None]:
    """``conn`` with its base URL corrected for its wire, and the notice saying so (or None)."""
    fixed = corrected_base_url(conn.base_url, conn.wire, conn.preset.name)
    if fixed is None:
        return conn, None
    if conn.wire == "anthropic-messages":
        why = "the Anthropic wire adds /v1/messages itself"
    elif conn.wire == "gemini":
        why = "the Gemini wire adds /v1beta/models/... itself"
    else:
        why = "OpenAI-compatible servers serve their endpoints under /v1"
    notice = f"using base URL {fixed} instead of {conn.base_url}: {why}; write it that way to silence this"
    return dataclasses.replace(conn, base_url=fixed), notice


__all__ = ["ROOT_PRESETS", "corrected_base_url", "forgiving_connection"]
