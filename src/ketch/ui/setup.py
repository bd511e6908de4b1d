"""The first-run setup in the UI: pick a local server or a provider, maybe paste a key,
pick a model; the caller writes the config and the session starts.

``AppConfig.setup`` supplies ``wanted(exc)``, ``choices()`` (labels, kept as objects with
``label``, ``models``, ``needs_key``) and ``apply(choice, model, key)`` (returns the path
written); everything touching disk or the network is there, run off the event loop.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ketch.ui.overlays import Fragments, ListPicker

if TYPE_CHECKING:
    from ketch.ui.controller import KetchApp


class SecretInput:
    """A line of text typed without echo (an API key): dots are shown instead."""

    def __init__(self, title: str, done: Callable[[str], None], cancel: Callable[[], None]) -> None:
        self.title = title
        self._done = done
        self._cancel = cancel
        self.text = ""

    def fragments(self, width: int) -> Fragments:
        return [("class:overlay.title", self.title[: width - 1] + "\n"),
                ("", " key: "), ("class:overlay.input", "•" * min(len(self.text), width - 8) + "▏\n"),
                ("class:dim", " enter saves it (in keys.json, readable by you only) · esc goes back\n")]

    def on_key(self, key: str) -> bool:
        if key == "enter":
            if self.text.strip():
                self._done(self.text)
                return True
            return False
        if key == "escape":
            self._cancel()
            return True
        if key == "backspace":
            self.text = self.text[:-1]
        elif len(key) == 1 and key.isprintable():
            self.text += key
        return False


async def offer_setup(app: KetchApp, exc: Exception) -> None:
    """Show the setup picker (the session could not start: no model, no key)."""
    setup = app.config.setup
    found = await asyncio.to_thread(setup.choices)
    by_label = {c.label: c for c in found}
    app.committer.commit(["\x1b[1mNo model is set up yet.\x1b[0m Pick a local server or a provider "
                          "(esc leaves; 'ketch --help' shows the flags):", ""])

    def chosen(label: str) -> None:
        choice = by_label[label]
        if choice.needs_key:
            app.push_overlay(SecretInput(f"API key for {choice.connection}",
                                         lambda key: _finish(app, choice, choice.models[0], key, exc),
                                         lambda: app._spawn(offer_setup(app, exc))))
        elif len(choice.models) > 1:
            app.push_overlay(ListPicker(f"model on {choice.connection}", choice.models,
                                        lambda model: _finish(app, choice, model, "", exc)))
        else:
            _finish(app, choice, choice.models[0], "", exc)

    def leave() -> None:  # the caller reports the original error on the way out
        code = app.config.startup_error(exc) if app.config.startup_error else 2
        app.exit(2 if code is None else code)

    app.push_overlay(ListPicker("set up ketch", list(by_label), chosen, cancel=leave))


def _finish(app: KetchApp, choice: Any, model: str, key: str, exc: Exception) -> None:
    async def write_and_start() -> None:
        try:
            path = await asyncio.to_thread(app.config.setup.apply, choice, model, key)
        except (OSError, ValueError) as exc:
            app.committer.commit([f"\x1b[31mSetup failed: {exc}\x1b[0m", ""])
            await offer_setup(app, exc)
            return
        app.committer.commit([f"Wrote model = \"{choice.connection}:{model}\" to {path}.", ""])
        app.session_error = None
        await app._load_session()

    app._spawn(write_and_start())
