"""Prompt history recall (up/down), kept per project by injected load/save callables."""

from __future__ import annotations


class InputHistory:
    """Walks back and forth through earlier prompts, remembering the unsent draft."""

    def __init__(self, entries: list[str] | None = None) -> None:
        self._entries: list[str] = list(entries or [])
        self._index: int | None = None
        self._draft = ""

    @property
    def entries(self) -> list[str]:
        """Oldest first."""
        return list(self._entries)

    def add(self, text: str) -> None:
        """Remember a submitted prompt (consecutive duplicates collapse)."""
        if text.strip() and (not self._entries or self._entries[-1] != text):
            self._entries.append(text)
        self.reset()

    def reset(self) -> None:
        """Leave recall mode (after a submit or an edit)."""
        self._index = None
        self._draft = ""

    def previous(self, current: str) -> str | None:
        """The entry before the one shown (None at the oldest)."""
        if not self._entries:
            return None
        if self._index is None:
            self._draft = current
            self._index = len(self._entries)
        if self._index == 0:
            return None
        self._index -= 1
        return self._entries[self._index]

    def next(self) -> str | None:
        """The entry after the one shown; the draft after the newest; None if not recalling."""
        if self._index is None:
            return None
        self._index += 1
        if self._index >= len(self._entries):
            draft = self._draft
            self.reset()
            return draft
        return self._entries[self._index]


class PasteStore:
    """Large pastes stand in the input as ``[pasted N lines #k]``; submit expands them."""

    MIN_LINES = 8

    def __init__(self) -> None:
        self._held: dict[str, str] = {}

    def hold(self, text: str) -> str:
        """What to insert for pasted ``text``: itself if short, else a placeholder."""
        lines = text.count("\n") + 1
        if lines < self.MIN_LINES:
            return text
        marker = f"[pasted {lines} lines #{len(self._held) + 1}]"
        self._held[marker] = text
        return marker

    def expand(self, text: str) -> str:
        """The input with every placeholder replaced by the text it holds."""
        for marker, pasted in self._held.items():
            text = text.replace(marker, pasted)
        return text
