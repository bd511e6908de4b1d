"""Split streaming Markdown into blocks that can be committed as they close.

Pure text logic, no terminal: text arrives in arbitrary pieces; a block is *closed* when
nothing that follows can change how it renders (a paragraph or list followed by a blank
line and then an unindented line, a heading line, a fenced code block whose closing fence
has arrived). Closed blocks go to scrollback once; the open remainder is redrawn live.
"""

from __future__ import annotations

import re

_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")
_HEADING = re.compile(r"^ {0,3}#{1,6}(\s|$)")
_LIST_ITEM = re.compile(r"^ {0,3}([-*+]|\d{1,9}[.)])(\s|$)")


class BlockSplitter:
    """Accumulates streamed Markdown and hands back each block once it has closed."""

    def __init__(self) -> None:
        self._lines: list[str] = []
        """Complete lines of the block still open."""
        self._partial = ""
        """The last line, not yet ended by a newline."""
        self._fence: str | None = None
        """The fence marker (e.g. ``` or ~~~~) while inside a code block."""
        self._blank_pending = False
        """A blank line arrived; the block closes unless the next line continues it."""

    @property
    def in_fence(self) -> bool:
        """True while an unclosed code fence is open."""
        return self._fence is not None

    @property
    def open_text(self) -> str:
        """The text of the block still open (what the live region shows)."""
        body = "\n".join(self._lines)
        if self._partial:
            gap = "\n\n" if self._blank_pending else "\n"
            return f"{body}{gap}{self._partial}" if body else self._partial
        return body

    def feed(self, text: str) -> list[str]:
        """Add streamed text; return the blocks it closed, in order."""
        closed: list[str] = []
        data = self._partial + text
        *complete, self._partial = data.split("\n")
        for line in complete:
            self._take_line(line, closed)
        starts_new = self._partial[:1] not in ("", " ", "\t")
        if self._blank_pending and self._fence is None and starts_new:
            self._close_into(closed)
        return closed

    def finish(self) -> list[str]:
        """End of the answer: the blocks still open, now closed."""
        closed: list[str] = []
        if self._partial:
            self._take_line(self._partial, closed)
            self._partial = ""
        self._close_into(closed)
        self._fence = None
        return closed

    def _emit(self) -> str | None:
        lines = self._lines
        self._lines = []
        while lines and not lines[-1].strip():
            lines.pop()
        return "\n".join(lines) if lines else None

    def _close_into(self, closed: list[str]) -> None:
        block = self._emit()
        if block is not None:
            closed.append(block)
        self._blank_pending = False

    def _take_line(self, line: str, closed: list[str]) -> None:
        if self._fence is not None:
            self._lines.append(line)
            stripped = line.strip()
            if stripped.startswith(self._fence) and set(stripped) == {self._fence[0]}:
                self._fence = None
                self._close_into(closed)
            return
        if not line.strip():
            if self._lines:
                self._blank_pending = True
            return
        fence = _FENCE.match(line)
        if fence:
            self._close_into(closed)
            self._lines.append(line)
            self._fence = fence.group(1)
            return
        if _HEADING.match(line):
            self._close_into(closed)
            self._lines.append(line)
            self._close_into(closed)
            return
        if self._blank_pending:
            continues = line[:1] in (" ", "\t") and bool(self._lines) and bool(_LIST_ITEM.match(self._lines[0]))
            if continues:
                self._lines.append("")
            else:
                self._close_into(closed)
            self._blank_pending = False
        self._lines.append(line)
