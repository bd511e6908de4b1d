"""``/rewind`` in the UI (and Esc twice on an empty prompt): pick a prompt, pick what to put
back, see the diff and confirm; the conversation's prompt comes back into the input box.

The work is done by ``AppConfig.rewind`` (``frontends.rewind_actions.SessionRewind``); this
module only asks.
"""

from __future__ import annotations

import time
from typing import Any

from ketch.ui.overlays import ListPicker

KetchApp = Any
"""The app (``ui.controller.KetchApp``), passed in."""

DOUBLE_ESC_SECONDS = 0.8
_ACTIONS = [("both", "Restore code and conversation"), ("chat", "Restore conversation only"), ("code", "Restore code only")]


def on_idle_escape(app: KetchApp) -> bool:
    """Esc on an empty idle prompt: the second within ``DOUBLE_ESC_SECONDS`` opens the rewind
    picker. Returns whether the key was used."""
    if app.busy or app.buffer.text:
        return False
    now = time.monotonic()
    last = getattr(app, "_last_idle_escape", 0.0)
    app._last_idle_escape = now
    if now - last <= DOUBLE_ESC_SECONDS:
        app._last_idle_escape = 0.0
        app.hint = ""  # the hint said what this press does: it is done
        app._spawn(open_rewind(app))
    else:
        app.hint = "esc again to rewind"
        app.invalidate()
    return True


def _print(app: KetchApp, lines: list[str]) -> None:
    app.committer.commit(lines + [""])


async def open_rewind(app: KetchApp) -> None:
    rewind = getattr(app.config, "rewind", None)
    if rewind is None or app.session is None:
        _print(app, ["/rewind is not available here."])
        return
    try:
        choices = await rewind.prompts()
    except Exception as exc:  # noqa: BLE001 - one line for the user
        _print(app, [f"\x1b[31m/rewind: {exc}\x1b[0m"])
        return
    if not choices:
        _print(app, ["No prompt of this session has a checkpoint yet."])
        return
    by_label = {c.label: c for c in choices}

    def chosen_prompt(label: str) -> None:
        choice = by_label[label]
        actions = [(k, t) for k, t in _ACTIONS if k == "code" or choice.in_history]
        labels = {t: k for k, t in actions}
        app.push_overlay(ListPicker(f"Rewind to before prompt {choice.turn}", [*labels, "Cancel"],
                                    lambda text: app._spawn(_chosen_action(app, rewind, choice.turn, labels.get(text)))))

    app.push_overlay(ListPicker("/rewind: go back to before which prompt?", list(by_label), chosen_prompt))


async def _chosen_action(app: KetchApp, rewind: Any, turn: int, what: str | None) -> None:
    if what is None:
        return
    if what == "chat":
        await _apply(app, rewind, turn, what, False)
        return
    try:
        plan = await rewind.plan(turn)
    except Exception as exc:  # noqa: BLE001
        _print(app, [f"\x1b[31m/rewind: {exc}\x1b[0m"])
        return
    lines = [f"Rewinding the files to before prompt {turn} would apply:"] + (plan.diff.rstrip("\n").splitlines() or ["(no file changes)"])
    if plan.outside:
        lines.append("Changed since ketch last saw them (left alone unless you choose otherwise): " + ", ".join(plan.outside))
    if plan.unrestorable:
        lines.append("Recorded by hash only, cannot be put back: " + ", ".join(plan.unrestorable))
    _print(app, lines)
    options = {"Apply": False}
    if plan.outside:
        options["Apply, and overwrite the files changed since"] = True
    app.push_overlay(ListPicker("Apply this rewind?", [*options, "Cancel"],
                                lambda text: app._spawn(_apply(app, rewind, turn, what, options[text])) if text in options else None))


async def _apply(app: KetchApp, rewind: Any, turn: int, what: str, include_changed: bool) -> None:
    try:
        result = await rewind.apply(turn, what, include_changed=include_changed)
    except Exception as exc:  # noqa: BLE001
        _print(app, [f"\x1b[31m/rewind failed: {exc}\x1b[0m"])
        return
    _print(app, result.lines)
    if result.prompt is not None:
        from prompt_toolkit.document import Document

        app.buffer.set_document(Document(result.prompt, len(result.prompt)), bypass_readonly=True)
    app.invalidate()
