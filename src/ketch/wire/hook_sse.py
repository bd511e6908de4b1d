"""What the HTTP response hooks under the provider SDKs may wrap: a plain server-sent event body.

The OpenAI, Anthropic and Google SDKs run on ``httpx2``, the Groq SDK on ``httpx``: a hook's
wrapper is a byte stream of both, so either client iterates it.
"""

from __future__ import annotations

import httpx
import httpx2


class ByteStream(httpx2.AsyncByteStream, httpx.AsyncByteStream):
    """Base of a hook's body wrapper: an async byte stream to ``httpx2`` and ``httpx`` alike."""


def wrappable_sse(response: httpx2.Response | httpx.Response) -> bool:
    """Whether ``response`` is a successful, uncompressed SSE body whose byte stream a hook may
    replace with a wrapper (a hook sees the bytes before decompression, so compressed bodies and
    anything that is not a plain async byte stream are left alone)."""
    return (
        response.status_code == 200
        and response.headers.get("content-type", "").startswith("text/event-stream")
        and response.headers.get("content-encoding", "identity").lower() == "identity"
        and isinstance(response.stream, (httpx2.AsyncByteStream, httpx.AsyncByteStream))
    )
