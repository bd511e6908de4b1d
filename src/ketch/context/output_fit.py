"""A new tool output too big for its window, cut to fit: head and tail kept, the middle named.

In a small window (a local server's 4k or 8k) one file read can be most of what the history
may hold. Sent whole, every later step passes the prune limit, and the ladder compacts (or
writes a summary) at every step. Peers cut such an output instead. :func:`fit_new_results`
cuts the results of the newest request, which no request has carried yet (so every earlier
request's bytes stay as they were), to a share of the room the history has (``marks``: the
caller sizes it from the server-corrected count). It keeps the
first and last lines and puts one line in between saying how much was cut and how to read
it (``read_file`` with ``offset`` and ``limit``, or a narrower command). An output that fits
its share is never touched.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import replace

from pydantic_ai.messages import ModelMessage, ModelRequest, ToolReturnPart

MIN_OUTPUT_CHARS = 1_000
"""An output is never cut below this many characters."""

HEAD_SHARE = 0.6
"""Share of what is kept that comes from the output's start (the rest is its end)."""

NOTE_CHARS = 200
"""Characters kept for the line that names the cut (it is part of the output's share)."""

_NUMBERED = re.compile(r"\s*(\d+)\t")


def _how_to_read(tool_name: str, first_cut: str, lines_cut: int) -> str:
    """How the model can read what was cut: a ``read_file`` range where the cut lines carry
    read_file's line numbers, otherwise a narrower call."""
    number = _NUMBERED.match(first_cut)
    if tool_name == "read_file" and number:
        return f"read them with read_file offset={int(number.group(1))} limit={lines_cut}"
    return "ask for a narrower part to see them (fewer lines, a filter, or the output written to a file and read in parts)"


def cut_middle(text: str, max_chars: int, tool_name: str, window: int) -> str | None:
    """``text`` cut to about ``max_chars``: whole lines from its start and its end, and a line
    naming what was cut and how to read it; None when it already fits or nothing whole-line
    can be cut."""
    if len(text) <= max_chars:
        return None
    lines = text.splitlines(keepends=True)
    kept = max(0, max_chars - NOTE_CHARS)  # the note is part of what the output may take
    head_room, tail_room = int(kept * HEAD_SHARE), kept - int(kept * HEAD_SHARE)
    head, used = 0, 0
    while head < len(lines) and used + len(lines[head]) <= head_room:
        used += len(lines[head])
        head += 1
    tail, used = len(lines), 0
    while tail > head and used + len(lines[tail - 1]) <= tail_room:
        used += len(lines[tail - 1])
        tail -= 1
    if tail - head < 1:
        return None
    cut = lines[head:tail]
    chars = sum(map(len, cut))
    note = (f"[… {len(cut):,} lines ({chars:,} characters) cut here so this output fits the model's "
            f"{window:,}-token context window; {_how_to_read(tool_name, cut[0], len(cut))}]\n")
    kept_head = "".join(lines[:head])
    if kept_head and not kept_head.endswith("\n"):
        kept_head += "\n"
    return kept_head + note + "".join(lines[tail:])


def fit_new_results(messages: Sequence[ModelMessage], max_chars: int, window: int) -> list[ModelMessage] | None:
    """``messages`` with the newest request's text tool results cut to ``max_chars`` each
    (never below :data:`MIN_OUTPUT_CHARS`); None when nothing needed cutting."""
    if not messages or not isinstance(messages[-1], ModelRequest):
        return None
    limit = max(MIN_OUTPUT_CHARS, max_chars)
    last = messages[-1]
    parts, changed = [], False
    for part in last.parts:
        if isinstance(part, ToolReturnPart) and isinstance(part.content, str):
            text = cut_middle(part.content, limit, part.tool_name, window)
            if text is not None:
                part, changed = replace(part, content=text), True
        parts.append(part)
    if not changed:
        return None
    return [*messages[:-1], replace(last, parts=parts)]


__all__ = ["MIN_OUTPUT_CHARS", "cut_middle", "fit_new_results"]
