"""The working line: how long the turn has run, tokens in and out so far, the current tool.

Tokens in and out add up the ``Usage`` events of the turn; text still streaming of the
response in progress counts as an estimate (4 characters a token) until its ``Usage``
arrives, so the figure grows while the answer does.
"""

from __future__ import annotations

import time

from ketch.protocol.events import AgentEvent, ReasoningDelta, TextDelta, ToolCallFinished, ToolCallStarted, Usage


def short_count(n: int) -> str:
    """1234 → '1.2k', 12 → '12'."""
    if n >= 1_000_000:
        return f"{n / 1_000_000:.1f}M"
    if n >= 1000:
        return f"{n / 1000:.1f}k"
    return str(n)


def short_elapsed(seconds: float) -> str:
    """'7s', '1m 05s'."""
    s = int(seconds)
    return f"{s}s" if s < 60 else f"{s // 60}m {s % 60:02d}s"


class TurnMeter:
    """Counts one turn's time and tokens as its events arrive."""

    def __init__(self) -> None:
        self.started_at: float | None = None
        self.input_tokens = 0
        self.output_tokens = 0
        self._streamed_chars = 0
        self.tool = ""
        self._running: dict[str, str] = {}
        self._shown_second = -1

    def start(self) -> None:
        self.started_at = time.monotonic()
        self.input_tokens = self.output_tokens = self._streamed_chars = 0
        self._running.clear()
        self.tool = ""

    def stop(self) -> None:
        self.started_at = None
        self._running.clear()
        self.tool = ""

    def apply(self, event: AgentEvent) -> None:
        if isinstance(event, (TextDelta, ReasoningDelta)):
            self._streamed_chars += len(event.text)
        elif isinstance(event, Usage):
            self.input_tokens += event.input_tokens
            self.output_tokens += event.output_tokens
            self._streamed_chars = 0
        elif isinstance(event, ToolCallStarted):
            self._running[event.call_id] = event.name if not event.agent else f"{event.agent}: {event.name}"
            self.tool = self._running[event.call_id]
        elif isinstance(event, ToolCallFinished):
            self._running.pop(event.call_id, None)
            self.tool = next(reversed(self._running.values()), "") if self._running else ""

    @property
    def output_estimate(self) -> int:
        return self.output_tokens + self._streamed_chars // 4

    def elapsed(self) -> float:
        return 0.0 if self.started_at is None else time.monotonic() - self.started_at

    def tick(self) -> bool:
        """True when the shown second changed (the line must be redrawn)."""
        second = int(self.elapsed()) if self.started_at is not None else -1
        if second != self._shown_second:
            self._shown_second = second
            return True
        return False

    def line(self) -> str:
        """'working 12s · ↑ 1.2k ↓ 340 tokens · shell'."""
        parts = [f"working {short_elapsed(self.elapsed())}",
                 f"↑ {short_count(self.input_tokens)} ↓ {short_count(self.output_estimate)} tokens"]
        if self.tool:
            parts.append(self.tool)
        return " · ".join(parts)
