"""Where compaction starts and where it aims: the high- and low-water marks of a request, the
most one new tool output may take, and the most a kept summary may take.

All in ketch's own estimate (chars/4), from the prune limit as the server's counts corrected it
(``calibration``): a server that counts 1.6 times the estimate leaves 1/1.6 of the room.

In a large window the instructions and tool schemas are a small part of the limit, and the
usual marks hold: compaction starts at the limit and cuts to 60 % of it, a summary is written
only when nothing cheaper brings the request under the limit, a new output may take half the
history's room and a summary about 2,000 tokens.

In a small window (a local server's 4k, where the compact profile alone is half the limit) 60 %
of the limit is at or below the instructions and tools, so that mark leaves the history nothing
and every step compacts, and a summary of 2,000 tokens is more than the history's whole room: a
summary was written at about every step, each as big as the room, and the next step was over
the limit again. There the marks are shares of the history's own room (the limit less the
instructions and tools): the low-water mark keeps :data:`SMALL_LOW` of it, a new output takes
at most :data:`SMALL_OUTPUT` of it, a kept summary at most :data:`SMALL_SUMMARY`, and a summary
is written when placeholders alone leave no room for one more step's output (so a compaction
is always followed by at least one step that only appends).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from ketch.context.prune_plan import SUMMARY_RESERVE_TOKENS

PRUNE_TARGET = 0.6
"""The low-water mark: share of the prune limit (the high-water mark) a pruned request is cut to.
Between two compactions every request only appends to the one before, so the provider's prompt
cache serves all of it; a compaction rewrites the history once and costs one uncached request.
Cutting to 60 % leaves 40 % of the budget for the steps that follow, so compactions come in
chunks, far apart, rather than one slide per step near the limit."""

SUMMARY_ABOVE = 1.0
"""A summary (an auxiliary model call that replaces whole turns) is written only when dropping
reasoning and placeholdering older results cannot bring the request under this share of the
prune limit; short of that, those rungs go as far toward :data:`PRUNE_TARGET` as they reach."""

OUTPUT_SHARE = 0.5
"""The most of the history's room one new tool output may take whole (``output_fit``)."""

SMALL_LOW = 0.4
"""In a small window: share of the history's room a compaction cuts the history to. A window is
small when :data:`PRUNE_TARGET` of the limit would leave the history less than this."""

SMALL_OUTPUT = 0.25
"""In a small window: the most of the history's room one new tool output may take whole, so
that after a compaction two steps' outputs fit before the next one."""

SMALL_SUMMARY = 0.15
"""In a small window: the most of the history's room the kept summary (with ketch's record of
the steps) may take; it replaces steps worth at least twice as much."""

STEP_TOKENS = 64
"""Tokens counted for one step besides its output: the call, the result's framing, the line
naming a cut."""


MIN_SMALL_ROOM = 512
"""The least room the shares of a small window are taken of: with less (the instructions and tools
alone near or over the limit) no step fits beside them, and the usual marks make each request as
small as the ladder can (a summary of everything before the newest step)."""


@dataclass(frozen=True)
class Marks:
    """The marks of one request, in ketch's estimated tokens."""

    high: int
    """The request's tokens at which compaction starts (the prune limit)."""
    low: int
    """What a compaction cuts the request to (as far as dropping reasoning and placeholders reach)."""
    summarize_above: int
    """A summary is written only when those cheaper rungs leave the request above this."""
    output: int
    """The most one new tool output may take whole."""
    summary: int
    """The most the kept summary message may take."""
    small: bool
    """Whether the marks are shares of the history's room (a small window)."""


def marks(limit: int, reserved: int, unscale: Callable[[int], int]) -> Marks:
    """The marks of a request whose prune limit is ``limit`` (as the server counts) and whose
    instructions and tool schemas take ``reserved`` (as ketch estimates); ``unscale`` turns the
    server's count into ketch's estimate (``Calibration.unscale``)."""
    high = unscale(limit)
    room = max(0, high - reserved)
    low = unscale(int(limit * PRUNE_TARGET))
    if low - reserved >= room * SMALL_LOW or room < MIN_SMALL_ROOM:
        return Marks(high=high, low=low, summarize_above=unscale(int(limit * SUMMARY_ABOVE)),
                     output=int(room * OUTPUT_SHARE), summary=SUMMARY_RESERVE_TOKENS, small=False)
    output = int(room * SMALL_OUTPUT)
    return Marks(high=high, low=reserved + int(room * SMALL_LOW),
                 summarize_above=high - output - STEP_TOKENS,
                 output=output, summary=int(room * SMALL_SUMMARY), small=True)


__all__ = ["Marks", "OUTPUT_SHARE", "PRUNE_TARGET", "SMALL_LOW", "SMALL_OUTPUT", "SMALL_SUMMARY", "SUMMARY_ABOVE", "marks"]
