"""A pager overlay for one tool call's full output (ctrl-o, ``/expand N``).

It takes the live region's keys while open: up/down (j/k) by a line, page up/down (space,
b) by a screen, home/end (g/G), ctrl-o or l for the list of calls, q or esc to close.
Lines are wrapped to the width; the height is what the terminal leaves for the region.
"""

from __future__ import annotations

from collections.abc import Callable

Fragments = list[tuple[str, str]]
STDERR_MARK = "[stderr] "


def wrap(text: str, width: int) -> list[str]:
    """Hard-wrap every line at ``width`` columns (tabs as four spaces)."""
    width = max(10, width)
    out: list[str] = []
    for line in text.replace("\t", "    ").splitlines() or [""]:
        while len(line) > width:
            out.append(line[:width])
            line = line[width:]
        out.append(line)
    return out


class Pager:
    """Scrolls through ``text``; ``on_key`` returns True to close."""

    def __init__(self, title: str, text: str, rows: Callable[[], int],
                 open_list: Callable[[], None] | None = None) -> None:
        self.title = title
        self.text = text
        self._rows = rows
        self._open_list = open_list
        self.top = 0
        self._width = 80

    def _lines(self) -> list[str]:
        return wrap(self.text, self._width - 2)

    def page(self) -> int:
        """Text rows shown at once."""
        return max(3, self._rows() - 2)

    def fragments(self, width: int) -> Fragments:
        self._width = width
        lines = self._lines()
        page = self.page()
        self.top = max(0, min(self.top, len(lines) - page))
        shown = lines[self.top:self.top + page]
        last = self.top + len(shown)
        where = f"lines {self.top + 1}–{last} of {len(lines)}" if lines else "empty"
        keys = "↑↓ space b · g/G · ctrl-o list · q close"
        out: Fragments = [("class:overlay.title", self.title[: max(1, width - len(where) - 4)]),
                          ("class:dim", f"  {where}\n")]
        for line in shown:
            style = "class:error" if line.startswith(STDERR_MARK) else ""
            out.append((style, " " + line + "\n"))
        out.append(("class:dim", keys[: width - 1] + "\n"))
        return out

    def on_key(self, key: str) -> bool:
        page = self.page()
        moves = {"down": 1, "j": 1, "up": -1, "k": -1, "pagedown": page, " ": page, "enter": page,
                 "pageup": -page, "b": -page}
        if key in ("q", "escape"):
            return True
        if key in ("c-o", "l") and self._open_list is not None:
            self._open_list()
            return True
        if key in moves:
            self.top = max(0, self.top + moves[key])
        elif key in ("home", "g"):
            self.top = 0
        elif key in ("end", "G"):
            self.top = max(0, len(self._lines()) - page)
        return False
