"""Finished tool calls: what each one leaves in the transcript, and what the pager shows.

The lines come from the ``ToolCallFinished`` event alone (its ``summary`` is the core's
brief, ``core/tool_brief.py``), so the live session and a resumed one print the same.
Calls are numbered from 1 in the order they finished; ``/expand N`` and ctrl-o use the
number.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from ketch.ui.toolfmt import BULLET, clip, diff_line_style, headline, paint

MAX_DIFF_LINES = 40
MAX_SUMMARY_LINES = 24
"""The brief is already short (``core/tool_brief.py``); this only bounds a strange one."""
OUTPUT_KEEP_CHARS = 200_000
"""Live output kept per call for the pager (its end, when longer)."""
STDERR_MARK = "[stderr] "
ERROR_SGR = "31"
OK_SGR = "32"
DIM_SGR = "2"

_EXIT = re.compile(r"^exit code (-?\d+)$|^killed by signal ")


@dataclass
class CallRecord:
    """One finished call, kept for the pager."""

    number: int
    call_id: str
    name: str
    args: dict[str, Any]
    summary: str = ""
    is_error: bool = False
    diff: str = ""
    denied: str = ""
    """'by user: reason' when the call was refused (it never ran)."""
    output: list[tuple[str, str]] = field(default_factory=list)
    """Live output as it came: (stream, text) chunks."""

    @property
    def failed(self) -> bool:
        """An error, a refusal, or a command that exited non-zero."""
        if self.is_error or self.denied:
            return True
        first = self.summary.split("\n", 1)[0]
        match = _EXIT.match(first) if self.name == "shell" else None
        return match is not None and match.group(1) != "0"

    def live_text(self) -> str:
        """The live output with stderr lines marked (empty when none came)."""
        rows: list[str] = []
        for stream, text in self.output:
            for line in text.replace("\r\n", "\n").splitlines():
                rows.append(STDERR_MARK + line if stream == "stderr" else line)
        return "\n".join(rows)

    def add_output(self, stream: str, text: str) -> None:
        self.output.append((stream, text))
        if sum(len(t) for _, t in self.output) > OUTPUT_KEEP_CHARS * 2:
            joined = "".join(t for _, t in self.output)[-OUTPUT_KEEP_CHARS:]
            self.output = [("stdout", joined)]


def result_lines(record: CallRecord, width: int, *, expandable: bool = False) -> list[str]:
    """ANSI lines committed when a call finishes: its headline, then the result."""
    failed = record.failed
    head = headline(record.name, record.args, width)
    lines = [paint(BULLET, ERROR_SGR if failed else OK_SGR) + paint(head[1:], "1")]
    body: list[str] = []
    inner = max(10, width - 4)
    if record.denied:
        import textwrap

        body += [paint(row, ERROR_SGR) for row in textwrap.wrap(f"denied {record.denied}", inner, break_long_words=True)]
    elif record.diff and not record.is_error:
        rows = record.diff.splitlines()
        body += [paint(clip(row, inner), diff_line_style(row)) for row in rows[:MAX_DIFF_LINES]]
        if len(rows) > MAX_DIFF_LINES:
            body.append(paint(f"… {len(rows) - MAX_DIFF_LINES} more diff lines", DIM_SGR))
    elif record.summary:
        rows = record.summary.splitlines()
        for i, row in enumerate(rows[:MAX_SUMMARY_LINES]):
            style = _summary_style(record, i, row, failed)
            if is_note(row) or row.startswith(STDERR_MARK):  # the cause of a failure: shown whole, wrapped
                body += [paint(part, style) for part in _wrap(row, inner)]
            else:
                body.append(paint(clip(row, inner), style))
        if len(rows) > MAX_SUMMARY_LINES:
            body.append(paint(f"… {len(rows) - MAX_SUMMARY_LINES} more lines", DIM_SGR))
    if expandable and body:
        body[-1] += paint(f"  (ctrl-o · /expand {record.number})", DIM_SGR)
    lines.extend(f"  ⎿ {row}" if i == 0 else f"    {row}" for i, row in enumerate(body))
    return lines


def is_note(row: str) -> bool:
    """A note the core added to a command's result (the sandbox's refusal, the user's answer)."""
    return row.startswith("[") and row.endswith("]") and not row.startswith(STDERR_MARK)


def _wrap(row: str, width: int) -> list[str]:
    return [row[i:i + width] for i in range(0, len(row), width)] or [""]


def _summary_style(record: CallRecord, index: int, row: str, failed: bool) -> str:
    if row.startswith(STDERR_MARK):
        return ERROR_SGR
    if is_note(row):
        return "33"
    if row.startswith("… "):
        return DIM_SGR
    if index == 0 and failed:
        return ERROR_SGR
    if record.is_error:
        return ERROR_SGR
    return "" if index == 0 else DIM_SGR


_FOLDED_TOOLS = ("read_file", "grep", "glob", "list_dir", "web_fetch", "git_diff", "git_log", "git_show", "git_blame")


def is_expandable(record: CallRecord) -> bool:
    """True when the transcript shows less than the call returned (decided from the
    event alone, so a resumed session marks the same calls)."""
    if record.denied or not record.summary:
        return False
    rows = record.summary.splitlines()
    if any(row.startswith("… ") for row in rows) or record.summary.endswith("…") or len(rows) > MAX_SUMMARY_LINES:
        return True
    return record.name in _FOLDED_TOOLS and not record.is_error


def pager_text(record: CallRecord, full: str | None) -> str:
    """Everything the pager shows for a call: the diff, then the full result."""
    parts: list[str] = []
    if record.diff:
        parts.append(record.diff.rstrip("\n"))
    live = record.live_text() if record.name == "shell" else ""
    if record.denied:
        parts.append(f"denied {record.denied}")
    elif live:
        rows = record.summary.splitlines()
        notes = [row for row in rows if is_note(row)]
        parts.append("\n".join([live, *rows[:1], *notes]))
    elif full:
        parts.append(full.rstrip("\n"))
    elif record.summary:
        parts.append(record.summary)
    return "\n\n".join(parts) or "(no output)"


def list_label(record: CallRecord, width: int) -> str:
    """One row of the ctrl-o list: number, mark, headline."""
    mark = "✗" if record.failed else "✓"
    return clip(f"{record.number:>3}. {mark} {headline(record.name, record.args, width)[2:]}", width - 4)
