"""What the HTTP response hooks under the provider SDKs may wrap: a plain server-sent event body."""

from __future__ import annotations

import httpx2


def wrappable_sse(response: httpx2.Response) -> bool:
    """Whether ``response`` is a successful, uncompressed SSE body whose byte stream a hook may
    replace with a wrapper (a hook sees the bytes before decompression, so compressed bodies and
    anything that is not a plain async byte stream are left alone)."""
    return (
        response.status_code == 200
        and response.headers.get("content-type", "").startswith("text/event-stream")
        and response.headers.get("content-encoding", "identity").lower() == "identity"
        and isinstance(response.stream, httpx2.AsyncByteStream)
    )
