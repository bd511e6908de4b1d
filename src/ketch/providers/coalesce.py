"""Merge a provider's one-token-per-event SSE stream into fewer, larger events.

Providers stream answers as one server-sent event per token, and every event costs the SDK
stack about 2 ms of CPU (the provider SDK builds a typed chunk, pydantic-ai passes it
through its layered event iterators): 40 % of a core at 200 tokens/s, far more than
drawing the text. This module sits under the SDK as an httpx response hook and, while text
is streaming, reads the body in bursts (pausing up to one window, default 100 ms, after a
read that waited for the network) and merges consecutive text-like deltas of a burst into
one event of the same shape:

- Chat Completions: ``choices[0].delta`` with one of ``content`` / ``reasoning_content`` /
  ``reasoning``, or a continuation of one tool call's ``function.arguments``;
- Responses: ``response.*.delta`` events (output text, reasoning text and summaries,
  function-call arguments, refusals);
- Anthropic Messages: ``content_block_delta`` with a text, thinking or input-JSON delta;
- Gemini: a chunk whose one unfinished candidate holds one text (or thought) part.

Two events merge only when they are identical apart from that text (and apart from the
per-event ``sequence_number`` and ``obfuscation`` padding). Anything else (a role change, a
finish reason, usage, a new tool call, ``[DONE]``, a comment, an event this module does not
know) ends the merge and passes through byte for byte, and the first token of an answer is
not held. A token waits at most about one window. ``KETCH_COALESCE_MS`` sets the window;
``0`` turns merging off.
"""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import AsyncIterator
from typing import Any

import httpx2

from ketch.wire.hook_sse import ByteStream, wrappable_sse

DEFAULT_WINDOW_MS = 100.0

_CHAT_TEXT_KEYS = ("content", "reasoning_content", "reasoning")
_RESPONSES_DELTA_TYPES = frozenset(
    {
        "response.output_text.delta",
        "response.reasoning_text.delta",
        "response.reasoning_summary_text.delta",
        "response.function_call_arguments.delta",
        "response.custom_tool_call_input.delta",
        "response.refusal.delta",
    }
)
_ANTHROPIC_DELTA_FIELDS = {"text_delta": "text", "thinking_delta": "thinking", "input_json_delta": "partial_json"}
_VOLATILE = ("sequence_number", "obfuscation")


def window_seconds() -> float:
    """The merge window from ``KETCH_COALESCE_MS`` (0 turns merging off), in seconds."""
    raw = os.environ.get("KETCH_COALESCE_MS", "").strip()
    try:
        value = float(raw) if raw else DEFAULT_WINDOW_MS
    except ValueError:
        value = DEFAULT_WINDOW_MS
    return max(value, 0.0) / 1000


def response_hook(window: float | None = None) -> Any:
    """An httpx2 ``response`` event hook that coalesces successful SSE bodies."""
    seconds = window_seconds() if window is None else window

    async def coalesce_sse(response: httpx2.Response) -> None:
        if seconds > 0 and wrappable_sse(response):
            response.stream = CoalescedStream(response.stream, seconds)  # type: ignore[arg-type]

    return coalesce_sse


# ------------------------------------------------------------------ one event


def _text_slot(data: dict[str, Any]) -> tuple[dict[str, Any], str] | None:
    """The dict and key holding this event's mergeable text, or None if it has none."""
    kind = data.get("type")
    if kind in _RESPONSES_DELTA_TYPES:
        if isinstance(data.get("delta"), str) and not data.get("logprobs"):
            return data, "delta"
        return None
    if kind == "content_block_delta":
        delta = data.get("delta")
        if isinstance(delta, dict):
            key = _ANTHROPIC_DELTA_FIELDS.get(delta.get("type"))  # type: ignore[arg-type]
            if key and isinstance(delta.get(key), str):
                return delta, key
        return None
    if "candidates" in data:
        return _gemini_slot(data.get("candidates"))
    choices = data.get("choices")
    if not isinstance(choices, list) or len(choices) != 1 or data.get("usage") is not None:
        return None
    choice = choices[0]
    if not isinstance(choice, dict) or choice.get("finish_reason") is not None or choice.get("logprobs"):
        return None
    delta = choice.get("delta")
    if not isinstance(delta, dict):
        return None
    found: tuple[dict[str, Any], str] | None = None
    for key in _CHAT_TEXT_KEYS:
        value = delta.get(key)
        if value is None:
            continue
        if not isinstance(value, str) or found:
            return None
        found = (delta, key)
    calls = delta.get("tool_calls")
    if calls is not None:
        if found or not isinstance(calls, list) or len(calls) != 1 or not isinstance(calls[0], dict):
            return None
        call = calls[0]
        function = call.get("function")
        if call.get("id") is not None or not isinstance(function, dict) or function.get("name") is not None:
            return None
        if not isinstance(function.get("arguments"), str):
            return None
        found = (function, "arguments")
    if found and any(value is not None for key, value in delta.items() if key not in (*_CHAT_TEXT_KEYS, "tool_calls")):
        return None  # a role or anything else besides the text: not a plain continuation
    return found


