"""Refuse a server-sent event stream that ends before the provider said it was finished.

A stream whose connection is cut mid-chunk already fails in the HTTP layer. But a body
delimited by closing the connection, or a proxy that ends a chunked body cleanly, can stop
at an event boundary: the provider SDKs then see a normal end of stream, and the partial
answer would pass for a complete one (and be stored as one). This httpx response hook
wraps a successful SSE body and, at its end, raises ``RemoteProtocolError`` unless the
wire's terminal signal came by:

- Chat Completions: ``data: [DONE]`` or a non-null ``finish_reason`` (OpenAI-compatible
  servers do not all send both, but a finished stream carries at least one);
- Responses: a ``response.completed`` / ``response.incomplete`` / ``response.failed`` or
  ``error`` event;
- Anthropic Messages: ``message_stop``, a ``message_delta`` with a ``stop_reason``, or an
  ``error`` event.

Markers are matched on the raw bytes (a JSON string cannot hold an unescaped quote, so
answer text cannot fake one); scanning stops at the first match.
"""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from typing import Any

import httpx2

from ketch.wire.hook_sse import ByteStream, wrappable_sse

_TYPE = rb'"type"\s*:\s*"'
_TERMINAL: dict[str, re.Pattern[bytes]] = {
    "openai-chat": re.compile(rb'(?:^|\n)data: ?\[DONE\]|"finish_reason"\s*:\s*"'),
    "openai-responses": re.compile(_TYPE + rb'(?:response\.(?:completed|incomplete|failed)|error)"'),
    "anthropic-messages": re.compile(_TYPE + rb'(?:message_stop|error)"|"stop_reason"\s*:\s*"'),
    "gemini": re.compile(rb'"finishReason"\s*:\s*"|"error"\s*:\s*\{'),
}
_OVERLAP = 64
"""Bytes kept from the previous chunk, so a marker split across two reads is still seen."""

ENDED_EARLY = "the stream ended without its end-of-answer event"
EMPTY_STREAM = "the server started a stream and closed it before its first event"
"""A stream that broke, or ended, before a byte of any event arrived (``stream_refusal`` reads it);
SSE comments (a keep-alive ``: ping``, as llama-cpp-python's server sends while it works) do not count."""


class _EventStart:
    """Finds the first byte of a stream that is not an SSE comment line or a blank line."""

    def __init__(self) -> None:
        self.line_start = True
        self.comment = False

    def found(self, chunk: bytes) -> bool:
        for byte in chunk:
            if byte in (10, 13):  # \n, \r
                self.line_start, self.comment = True, False
            elif self.line_start:
                self.line_start = False
                if byte != 58:  # ':' opens a comment line
                    return True
                self.comment = True
            elif not self.comment:
                return True
        return False


class TerminatedStream(ByteStream):
    """The same bytes; raises at the end of the body if the terminal marker never came."""

    def __init__(self, inner: httpx2.AsyncByteStream, marker: re.Pattern[bytes]) -> None:
        self._inner = inner
        self._marker = marker
        self._seen = False
        self._tail = b"\n"

    async def __aiter__(self) -> AsyncIterator[bytes]:
        started = False
        event_start = _EventStart()
        try:
            async for chunk in self._inner:
                started = started or event_start.found(chunk)
                if not self._seen and chunk:
                    window = self._tail + chunk
                    if self._marker.search(window):
                        self._seen = True
                    self._tail = window[-_OVERLAP:]
                yield chunk
        except httpx2.TransportError as exc:
            if not started and not isinstance(exc, httpx2.TimeoutException):  # closed, not silent
                raise httpx2.RemoteProtocolError(f"{EMPTY_STREAM} ({exc})") from exc
            raise
        if not started:
            raise httpx2.RemoteProtocolError(EMPTY_STREAM)
        if not self._seen:
            raise httpx2.RemoteProtocolError(ENDED_EARLY)

    async def aclose(self) -> None:
        await self._inner.aclose()


def response_hook(wire: str) -> Any:
    """An httpx2 ``response`` event hook guarding successful SSE bodies on ``wire``."""
    marker = _TERMINAL.get(wire)

    async def guard_sse(response: httpx2.Response) -> None:
        if marker is not None and wrappable_sse(response):
            response.stream = TerminatedStream(response.stream, marker)  # type: ignore[arg-type]

    return guard_sse
