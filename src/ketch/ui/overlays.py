"""Keyboard-driven overlays shown in the live region: approval, ask, list picker.

Each overlay turns key names ("up", "down", "enter", "escape", "backspace", or one
printable character) into a decision, and draws itself as prompt_toolkit fragments.
``on_key`` returns True when the overlay is finished and should close.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

from ketch.core.events import ApprovalRequested, AskRequested, Decision

Fragments = list[tuple[str, str]]
PREVIEW_LINES = 12


class Overlay(Protocol):
    """What the app needs from an overlay."""

    def fragments(self, width: int) -> Fragments: ...

    def on_key(self, key: str) -> bool: ...


def _preview(text: str, width: int) -> Fragments:
    rows = text.splitlines()
    out: Fragments = []
    for row in rows[:PREVIEW_LINES]:
        style = "class:diff.add" if row.startswith("+") else "class:diff.del" if row.startswith("-") else ""
        out.append((style, "  " + row[: width - 3] + "\n"))
    if len(rows) > PREVIEW_LINES:
        out.append(("class:dim", f"  … {len(rows) - PREVIEW_LINES} more lines\n"))
    return out


def _choice_rows(labels: list[str], selected: int) -> Fragments:
    out: Fragments = []
    for i, label in enumerate(labels):
        mark = "❯" if i == selected else " "
        style = "class:choice.selected" if i == selected else ""
        out.append((style, f" {mark} {i + 1}. {label}\n"))
    return out


def session_scope(name: str, args: dict[str, object], width: int) -> str:
    """What "allow for this session" covers (the gate's ``session_key``): for the shell
    this exact command line, for other tools every call of the tool."""
    if name == "shell":
        command = " ".join(str(args.get("command", "")).split())
        room = max(10, width - len("Allow `` again this session (a)"))
        shown = command if len(command) <= room else command[: room - 1] + "…"
        return f"Allow `{shown}` again this session (a)"
    return f"Allow every {name} call this session (a)"


class ApprovalOverlay:
    """Allow once / allow for this session / deny (with an optional typed reason)."""

    LABELS = ["Allow once (y)", "Allow for this session (a)", "Deny, and say why (n)"]
    DECISIONS: list[Decision] = ["allow", "allow_session", "deny"]

    def __init__(self, request: ApprovalRequested, decide: Callable[[Decision, str], None]) -> None:
        self.request = request
        self._decide = decide
        self.selected = 0
        self.typing_reason = False
        self.reason = ""

    def fragments(self, width: int) -> Fragments:
        req = self.request
        asker = f" for subagent {req.agent}" if req.agent else ""
        out: Fragments = [("class:overlay.title", f"Allow {req.name}{asker}?\n")]
        out += _preview(req.preview or str(req.args), width)
        if req.reason:
            out.append(("class:dim", f"  why it asks: {req.reason[: max(20, width * 2)]}\n"))
        if self.typing_reason:
            out.append(("", " Reason (enter to deny, empty is fine): "))
            out.append(("class:overlay.input", self.reason + "▏\n"))
        else:
            out += _choice_rows(self.labels(width), self.selected)
        return out

    def labels(self, width: int) -> list[str]:
        """The choices; 'for this session' says what it will let through."""
        return [self.LABELS[0], session_scope(self.request.name, self.request.args, width - 12), self.LABELS[2]]

    def on_key(self, key: str) -> bool:
        if self.typing_reason:
            return self._reason_key(key)
        shortcut = {"1": 0, "y": 0, "2": 1, "a": 1, "3": 2, "n": 2}.get(key.lower() if len(key) == 1 else key)
        if shortcut is not None:
            return self._choose(shortcut)
        if key == "up":
            self.selected = (self.selected - 1) % 3
        elif key == "down":
            self.selected = (self.selected + 1) % 3
        elif key == "enter":
            return self._choose(self.selected)
        elif key == "escape":
            self._decide("deny", "")
            return True
        return False

    def _choose(self, index: int) -> bool:
        if self.DECISIONS[index] == "deny":
            self.typing_reason = True
            self.selected = 2
            return False
        self._decide(self.DECISIONS[index], "")
        return True

    def _reason_key(self, key: str) -> bool:
        if key == "enter":
            self._decide("deny", self.reason.strip())
            return True
        if key == "escape":
            self._decide("deny", "")
            return True
        if key == "backspace":
            self.reason = self.reason[:-1]
        elif len(key) == 1 and key.isprintable():
            self.reason += key
        return False


class AskOverlay:
    """A question from the model: pick one of its choices or type an answer."""

    def __init__(self, request: AskRequested, answer: Callable[[str], None]) -> None:
        self.request = request
        self._answer = answer
        self.selected = 0
        self.text = ""

    def fragments(self, width: int) -> Fragments:
        out: Fragments = [("class:overlay.title", f"{self.request.question}\n")]
        out += _choice_rows(list(self.request.choices), self.selected if not self.text else -1)
        hint = "or type an answer" if self.request.choices else "type an answer"
        out.append(("class:dim", f" {hint}: "))
        out.append(("class:overlay.input", self.text + "▏\n"))
        return out

    def on_key(self, key: str) -> bool:
        choices = self.request.choices
        if key == "enter":
            if self.text.strip() or not choices:
                self._answer(self.text.strip())
            else:
                self._answer(choices[self.selected])
            return True
        if key == "escape":
            self._answer("")
            return True
        if key in ("up", "down") and choices:
            step = -1 if key == "up" else 1
            self.selected = (self.selected + step) % len(choices)
        elif key == "backspace":
            self.text = self.text[:-1]
        elif len(key) == 1 and key.isdigit() and not self.text and 0 < int(key) <= len(choices):
            self._answer(choices[int(key) - 1])
            return True
        elif len(key) == 1 and key.isprintable():
            self.text += key
        return False


class ListPicker:
    """Choose one option from a list (/model, /think, /agent, /resume); typing filters."""

    VISIBLE = 8

    def __init__(self, title: str, options: list[str], choose: Callable[[str], None],
                 cancel: Callable[[], None] | None = None) -> None:
        self.title = title
        self.options = options
        self._choose = choose
        self._cancel = cancel
        self.filter = ""
        self.selected = 0

    def visible_options(self) -> list[str]:
        """Options matching what was typed (case-insensitive substring)."""
        needle = self.filter.lower()
        return [o for o in self.options if needle in o.lower()]

    def fragments(self, width: int) -> Fragments:
        shown = self.visible_options()
        out: Fragments = [("class:overlay.title", f"{self.title}"), ("class:dim", f"  {self.filter}\n")]
        start = max(0, self.selected - self.VISIBLE + 1)
        for i, option in enumerate(shown[start:start + self.VISIBLE], start):
            style = "class:choice.selected" if i == self.selected else ""
            out.append((style, f" {'❯' if i == self.selected else ' '} {option[: width - 4]}\n"))
        if not shown:
            out.append(("class:dim", "   no match\n"))
        return out

    def on_key(self, key: str) -> bool:
        shown = self.visible_options()
        if key == "enter":
            if shown:
                self._choose(shown[min(self.selected, len(shown) - 1)])
            elif self._cancel:
                self._cancel()
            return True
        if key == "escape":
            if self._cancel:
                self._cancel()
            return True
        if key in ("up", "down") and shown:
            self.selected = (self.selected + (-1 if key == "up" else 1)) % len(shown)
        elif key == "backspace":
            self.filter = self.filter[:-1]
            self.selected = 0
        elif len(key) == 1 and key.isprintable():
            self.filter += key
            self.selected = 0
        return False
