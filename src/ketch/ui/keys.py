"""Key bindings. Overlays claim every key first, then an open menu claims up, down,
tab, enter and escape, then the input edits (emacs keys come from prompt_toolkit)."""

from __future__ import annotations

from typing import Any

from prompt_toolkit.filters import Condition
from prompt_toolkit.key_binding import KeyBindings, KeyPressEvent
from prompt_toolkit.keys import Keys

KetchApp = Any
"""The app (``ui.controller.KetchApp``) is passed in, not imported: it imports this module."""

_OVERLAY_KEYS = {"up": "up", "down": "down", "enter": "enter", "escape": "escape",
                 "backspace": "backspace", "c-j": "enter", "tab": "down", "s-tab": "up",
                 "pageup": "pageup", "pagedown": "pagedown", "home": "home", "end": "end", "c-o": "c-o"}


def build_key_bindings(ctl: KetchApp) -> KeyBindings:
    """All of the app's bindings, filtered by what is open."""
    kb = KeyBindings()
    overlay = Condition(lambda: ctl.overlay is not None)
    menu = Condition(lambda: ctl.menu is not None and ctl.overlay is None)
    editing = Condition(lambda: ctl.overlay is None)

    for key, name in _OVERLAY_KEYS.items():
        def give(event: KeyPressEvent, name: str = name) -> None:
            ctl.overlay_key(name)
        kb.add(key, filter=overlay, eager=True)(give)

    @kb.add(Keys.Any, filter=overlay, eager=True)
    def _(event: KeyPressEvent) -> None:
        if event.data and event.data.isprintable():
            ctl.overlay_key(event.data)

    @kb.add(Keys.BracketedPaste, filter=overlay, eager=True)
    def _(event: KeyPressEvent) -> None:
        for ch in event.data.replace("\n", " "):
            ctl.overlay_key(ch)

    @kb.add("up", filter=menu, eager=True)
    def _(event: KeyPressEvent) -> None:
        ctl.menu.move(-1)  # type: ignore[union-attr]

    @kb.add("down", filter=menu, eager=True)
    def _(event: KeyPressEvent) -> None:
        ctl.menu.move(1)  # type: ignore[union-attr]

    @kb.add("tab", filter=menu, eager=True)
    @kb.add("enter", filter=menu & Condition(lambda: ctl.menu is not None and bool(ctl.menu.items)), eager=True)
    def _(event: KeyPressEvent) -> None:
        kind = ctl.menu.kind if ctl.menu else ""
        ctl.accept_menu()
        if kind == "/" and event.key_sequence[0].key == Keys.ControlM:
            _submit(ctl)

    @kb.add("s-tab", filter=editing & ~menu)
    def _(event: KeyPressEvent) -> None:
        from ketch.ui.modes import cycle_approval

        cycle_approval(ctl)

    @kb.add("escape", filter=menu, eager=True)
    def _(event: KeyPressEvent) -> None:
        ctl.close_menu()

    @kb.add("enter", filter=editing)
    def _(event: KeyPressEvent) -> None:
        _submit(ctl)

    @kb.add("escape", "enter", filter=editing)
    @kb.add("c-j", filter=editing)
    def _(event: KeyPressEvent) -> None:
        ctl.buffer.insert_text("\n")

    @kb.add("up", filter=editing)
    def _(event: KeyPressEvent) -> None:
        doc = ctl.buffer.document
        if doc.cursor_position_row > 0:
            ctl.buffer.cursor_up()
            return
        entry = ctl.history.previous(ctl.buffer.text)
        if entry is not None:
            _set_text(ctl, entry)

    @kb.add("down", filter=editing)
    def _(event: KeyPressEvent) -> None:
        doc = ctl.buffer.document
        if doc.cursor_position_row < doc.line_count - 1:
            ctl.buffer.cursor_down()
            return
        entry = ctl.history.next()
        if entry is not None:
            _set_text(ctl, entry)

    @kb.add("escape", filter=editing)
    def _(event: KeyPressEvent) -> None:
        from ketch.ui.rewind import on_idle_escape

        if not on_idle_escape(ctl):
            ctl.cancel_turn()

    @kb.add(Keys.BracketedPaste, filter=editing)
    def _(event: KeyPressEvent) -> None:
        data = event.data.replace("\r\n", "\n").replace("\r", "\n")
        ctl.buffer.insert_text(ctl.pastes.hold(data))

    @kb.add("c-c")
    def _(event: KeyPressEvent) -> None:
        ctl.ctrl_c()

    @kb.add("c-d", filter=editing & Condition(lambda: not ctl.buffer.text))
    def _(event: KeyPressEvent) -> None:
        ctl.exit(0)

    @kb.add("c-o", filter=editing)
    def _(event: KeyPressEvent) -> None:
        problem = ctl.open_output()
        if problem:
            ctl.hint = problem
            ctl.invalidate()

    @kb.add("c-r")
    def _(event: KeyPressEvent) -> None:
        if ctl.view.reasoning or ctl.overlay is not None:
            ctl.reasoning_expanded = not ctl.reasoning_expanded
            ctl.committer.request_rewind()
            return
        from ketch.ui.outputs import open_thoughts

        problem = open_thoughts(ctl)
        if problem:
            ctl.hint = problem
            ctl.invalidate()

    return kb


def _set_text(ctl: KetchApp, text: str) -> None:
    from prompt_toolkit.document import Document

    ctl.buffer.set_document(Document(text, len(text)), bypass_readonly=True)
    ctl.menu = None


def _submit(ctl: KetchApp) -> None:
    text = ctl.buffer.text
    if not text.strip():
        return
    ctl.buffer.reset()
    ctl.menu = None
    ctl.submit(ctl.pastes.expand(text))
