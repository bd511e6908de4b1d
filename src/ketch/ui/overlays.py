"""Keyboard-driven overlays shown in the live region: approval, ask, list picker.

Each overlay turns key names ("up", "down", "enter", "escape", "backspace", or one
printable character) into a decision, and draws itself as prompt_toolkit fragments.
``on_key`` returns True when the overlay is finished and should close.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

from ketch.protocol.events import ApprovalRequested, AskRequested, Decision

Fragments = list[tuple[str, str]]


class Overlay(Protocol):
    """What the app needs from an overlay."""

    def fragments(self, width: int) -> Fragments: ...

    def on_key(self, key: str) -> bool: ...


def wrap_exact(text: str, width: int) -> list[str]:
    """``text`` cut into rows of at most ``width`` columns, every character kept (a command
    shown for approval must read exactly as it will run; no word-wrapping drops a space)."""
    from prompt_toolkit.utils import get_cwidth

    width = max(8, width)
    rows: list[str] = []
    for line in text.split("\n"):
        row, used = "", 0
        for ch in line.replace("\t", "    "):
            w = get_cwidth(ch)
            if used + w > width:
                rows.append(row)
                row, used = "", 0
            row += ch
            used += w
        rows.append(row)
    return rows


def wrap_words(text: str, width: int) -> list[str]:
    """Prose wrapped at word boundaries (long words broken, nothing dropped but spaces)."""
    import textwrap

    return [r for line in text.split("\n") for r in (textwrap.wrap(line, max(8, width), break_long_words=True) or [""])]


def _preview_rows(text: str, width: int, style: str = "") -> list[tuple[str, str]]:
    rows: list[tuple[str, str]] = []
    for line in text.split("\n"):
        line_style = style or ("class:diff.add" if line.startswith("+") else "class:diff.del" if line.startswith("-") else "")
        rows += [(line_style, "  " + r) for r in wrap_exact(line, width - 3)]
    return rows


def _choice_rows(labels: list[str], selected: int, width: int = 0) -> Fragments:
    out: Fragments = []
    for i, label in enumerate(labels):
        mark = "❯" if i == selected else " "
        style = "class:choice.selected" if i == selected else ""
        head = f" {mark} {i + 1}. "
        rows = wrap_words(label, width - len(head) - 1) if width else [label]
        out.append((style, head + rows[0] + "\n"))
        out += [(style, " " * len(head) + r + "\n") for r in rows[1:]]
    return out


def session_scope(name: str, args: dict[str, object], width: int = 0) -> str:
    """What "allow for this session" covers (the gate's ``session_key``): for the shell
    this exact command line, for other tools every call of the tool except the writes that
    always ask (run-later paths)."""
    if name == "shell" and args.get("outside_sandbox"):
        return "Run this exact command outside the sandbox whenever it comes again this session (a)"
    if name == "shell":
        return "Allow this exact command again this session (a)"
    if name in ("write_file", "edit_file"):
        return f"Allow {name} calls this session; run-later files (.git, workflows ...) still ask (a)"
    return f"Allow every {name} call this session (a)"


class ApprovalOverlay:
    """Allow once / allow for this session / allow commands like this (a rule, editable,
    for the session or saved) / deny (with an optional typed reason). Everything is shown
    whole: the command wrapped, where it runs, why it asks, what the sandbox allows; a body
    taller than the screen scrolls (PgUp/PgDn, Home/End)."""

    LABELS = ["Allow once (y)", "Allow for this session (a)", "Deny, and say why (n)"]

    def __init__(self, request: ApprovalRequested, decide: Callable[[Decision, str], None]) -> None:
        self.request = request
        self._decide = decide
        self.selected = 0
        self.typing_reason = False
        self.reason = ""
        self.editing_rule: Decision | None = None
        self.rule = request.rule_proposal
        self.scroll = 0
        self.screen_rows = 24
        """The terminal's rows (the layout sets it before each frame)."""
        self.decisions: list[Decision] = ["allow", "allow_session"]
        if request.rule_proposal:
            self.decisions += ["allow_rule", "allow_rule_saved"]
        self.decisions.append("deny")

    def body(self, width: int) -> list[tuple[str, str]]:
        """Every row above the choices, wrapped to ``width``."""
        req = self.request
        rows: list[tuple[str, str]] = []
        if req.name == "shell" and isinstance(req.args.get("command"), str) and not req.args.get("outside_sandbox"):
            rows += _preview_rows(str(req.args["command"]), width, "class:command")
        else:
            rows += _preview_rows(req.preview or str(req.args), width)
        for label, text in (("in", req.cwd), ("why it asks:", req.reason), ("sandbox:", req.sandbox)):
            if text:
                rows += [("class:dim", ("  " if i == 0 else "    ") + r)
                         for i, r in enumerate(wrap_words(f"{label} {text}", width - 5))]
        if req.name == "shell" and not req.rule_proposal and req.no_rule_because:
            rows += [("class:dim", "  " + r) for r in wrap_words(f"no rule proposed: {req.no_rule_because}", width - 3)]
        return rows

    def fragments(self, width: int) -> Fragments:
        req = self.request
        asker = f" for subagent {req.agent}" if req.agent else ""
        out: Fragments = [("class:overlay.title", f"Allow {req.name}{asker}?\n")]
        if self.editing_rule is not None:
            where = "for this session and in your config" if self.editing_rule == "allow_rule_saved" else "for this session"
            head = f"Allow commands matching this rule {where} (edit it; enter saves, esc goes back):"
            out += [("", " " + r + "\n") for r in wrap_words(head, width - 2)]
            rows = wrap_exact(f"shell({self.rule})▏", width - 3)
            out += [("class:overlay.input", "  " + r + "\n") for r in rows]
            note = "a * matches any text; the rule must cover the command being approved"
            out += [("class:dim", "  " + r + "\n") for r in wrap_words(note, width - 3)]
            return out
        choices = [] if self.typing_reason else _choice_rows(self.labels(width), self.selected, width)
        body = self.body(width)
        room = max(3, self.screen_rows - len(choices) - 5)
        if len(body) > room:
            self.scroll = max(0, min(self.scroll, len(body) - room + 1))
            shown = body[self.scroll:self.scroll + room - 1]
            end = self.scroll + len(shown)
            out += [(style, text + "\n") for style, text in shown]
            out.append(("class:hint", f"  rows {self.scroll + 1}–{end} of {len(body)} · pgup/pgdn scroll\n"))
        else:
            out += [(style, text + "\n") for style, text in body]
        if self.typing_reason:
            out.append(("", " Reason (enter to deny, empty is fine): "))
            out.append(("class:overlay.input", self.reason + "▏\n"))
        else:
            out += choices
        return out

    def labels(self, width: int = 0) -> list[str]:
        """The choices; 'for this session' says what it will let through."""
        once = "Run it outside the sandbox this once (y)" if self.request.args.get("outside_sandbox") else self.LABELS[0]
        labels = [once, session_scope(self.request.name, self.request.args, width)]
        if self.request.rule_proposal:
            rule = f"shell({self.request.rule_proposal})"
            labels += [f"Allow commands like this this session: {rule} (p)",
                       f"Allow commands like this, and save it to your config: {rule} (s)"]
        return labels + [self.LABELS[2]]

    def on_key(self, key: str) -> bool:
        if self.editing_rule is not None:
            return self._rule_key(key)
        if self.typing_reason:
            return self._reason_key(key)
        if key in ("pageup", "pagedown", "home", "end"):
            step = max(1, self.screen_rows - 10)
            self.scroll = {"pageup": self.scroll - step, "pagedown": self.scroll + step, "home": 0, "end": 10**6}[key]
            self.scroll = max(0, self.scroll)
            return False
        count = len(self.decisions)
        keys = {"y": "allow", "a": "allow_session", "n": "deny", "p": "allow_rule", "s": "allow_rule_saved"}
        lowered = key.lower() if len(key) == 1 else key
        if lowered in keys and keys[lowered] in self.decisions:
            return self._choose(self.decisions.index(keys[lowered]))  # type: ignore[arg-type]
        if len(key) == 1 and key.isdigit() and 1 <= int(key) <= count:
            return self._choose(int(key) - 1)
        if key == "up":
            self.selected = (self.selected - 1) % count
        elif key == "down":
            self.selected = (self.selected + 1) % count
        elif key == "enter":
            return self._choose(self.selected)
        elif key == "escape":
            self._decide("deny", "")
            return True
        return False

    def _choose(self, index: int) -> bool:
        decision = self.decisions[index]
        if decision == "deny":
            self.typing_reason = True
            self.selected = index
            return False
        if decision in ("allow_rule", "allow_rule_saved"):
            self.editing_rule = decision
            self.selected = index
            return False
        self._decide(decision, "")
        return True

    def _rule_key(self, key: str) -> bool:
        if key == "enter":
            if not self.rule.strip():
                return False
            self._decide(self.editing_rule or "allow_rule", self.rule.strip())
            return True
        if key == "escape":
            self.editing_rule = None
            return False
        if key == "backspace":
            self.rule = self.rule[:-1]
        elif len(key) == 1 and key.isprintable():
            self.rule += key
        return False

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
