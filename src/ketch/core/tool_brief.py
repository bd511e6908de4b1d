"""The short result of a finished tool call, as front ends show it and the store keeps it.

A tool's full result goes to the model; ``ToolCallFinished.summary`` carries a brief one
made here from it: for the shell the exit status, the first and the last lines of output
with the count of those left out between, every stderr line up to the first and last few
(marked ``[stderr] ``: the cause of a failure is often an early stderr line above pages of
stdout), and the sandbox's notes (why it refused, what the user decided) whole; for reads the range and line count, for searches the match
count and the first hits. Being stored with the session's events, the same brief is what a
resumed session shows. Pure text, no I/O.
"""

from __future__ import annotations

import re
from collections import deque
from typing import Any

TAIL_LINES = 5
HITS = 3
LINE_CHARS = 200
FALLBACK_CHARS = 400
STDERR_MARK = "[stderr] "

_EXIT = re.compile(r"^(exit code -?\d+|killed by signal \S+)$")
_NUMBERED = re.compile(r"^\s*(\d+)\t")
_GREP_HIT = re.compile(r"^(.+?):(\d+):")
_MORE_MATCHES = re.compile(r"^\((\d+)\+? more (?:matches|files) not shown")


HEAD_LINES = 3
STDERR_LINES = 3
"""Stderr lines kept from each end of a call's stderr, wherever they fall."""
GAP = "gap"
"""The stream name of a row that stands for lines left out (its text is their count)."""


class _Lines:
    """What is kept of one call's output: numbered (stream, line) rows."""

    def __init__(self, tail: int) -> None:
        self.count = 0
        self.head: list[tuple[int, str, str]] = []
        self.tail: deque[tuple[int, str, str]] = deque(maxlen=tail)
        self.err_first: list[tuple[int, str, str]] = []
        self.err_last: deque[tuple[int, str, str]] = deque(maxlen=STDERR_LINES)

    def push(self, stream: str, line: str) -> None:
        row = (self.count, stream, line)
        self.count += 1
        if len(self.head) < HEAD_LINES:
            self.head.append(row)
        self.tail.append(row)
        if stream == "stderr":
            if len(self.err_first) < STDERR_LINES:
                self.err_first.append(row)
            else:
                self.err_last.append(row)

    def rows(self) -> list[tuple[str, str]]:
        """The kept rows in order, a ``(GAP, "N")`` row where N lines were left out."""
        kept = sorted({*self.head, *self.tail, *self.err_first, *self.err_last})
        out: list[tuple[str, str]] = []
        seen = -1
        for index, stream, line in kept:
            if index > seen + 1:
                out.append((GAP, str(index - seen - 1)))
            out.append((stream, line))
            seen = index
        return out


class OutputTails:
    """What each running call wrote, as much as its brief shows: the first lines, the last
    lines, and the first and last stderr lines, each with the stream it came from."""

    def __init__(self, lines: int = TAIL_LINES) -> None:
        self._lines = lines
        self._calls: dict[str, _Lines] = {}
        self._partial: dict[str, tuple[str, str]] = {}

    def add(self, call_id: str, text: str, stream: str) -> None:
        """Take one chunk of live output."""
        kept = self._calls.setdefault(call_id, _Lines(self._lines))
        prev_stream, prev = self._partial.pop(call_id, (stream, ""))
        if prev and prev_stream != stream:
            kept.push(prev_stream, prev)
            prev = ""
        *complete, rest = (prev + text.replace("\r\n", "\n")).split("\n")
        for line in complete:
            kept.push(stream, line.rsplit("\r", 1)[-1])
        if rest:
            self._partial[call_id] = (stream, rest)

    def pop(self, call_id: str) -> list[tuple[str, str]]:
        """The call's kept (stream, line) rows, unfinished last line included, with
        ``(GAP, count)`` rows where lines were left out; forgets the call."""
        kept = self._calls.pop(call_id, None)
        partial = self._partial.pop(call_id, None)
        if partial is not None:
            kept = kept or _Lines(self._lines)
            kept.push(*partial)
        return kept.rows() if kept is not None else []


def _clip(line: str) -> str:
    line = line.replace("\t", "    ").rstrip()
    return line if len(line) <= LINE_CHARS else line[: LINE_CHARS - 1] + "…"


def _fallback(text: str) -> str:
    text = text.strip()
    return text if len(text) <= FALLBACK_CHARS else text[: FALLBACK_CHARS - 1] + "…"


