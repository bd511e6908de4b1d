"""The question asked once per folder before the first turn: trust its repository config?

It lists exactly what the folder's ``.ketch/config.toml`` would add (each allow rule, each
hook command, each MCP server's command line, each connection change); a change to where one
of the user's keys is sent is marked. Until it is answered no session exists, so nothing the
repository names has run. Escape means no.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from ketch.ui.overlays import Fragments, _choice_rows

MARK = "⚠"


@dataclass
class TrustQuestion:
    folder: str
    config_file: str
    items: list[tuple[str, bool]]
    """``(what it adds, marked)`` in config order."""
    changed: bool = False
    """Trusted before with a config that has changed since."""
    answer: Callable[[bool], None] = field(default=lambda trusted: None)
    """Stores the answer (called once, with True to trust)."""


class TrustOverlay:
    LABELS = ["Trust this folder (y)", "Do not trust it: ignore what it adds (n)"]

    def __init__(self, question: TrustQuestion, done: Callable[[bool], None]) -> None:
        self.question = question
        self._done = done
        self.selected = 1

    def fragments(self, width: int) -> Fragments:
        q = self.question
        head = "changed since you trusted it" if q.changed else "is not trusted yet"
        out: Fragments = [("class:overlay.title", f"{q.folder} {head}.\n")]
        out.append(("", f" Its {q.config_file} would add:\n"))
        for text, marked in q.items:
            prefix = f" {MARK} " if marked else "   - "
            style = "class:diff.del" if marked else ""
            line = prefix + text
            while line:
                out.append((style, line[: max(10, width - 1)] + "\n"))
                line = ("     " + line[max(10, width - 1):]) if len(line) > width - 1 else ""
        if any(marked for _t, marked in q.items):
            out.append(("class:dim", f" {MARK} sends one of your keys somewhere this repository chose\n"))
        out += _choice_rows(self.LABELS, self.selected)
        return out

    def on_key(self, key: str) -> bool:
        choice = {"1": 0, "y": 0, "2": 1, "n": 1}.get(key.lower() if len(key) == 1 else key)
        if choice is None and key == "enter":
            choice = self.selected
        if choice is None and key == "escape":
            choice = 1
        if choice is not None:
            self._done(choice == 0)
            return True
        if key in ("up", "down"):
            self.selected = 1 - self.selected
        return False
