"""The question asked once per folder before the first turn: trust its repository config?

It lists exactly what the folder's ``.ketch/config.toml`` would add (each allow rule, each
hook command, each MCP server's command line, each connection change); a change to where one
of the user's keys is sent is marked. Until it is answered no session exists, so nothing the
repository names has run. Escape means no. The same overlay then asks about each of the
folder's MCP servers by itself, showing its exact launch (``extensions.mcp_approval``).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any
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
    heading: str = ""
    """The first line instead of the folder's (an MCP server's question names the server)."""
    labels: tuple[str, ...] = ()
    """The two choices instead of the folder's."""


class TrustOverlay:
    LABELS = ["Trust this folder (y)", "Do not trust it: ignore what it adds (n)"]

    def __init__(self, question: TrustQuestion, done: Callable[[bool], None]) -> None:
        self.question = question
        self._done = done
        self.selected = 1

    def fragments(self, width: int) -> Fragments:
        q = self.question
        head = "changed since you trusted it" if q.changed else "is not trusted yet"
        if q.heading:
            out: Fragments = [("class:overlay.title", f"{q.heading}.\n"), ("", f" From {q.folder}/{q.config_file}, it:\n")]
        else:
            out = [("class:overlay.title", f"{q.folder} {head}.\n")]
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
        out += _choice_rows(list(q.labels) or self.LABELS, self.selected)
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


MAX_QUESTIONS = 64
"""The folder's question and one per MCP server: more than a config names is a loop."""


async def ask_each(next_question: Callable[[], Awaitable[Any]], push_overlay: Callable[[Any], Any]) -> None:
    """Ask the folder's question, then each of its MCP servers', until none is left: each
    answer is stored before the next question is looked up."""
    asked: set[tuple[str, tuple[tuple[str, bool], ...]]] = set()
    for _ in range(MAX_QUESTIONS):
        question = await next_question()
        if question is None:
            return
        seen = (question.heading, tuple(question.items))
        if seen in asked:
            return  # an answer that did not stick: asking again would never end
        asked.add(seen)
        answered: asyncio.Future[bool] = asyncio.get_running_loop().create_future()
        push_overlay(TrustOverlay(question, lambda ok, f=answered: f.done() or f.set_result(ok)))
        trusted = await answered
        await asyncio.to_thread(question.answer, trusted)
