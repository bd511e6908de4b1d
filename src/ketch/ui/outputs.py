"""Ctrl-o and ``/expand``: a finished call's full output in the pager, or the list of calls;
ctrl-r after an answer: the reasoning of any earlier answer of the session."""

from __future__ import annotations

from typing import Any

from ketch.ui.overlays import ListPicker
from ketch.ui.pager import Pager
from ketch.ui.results import list_label, pager_text
from ketch.ui.toolfmt import headline

KetchApp = Any
"""The app (``ui.controller.KetchApp``) is passed in, not imported: it imports this module."""


def open_output(app: KetchApp, number: int | None = None) -> str | None:
    """Open the pager on call ``number`` (the latest when None); an error text if none."""
    calls = app.view.calls
    if not calls:
        return "No tool call has finished yet."
    if number is None:
        record = calls[-1]
    elif 1 <= number <= len(calls):
        record = calls[number - 1]
    else:
        return f"There is no call {number}; calls are numbered 1 to {len(calls)}."
    full = None
    if app.config.tool_output is not None:
        try:
            full = app.config.tool_output(record.call_id)
        except Exception:  # noqa: BLE001 - the pager then shows what the UI kept
            full = None
    title = f"{record.number}. " + headline(record.name, record.args, app.width())[2:]

    def rows() -> int:
        return max(5, app.output.get_size().rows - 6)

    app.push_overlay(Pager(title, pager_text(record, full), rows, lambda: open_call_list(app)))
    app.committer.request_rewind()
    return None


def open_call_list(app: KetchApp) -> None:
    """A picker of every finished call, newest first; the pick opens in the pager."""
    calls = app.view.calls
    if not calls:
        return
    width = app.width()
    labels = {list_label(c, width): c.number for c in reversed(calls)}
    app.push_overlay(ListPicker("tool calls (type to filter)", list(labels),
                                lambda label: open_output(app, labels[label])))
    app.committer.request_rewind()


def open_thoughts(app: KetchApp) -> str | None:
    """The latest answer's reasoning in the pager; its list key picks any earlier one."""
    thoughts = app.view.thoughts
    if not thoughts:
        return "No reasoning in this session yet (the model did not think aloud, or thinking is off)."
    return _open_thought(app, len(thoughts))


def _open_thought(app: KetchApp, number: int) -> None:
    thoughts = app.view.thoughts

    def rows() -> int:
        return max(5, app.output.get_size().rows - 6)

    def pick() -> None:
        labels = {f"{i}. {' '.join(t.split())[:max(10, app.width() - 8)]}": i for i, t in reversed(list(enumerate(thoughts, 1)))}
        app.push_overlay(ListPicker("reasoning (type to filter)", list(labels), lambda label: _open_thought(app, labels[label])))
        app.committer.request_rewind()

    app.push_overlay(Pager(f"reasoning {number} of {len(thoughts)}", thoughts[number - 1].strip(), rows, pick))
    app.committer.request_rewind()
    return None