def _gemini_slot(candidates: Any) -> tuple[dict[str, Any], str] | None:
    """Gemini: one candidate, not finished, whose content is one plain text (or thought) part."""
    if not isinstance(candidates, list) or len(candidates) != 1 or not isinstance(candidates[0], dict):
        return None
    candidate = candidates[0]
    if set(candidate) - {"content", "index"}:
        return None  # a finish reason, grounding or safety data: passes through untouched
    content = candidate.get("content")
    parts = content.get("parts") if isinstance(content, dict) else None
    if not isinstance(parts, list) or len(parts) != 1 or not isinstance(parts[0], dict):
        return None
    part = parts[0]
    if set(part) - {"text", "thought"} or not isinstance(part.get("text"), str):
        return None  # a signature, a function call or anything else
    return part, "text"


class _Event:
    """One parsed, mergeable SSE event: its text taken out, the rest is its signature."""

    __slots__ = ("name", "data", "slot", "text", "raw", "sequence")

    def __init__(self, name: str | None, data: dict[str, Any], slot: tuple[dict[str, Any], str], raw: bytes) -> None:
        self.name = name
        self.data = data
        self.slot = slot
        self.raw = raw
        holder, key = slot
        self.text: str = holder[key]
        holder[key] = ""
        self.sequence = data.pop("sequence_number", None)
        data.pop("obfuscation", None)

    def same_kind(self, other: _Event) -> bool:
        return self.name == other.name and self.data == other.data


