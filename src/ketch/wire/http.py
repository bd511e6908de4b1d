"""One HTTP client per connection for ketch's own wire models: strict JSON bodies, bounded
retries that honour the server's ``retry-after``, and failures raised as pydantic-ai's model
errors, whose status and body the loop sorts by who must act (user, provider, ketch).

Timeouts: ``connect`` bounds opening the connection; ``idle`` bounds each wait for bytes (a
stream that goes silent that long fails), so a long answer that keeps streaming is never cut.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from typing import Any

import httpx
from pydantic_ai.exceptions import ModelConnectionError, ModelHTTPError, ModelTimeoutError, UnexpectedModelBehavior

RETRY_STATUS = frozenset({408, 409, 429, 500, 502, 503, 504})
"""Statuses a request is sent again for: the server asked to wait, or failed by itself."""

MAX_BACKOFF = 8.0


def encode_body(body: Mapping[str, Any], *, compact: bool = False) -> bytes:
    """``body`` as strict JSON (a NaN or infinity, which no server parses, is an error)."""
    try:
        text = json.dumps(body, allow_nan=False, separators=(",", ":") if compact else None)
    except ValueError as exc:
        raise UnexpectedModelBehavior(f"the request holds a number JSON cannot carry ({exc})") from None
    return text.encode("utf-8")


def backoff(attempt: int, headers: Mapping[str, str] | None) -> float:
    """The wait before retry ``attempt`` (0-based): the server's ``retry-after-ms`` or
    ``retry-after`` (seconds) when it gives a usable one, else 0.5 s doubling; at most 8 s."""
    for name, scale in (("retry-after-ms", 0.001), ("retry-after", 1.0)):
        raw = (headers or {}).get(name)
        if raw is None:
            continue
        try:
            value = float(raw) * scale
        except (TypeError, ValueError):
            continue  # an HTTP date or garbage: fall back to our own schedule
        if value == value and value >= 0:  # not NaN
            return min(value, MAX_BACKOFF)
    return min(0.5 * 2**attempt, MAX_BACKOFF)


def _error_body(raw: bytes) -> Any:
    try:
        return json.loads(raw)
    except ValueError:
        return raw.decode("utf-8", "replace")


class WireClient:
    """POSTs JSON to one provider endpoint family; the caller owns and closes each response."""

    def __init__(
        self,
        *,
        model_name: str,
        headers: Mapping[str, str],
        connect_timeout: float = 30.0,
        idle_timeout: float = 300.0,
        max_retries: int = 2,
        response_hooks: Sequence[Callable[[httpx.Response], Any]] = (),
        sleep: Callable[[float], Any] = asyncio.sleep,
        transport: httpx.AsyncBaseTransport | None = None,
        retry_status: frozenset[int] = RETRY_STATUS,
    ) -> None:
        self.model_name = model_name
        self._headers = dict(headers)
        self._timeout = httpx.Timeout(idle_timeout, connect=min(connect_timeout, idle_timeout))
        self._max_retries = max(0, int(max_retries))
        self._hooks = list(response_hooks)
        self._sleep = sleep
        self._transport = transport
        self._retry_status = retry_status
        self._client: httpx.AsyncClient | None = None

    def _http(self) -> httpx.AsyncClient:
        if self._client is None:
            from ketch.wire.tls import verifying_context

            self._client = httpx.AsyncClient(timeout=self._timeout, transport=self._transport,
                                             event_hooks={"response": self._hooks}, verify=verifying_context())
        return self._client

    async def post(self, url: str, body: bytes, *, stream: bool, headers: Mapping[str, str] | None = None) -> httpx.Response:
        """Send ``body``; a 2xx/3xx response is returned open (``stream``: unread). Retried: the
        statuses of ``retry_status`` (default :data:`RETRY_STATUS`), failed connects and timeouts before
        the response, up to ``max_retries`` times."""
        client = self._http()
        sent = {**self._headers, "content-type": "application/json", **(headers or {})}
        if stream:
            sent.setdefault("accept", "text/event-stream")
        for attempt in range(self._max_retries + 1):
            last = attempt == self._max_retries
            try:
                response = await client.send(client.build_request("POST", url, headers=sent, content=body), stream=True)
            except httpx.TimeoutException as exc:
                if not last:  # nothing answered (connect, or silence before the headers): send it again
                    await self._sleep(backoff(attempt, None))
                    continue
                phase = ("connect" if isinstance(exc, httpx.ConnectTimeout) else
                         "write" if isinstance(exc, httpx.WriteTimeout) else "read")
                raise ModelTimeoutError(self.model_name, str(exc) or type(exc).__name__, phase=phase) from exc
            except httpx.TransportError as exc:
                if not last and isinstance(exc, httpx.ConnectError):
                    await self._sleep(backoff(attempt, None))
                    continue
                phase = "connect" if isinstance(exc, httpx.ConnectError) else None
                raise ModelConnectionError(self.model_name, str(exc) or type(exc).__name__, phase=phase) from exc
            if response.status_code < 400:
                if not stream:
                    await response.aread()
                return response
            raw = await response.aread()
            await response.aclose()
            if response.status_code in self._retry_status and not last:
                await self._sleep(backoff(attempt, response.headers))
                continue
            # the request rides along as the cause: error reports name the URL that was tried (core.errors)
            status_error = httpx.HTTPStatusError(f"HTTP {response.status_code}", request=response.request, response=response)
            raise ModelHTTPError(response.status_code, self.model_name, _error_body(raw),
                                 headers=dict(response.headers)) from status_error
        raise AssertionError("unreachable")  # pragma: no cover

    async def aclose(self) -> None:
        if self._client is not None:
            client, self._client = self._client, None
            await client.aclose()


async def read_lines(response: httpx.Response, model_name: str) -> AsyncIterator[str]:
    """The lines of a streamed body; a silence longer than the idle timeout or a dropped
    connection is raised as the model error the loop retries or reports."""
    try:
        async for line in response.aiter_lines():
            yield line
    except httpx.TimeoutException as exc:
        raise ModelTimeoutError(model_name, str(exc) or type(exc).__name__, phase="read") from exc
    except httpx.TransportError as exc:
        raise ModelConnectionError(model_name, str(exc) or type(exc).__name__, phase="read") from exc
