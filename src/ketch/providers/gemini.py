"""The native Gemini wire: pydantic-ai's Google model over the Gemini API (``generateContent``).

Imported only when a connection speaks ``gemini``: the Google SDK (``google-genai``, the
``pydantic-ai-slim[google]`` extra) is never loaded for ``ketch --version`` or other wires.
The httpx2 client carries the same response hooks as the other wires (end-of-stream check,
text coalescing) and the connection's silence limit; SDK retries follow ``max_retries``.
"""

from __future__ import annotations

from typing import Any

from ketch.core.config import Connection

_NO_KEY = "not-needed"


def gemini_model(conn: Connection, response_hooks: list[Any], profile: dict[str, Any] | None = None) -> Any:
    """A ``GoogleModel`` for ``conn`` (base URL, key, timeout, retries from the connection)."""
    import httpx2

    try:
        from google.genai.types import HttpRetryOptions
        from pydantic_ai.models.google import GoogleModel
        from pydantic_ai.providers.google import GoogleProvider
    except ImportError as exc:  # the extra is not installed
        raise RuntimeError(
            "the gemini wire needs the Google SDK: pip install 'pydantic-ai-slim[google]'"
        ) from exc

    client = httpx2.AsyncClient(
        timeout=httpx2.Timeout(conn.timeout, connect=min(conn.timeout, 30.0)),
        event_hooks={"response": response_hooks},
    )
    retry = HttpRetryOptions(attempts=conn.max_retries + 1, initial_delay=0.5, max_delay=8.0)
    provider = GoogleProvider(
        api_key=conn.api_key or _NO_KEY, http_client=client, base_url=conn.base_url or None, retry_options=retry
    )
    extra: dict[str, Any] = {"profile": profile} if profile else {}
    return GoogleModel(conn.model_name, provider=provider, **extra)
