"""Server-sent events as the wire models read them: frames split on blank lines, ``data:``
lines joined, JSON payloads decoded strictly, and a stream that stops before its protocol's
end event reported as an error (a cut connection must never pass for a finished answer).
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterable, AsyncIterator, Callable
from dataclasses import dataclass
from typing import Any

import httpx
from pydantic_ai.exceptions import ModelConnectionError, UnexpectedModelBehavior

ENDED_EARLY = "the stream ended without its end-of-answer event"


@dataclass(frozen=True)
class Frame:
    """One event: its ``event:`` name ('' when none) and its ``data:`` lines joined by newlines."""

    event: str
    data: str


async def frames(lines: AsyncIterable[str]) -> AsyncIterator[Frame]:
    """The frames of an SSE body given line by line (comments and ``id:``/``retry:`` ignored;
    a last frame without its blank line still counts)."""
    event, data = "", []
    async for line in lines:
        if not line:
            if data:
                yield Frame(event, "\n".join(data))
            event, data = "", []
        elif line.startswith(":"):
            continue
        elif line.startswith("event:"):
            event = line[6:].strip()
        elif line.startswith("data:"):
            value = line[5:]
            data.append(value[1:] if value.startswith(" ") else value)
    if data:
        yield Frame(event, "\n".join(data))


def _payload(frame: Frame) -> dict[str, Any]:
    try:
        payload = json.loads(frame.data, parse_constant=_no_constant)
    except ValueError as exc:
        raise UnexpectedModelBehavior(f"the provider sent an event that is not JSON ({exc})", frame.data[:500]) from None
    if not isinstance(payload, dict):
        raise UnexpectedModelBehavior("the provider sent an event that is not a JSON object", frame.data[:500])
    return payload


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


async def json_events(
    lines: AsyncIterable[str],
    *,
    model_name: str,
    is_end: Callable[[Frame, dict[str, Any] | None], bool],
    done_sentinel: str | None = None,
) -> AsyncIterator[tuple[Frame, dict[str, Any]]]:
    """``(frame, payload)`` of every JSON event, until the protocol's end: a frame for which
    ``is_end`` holds (it is yielded first), or a ``done_sentinel`` data line such as ``[DONE]``.
    A body that ends before either is a broken connection (``ModelConnectionError``, phase
    ``read``, as a dropped stream is on every wire), never a finished answer."""
    async for frame in frames(lines):
        if done_sentinel is not None and frame.data.strip() == done_sentinel:
            return
        payload = _payload(frame)
        yield frame, payload
        if is_end(frame, payload):
            return
    raise ModelConnectionError(model_name, ENDED_EARLY, phase="read") from httpx.RemoteProtocolError(ENDED_EARLY)
