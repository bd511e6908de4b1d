"""Keys ketch holds never leave through a tool's output.

A tool can still come across a key (a file that holds one, ``/proc/<pid>/environ``, an MCP
server that echoes it). Every tool result, every tool error and every live output chunk
passes ``KeyRing`` replacement here before it is stored, shown or sent: the result through
a capability on the agent (built-in and MCP tools alike), the live chunks through the
session's event sink. A chunk that ends in what could be the start of a key keeps that
tail back until the next chunk shows whether it is one.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from pydantic_ai.capabilities import AbstractCapability

from ketch.config.keyring import KeyRing

MARKER = "[key removed by ketch]"


def redact_keys(text: str, ring: KeyRing) -> str:
    for key in ring.values:
        if key in text:
            text = text.replace(key, MARKER)
    return text


def redact_value(value: Any, ring: KeyRing) -> Any:
    """``value`` with every key replaced in its strings (lists, tuples and dicts walked)."""
    if not ring.values:
        return value
    if isinstance(value, str):
        return redact_keys(value, ring)
    if isinstance(value, list):
        return [redact_value(v, ring) for v in value]
    if isinstance(value, tuple):
        return tuple(redact_value(v, ring) for v in value)
    if isinstance(value, dict):
        return {redact_value(k, ring): redact_value(v, ring) for k, v in value.items()}
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        changes = {f.name: redact_value(getattr(value, f.name), ring) for f in dataclasses.fields(value) if f.init}
        return dataclasses.replace(value, **changes)
    return value


def _derived_views() -> tuple[type, ...]:
    from ketch.protocol import events as ev

    return (ev.ToolCallStarted, ev.ToolCallFinished, ev.ApprovalRequested, ev.ApprovalResolved, ev.Notice)


DERIVED_VIEWS: tuple[type, ...] = _derived_views()
"""Events built from a tool's input or output (the call's arguments as shown, its one-line
summary, the diff of an edit, the approval preview, a notice about what a command did): the
session passes each through ``redact_value`` before it is stored or shown, like the result."""


@dataclass
class RedactToolOutput(AbstractCapability[Any]):
    """Replaces held keys in what any tool returns or fails with, before the model,
    the store or a front end sees it."""

    ring: KeyRing = field(default_factory=lambda: KeyRing(frozenset(), ()))

    @classmethod
    def get_serialization_name(cls) -> str | None:
        return None

    async def after_tool_execute(self, ctx: Any, *, call: Any, tool_def: Any, args: Any, result: Any) -> Any:
        return redact_value(result, self.ring)

    async def wrap_tool_execute(self, ctx: Any, *, call: Any, tool_def: Any, args: Any, handler: Any) -> Any:
        """Failures too: ``ToolFailed``/``ModelRetry`` and the parts the SDK already wrapped them in
        skip ``on_tool_execute_error``, so their text is cleaned here on the way out."""
        from pydantic_ai.exceptions import ModelRetry, ToolFailed, ToolFailedError, ToolRetryError

        try:
            return await handler(args)
        except ToolFailed as exc:
            clean = redact_keys(exc.message, self.ring)
            if clean == exc.message:
                raise
            raise ToolFailed(clean) from None
        except ModelRetry as exc:
            clean = redact_keys(exc.message, self.ring)
            if clean == exc.message:
                raise
            raise ModelRetry(clean) from None
        except ToolFailedError as exc:
            exc.tool_failed.content = redact_value(exc.tool_failed.content, self.ring)
            raise
        except ToolRetryError as exc:
            exc.tool_retry.content = redact_value(exc.tool_retry.content, self.ring)
            raise

    async def on_tool_execute_error(self, ctx: Any, *, call: Any, tool_def: Any, args: Any, error: Exception) -> Any:
        message = str(error)
        clean = redact_keys(message, self.ring)
        if clean != message:
            from pydantic_ai.exceptions import ToolFailed

            raise ToolFailed(clean) from None
        raise error


class ChunkRedactor:
    """Live output chunks of one call with keys replaced, even across chunk boundaries."""

    def __init__(self, ring: KeyRing) -> None:
        self.ring = ring
        self._held: dict[str, str] = {}

    def feed(self, stream_id: str, text: str) -> str:
        text = redact_keys(self._held.pop(stream_id, "") + text, self.ring)
        tail = self._partial_tail(text)
        if tail:
            self._held[stream_id] = text[-tail:]
            text = text[:-tail]
        return text

    def _partial_tail(self, text: str) -> int:
        """Length of the longest end of ``text`` that is the start of some key."""
        best = 0
        for key in self.ring.values:
            window = text[-(len(key) - 1):] if len(key) > 1 else ""
            i = window.find(key[0]) if window else -1
            while i != -1:  # the first start that fits is the longest tail
                if key.startswith(window[i:]):
                    best = max(best, len(window) - i)
                    break
                i = window.find(key[0], i + 1)
        return best


def redacting_emit(emit: Callable[[Any], None], ring: KeyRing) -> Callable[[Any], None]:
    """``emit`` with the text of live tool output chunks passed through a ``ChunkRedactor``."""
    if not ring.values:
        return emit
    from ketch.protocol.events import ToolOutputChunk

    chunks = ChunkRedactor(ring)

    def emit_redacted(event: Any) -> None:
        if isinstance(event, ToolOutputChunk):
            text = chunks.feed(f"{event.call_id}\0{event.stream}", event.text)
            if not text:
                return
            event = dataclasses.replace(event, text=text)
        emit(event)

    return emit_redacted