def _parse(raw: bytes) -> _Event | None:
    """``raw`` (one event, blank line included) as a mergeable event, or None."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        return None
    name: str | None = None
    payload: str | None = None
    for line in text.split("\n"):  # not splitlines(): U+2028 and friends may sit inside JSON strings
        line = line.removesuffix("\r")
        if not line:
            continue
        field, _, value = line.partition(":")
        if value.startswith(" "):
            value = value[1:]
        if field == "event" and name is None:
            name = value
        elif field == "data" and payload is None:
            payload = value
        else:
            return None  # ids, retries, comments, multi-line data: pass through untouched
    if not payload or payload[0] != "{":
        return None
    try:
        data = json.loads(payload)
    except ValueError:
        return None
    if not isinstance(data, dict):
        return None
    slot = _text_slot(data)
    return _Event(name, data, slot, raw) if slot else None


def _merged(events: list[_Event]) -> bytes:
    """One event carrying the text of all ``events`` (which are all the same kind)."""
    if len(events) == 1:
        return events[0].raw
    first = events[0]
    holder, key = first.slot
    holder[key] = "".join(e.text for e in events)
    last_sequence = events[-1].sequence
    if last_sequence is not None:
        first.data["sequence_number"] = last_sequence
    body = json.dumps(first.data, separators=(",", ":"))  # ASCII: no character can read as a line break
    head = f"event: {first.name}\n" if first.name is not None else ""
    return f"{head}data: {body}\n\n".encode()


def _split_events(buffer: bytearray) -> list[bytes]:
    """Remove and return every complete event (with its terminating blank line) in ``buffer``."""
    out: list[bytes] = []
    start = 0
    while True:
        lf = buffer.find(b"\n\n", start)
        crlf = buffer.find(b"\r\n\r\n", start)
        if lf < 0 and crlf < 0:
            break
        if crlf >= 0 and (lf < 0 or crlf < lf):
            end = crlf + 4
        else:
            end = lf + 2
        out.append(bytes(buffer[start:end]))
        start = end
    del buffer[:start]
    return out


# ------------------------------------------------------------------ the stream

_END = object()
_WAKE = object()
_NETWORK_WAIT = 0.001
"""A read that took longer than this waited for the network (rather than for bytes buffered)."""


class _Merger:
    """Events in, merged events out: consecutive events of one kind become one."""

    def __init__(self) -> None:
        self.out: list[bytes] = []
        self.held: list[_Event] = []

    def add(self, raw: bytes) -> None:
        event = _parse(raw)
        if event is None:
            self._release()
            self.out.append(raw)
            return
        if self.held and not self.held[0].same_kind(event):
            self._release()
        self.held.append(event)

    def _release(self) -> None:
        if self.held:
            self.out.append(_merged(self.held))
            self.held = []

    @property
    def pending(self) -> bool:
        return bool(self.out or self.held)

    def take(self) -> bytes:
        self._release()
        data = b"".join(self.out)
        self.out = []
        return data


def coalesce_events(raw_events: list[bytes]) -> tuple[bytes, bool]:
    """``raw_events`` with consecutive same-kind deltas merged, and whether the last event
    was mergeable text (a stream in the middle of an answer)."""
    merger = _Merger()
    for raw in raw_events:
        merger.add(raw)
    streaming = bool(merger.held)
    return merger.take(), streaming


class CoalescedStream(ByteStream):
    """Wraps a response body; yields the same SSE stream with text deltas merged.

    A reader task pulls the body into a queue. While text is streaming, after a read that
    had to wait for the network it pauses ``window`` seconds, so the next tokens gather in
    the socket buffer and come in one read, one pass through the event loop. The consumer
    merges what is queued and hands it on once the reader is waiting for the network
    (never while bytes are already here or the reader is about to take them), so a token is
    held at most about one window. Iterating a second time (the OpenAI SDK drains the rest
    of the body after ``[DONE]``) continues where the first iteration stopped; the reader
    stops when the body ends or the response is closed."""

    def __init__(self, inner: httpx2.AsyncByteStream, window: float) -> None:
        self._inner = inner
        self._window = window
        self._queue: asyncio.Queue[Any] = asyncio.Queue()
        self._reader: asyncio.Task[None] | None = None
        self._buffer = bytearray()
        self._text_streaming = False
        self._sleeping = False
        self._read_started = 0.0
        self._ended = False

    async def _read(self) -> None:
        loop = asyncio.get_running_loop()
        chunks = self._inner.__aiter__()
        put = self._queue.put_nowait
        try:
            while True:
                started = self._read_started = loop.time()
                try:
                    chunk = await chunks.__anext__()
                except StopAsyncIteration:
                    put(_END)
                    return
                put(chunk)
                if self._text_streaming and loop.time() - started > _NETWORK_WAIT:
                    self._sleeping = True
                    try:
                        await asyncio.sleep(self._window)
                    finally:
                        self._sleeping = False
                    self._read_started = loop.time()
                    put(_WAKE)
        except BaseException as exc:  # handed to the consumer, which raises it in its own task
            put(exc)
            if isinstance(exc, asyncio.CancelledError):
                raise

    def _hold_for(self, now: float) -> float | None:
        """How long to wait before handing on what is merged (None: wait for the reader)."""
        if self._sleeping:
            return None  # it puts a wake-up when it reads again
        return self._read_started + _NETWORK_WAIT - now

    async def __aiter__(self) -> AsyncIterator[bytes]:
        if self._ended:
            return
        if self._reader is None:
            self._reader = asyncio.create_task(self._read())
        loop = asyncio.get_running_loop()
        queue, buffer = self._queue, self._buffer
        merger = _Merger()
        timer: asyncio.TimerHandle | None = None
        try:
            while True:
                item = await queue.get()
                if item is _END or isinstance(item, BaseException):
                    self._ended = True
                    tail = merger.take() + bytes(buffer)
                    buffer.clear()
                    if tail:
                        yield tail
                    if item is _END:
                        return
                    raise item
                if item is _WAKE:
                    if timer is not None:
                        timer.cancel()  # this was it, or the reader's own; re-armed below if needed
                        timer = None
                else:
                    buffer += item
                    for raw in _split_events(buffer):
                        merger.add(raw)
                    self._text_streaming = bool(merger.held)
                if not queue.empty() or not merger.pending:
                    continue
                wait = self._hold_for(loop.time())
                if wait is None:
                    continue
                if wait > 0:
                    if timer is None:
                        timer = loop.call_later(wait, queue.put_nowait, _WAKE)
                    continue
                if timer is not None:
                    timer.cancel()
                    timer = None
                yield merger.take()
        finally:
            if timer is not None:
                timer.cancel()

    async def aclose(self) -> None:
        reader, self._reader = self._reader, None
        self._ended = True
        if reader is not None and not reader.done():
            reader.cancel()
            await asyncio.wait({reader})  # what it read was handed over, or is moot now
        await self._inner.aclose()
