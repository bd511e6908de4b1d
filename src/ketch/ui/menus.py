"""The two completion menus under the input: ``@path`` files and ``/`` commands.

The token rules and ranking are ``ketch.ui.complete``'s pure functions (``@`` only at the
start of a word; prefix matches above substring matches); commands come from the
injected ``CommandRegistry`` (``match``, ``suggest``, ``get``), plus the UI's own.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ketch.ui.complete import AtToken, find_at_token, insert_completion, rank

MAX_ITEMS = 8


@dataclass
class MenuItem:
    """One row of a menu: what is shown and what goes into the input."""

    label: str
    insert: str
    detail: str = ""


@dataclass
class Menu:
    """An open menu and the span of the input it would replace."""

    kind: str
    """'@' for files, '/' for commands."""
    items: list[MenuItem]
    start: int
    end: int
    selected: int = 0
    extra: dict[str, Any] = field(default_factory=dict)

    def move(self, step: int) -> None:
        """Move the highlight, wrapping around."""
        if self.items:
            self.selected = (self.selected + step) % len(self.items)

    def current(self) -> MenuItem | None:
        """The highlighted item."""
        return self.items[self.selected] if self.items else None


class CommandSource:
    """Adapts the injected command registry for the menu and the slash handler."""

    def __init__(self, registry: Any, ui_commands: dict[str, str]) -> None:
        self._registry = registry
        self._ui = ui_commands

    def names(self) -> dict[str, str]:
        """Every command name → description (registry first, then the UI's own)."""
        found: dict[str, str] = {}
        if self._registry is not None:
            for command in self._registry.match(""):
                found[command.name] = command.description
        for name, desc in self._ui.items():
            found.setdefault(name, desc)
        return found

    def resolve(self, name: str) -> tuple[str, Any]:
        """(canonical name, registry command or None) for a name or alias."""
        command = self._registry.get(name) if self._registry is not None else None
        return (command.name, command) if command is not None else (name, None)

    def match(self, prefix: str) -> list[MenuItem]:
        """Commands for a typed prefix: the registry's ranking, else prefix then fuzzy."""
        if self._registry is not None:
            found = self._registry.match(prefix)
            return [MenuItem(f"/{c.name}", c.name, c.description) for c in found]
        names = self.names()
        needle = prefix.lower()
        starts = sorted(n for n in names if n.startswith(needle))
        fuzzy = sorted(n for n in names if n not in starts and _subsequence(needle, n))
        return [MenuItem(f"/{n}", n, names[n]) for n in starts + fuzzy]

    def suggest(self, name: str) -> str | None:
        """The closest known command for a mistyped one."""
        if self._registry is not None:
            close = self._registry.suggest(name)
            return close[0] if close else None
        import difflib

        hits = difflib.get_close_matches(name, list(self.names()), n=1, cutoff=0.5)
        return hits[0] if hits else None


def _subsequence(needle: str, name: str) -> bool:
    it = iter(name)
    return all(ch in it for ch in needle)


def menu_for(text: str, cursor: int, files: Callable[[], list[str]] | None,
             commands: CommandSource) -> Menu | None:
    """The menu the input text calls for right now, if any."""
    at = find_at_token(text, cursor)
    if at is not None and files is not None:
        paths = [p for p in rank(at.query, files(), limit=MAX_ITEMS + 1) if p != at.query][:MAX_ITEMS]
        if not paths:
            return None
        return Menu("@", [MenuItem(p, p) for p in paths], at.start, at.end, extra={"token": at})
    if text.startswith("/") and " " not in text[:cursor] and "\n" not in text:
        items = commands.match(text[1:cursor])[:MAX_ITEMS]
        return Menu("/", items, 0, len(text)) if items else None
    return None


def accept(text: str, menu: Menu) -> tuple[str, int]:
    """Insert the highlighted item: returns the new text and cursor position."""
    item = menu.current()
    if item is None:
        return text, len(text)
    if menu.kind == "/":
        new = f"/{item.insert} "
        return new, len(new)
    token: AtToken = menu.extra["token"]
    return insert_completion(text, token, item.insert)