def brief(name: str, args: dict[str, Any], content: str, *, is_error: bool,
          tail: list[tuple[str, str]] | None = None) -> str:
    """The summary of one finished call (``tail``: live (stream, line) pairs, if any)."""
    if name == "shell":
        started = _BACKGROUND.match(content) if args.get("background") is True and not is_error else None
        return f"running in the background as {started.group(1)} · /bashes lists it" if started else _shell(content, is_error, tail or [])
    if is_error:
        lines = content.strip().splitlines()
        return "\n".join(_clip(x) for x in lines[:3]) + (f"\n… {len(lines) - 3} more lines" if len(lines) > 3 else "")
    if name == "read_file":
        return _read(content)
    if name == "grep":
        return _hits(content, _GREP_HIT, "match", "matches")
    if name in ("glob", "list_dir"):
        return _listing(name, content)
    return _fallback(content)


_BACKGROUND = re.compile(r"Started in the background as (bg-[0-9a-f]+)\.")
_NOTE = re.compile(r"^\[(the sandbox refused|approval = never|to run it unconfined|the user declined|warning: ).*\]$")


def _gap(count: int) -> str:
    return f"… {count} line{'' if count == 1 else 's'} not shown"


def _shell(content: str, is_error: bool, tail: list[tuple[str, str]]) -> str:
    lines = content.rstrip().splitlines()
    head = lines[0] if lines else ""
    if _EXIT.match(head):
        status, body = head, lines[1:]
    elif is_error:
        status, body = head, lines[1:]
    else:
        status, body = "exit 0", ([] if lines == ["(no output)"] else lines)
    notes = [x for x in body if _NOTE.match(x.strip())]  # the sandbox's word: never cut
    body = [x for x in body if x.strip() and not _NOTE.match(x.strip())]
    live = [(s, x) for s, x in tail if s == GAP or x.strip()]
    last_live = next((x for s, x in reversed(live) if s != GAP), None)
    rows: list[str] = []
    if last_live is not None and (not body or last_live.rstrip() == body[-1].rstrip()):
        for stream, line in live:
            rows.append(_gap(int(line)) if stream == GAP else (STDERR_MARK if stream == "stderr" else "") + _clip(line))
    elif len(body) > HEAD_LINES + TAIL_LINES:
        rows = [_clip(x) for x in body[:HEAD_LINES]] + [_gap(len(body) - HEAD_LINES - TAIL_LINES)]
        rows += [_clip(x) for x in body[-TAIL_LINES:]]
    else:
        rows = [_clip(x) for x in body]
    return "\n".join([status, *rows, *(x.strip() for x in notes)])


def _read(content: str) -> str:
    numbers = [int(m.group(1)) for line in content.splitlines() if (m := _NUMBERED.match(line))]
    if not numbers:
        return _fallback(content)
    first, last = numbers[0], numbers[-1]
    more = "; more follow" if content.rstrip().endswith(")") and "more lines follow" in content[-80:] else ""
    return f"lines {first}–{last} ({len(numbers)} line{'' if len(numbers) == 1 else 's'}{more})"


def _hits(content: str, pattern: re.Pattern[str], one: str, many: str) -> str:
    lines = content.splitlines()
    hits = [x for x in lines if pattern.match(x)]
    if not hits:
        return _fallback(content)
    total = len(hits)
    more = next((m for x in lines[-1:] if (m := _MORE_MATCHES.match(x))), None)
    plus = ""
    if more is not None:
        total += int(more.group(1))
        plus = "+" if "+ more" in lines[-1] else ""
    files = len({pattern.match(x).group(1) for x in hits})  # type: ignore[union-attr]
    head = f"{total}{plus} {one if total == 1 else many} in {files} file{'' if files == 1 else 's'}"
    return "\n".join([head, *(_clip(x) for x in hits[:HITS])])


def _listing(name: str, content: str) -> str:
    lines = content.splitlines()
    if name == "list_dir":
        entries = [x.strip() for x in lines[1:] if x.startswith("  ")]
        if not entries:
            return _fallback(content)
        return "\n".join([f"{len(entries)} entr{'y' if len(entries) == 1 else 'ies'}", *(_clip(x) for x in entries[:HITS])])
    found = [x for x in lines if x and not x.startswith("(")]
    if not found or content.startswith("No files match"):
        return _fallback(content)
    total = len(found)
    more = _MORE_MATCHES.match(lines[-1]) if lines else None
    if more is not None:
        total += int(more.group(1))
    return "\n".join([f"{total} file{'' if total == 1 else 's'}", *(_clip(x) for x in found[:HITS])])
