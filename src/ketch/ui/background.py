"""How background commands show: the transcript line when one ends, the status-line entry."""

from __future__ import annotations

import re
from typing import Any

from ketch.protocol.events import BackgroundFinished
from ketch.ui.toolfmt import clip, paint

_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")


def plain(text: str) -> str:
    """``text`` on one line with no control character (a command is the model's text)."""
    return _CONTROL.sub(" ", text)


def background_lines(event: BackgroundFinished, width: int) -> list[str]:
    """The rows a finished background command leaves in the transcript."""
    ok = event.exit_code == 0 and not event.how.startswith("stopped")
    mark = paint("●", "32" if ok else ("33" if event.how.startswith("stopped") else "31"))
    head = clip(f" background {event.job_id}  {plain(event.command)}", width - 2)
    return [mark + paint(head, "1"), paint(f"  ⎿ {plain(event.how)}", "2" if ok else "31"), ""]


def status_entry(running: list[str]) -> str:
    """The status line's part for the running background commands ("" for none)."""
    if not running:
        return ""
    return f"⚙ {len(running)} background /bashes"


def poll_background(app: Any) -> bool:
    """For the app's tick: background commands that ended between turns go to the transcript;
    a start or an end re-reads the status line. True when something changed."""
    session = app.session
    if session is None:
        return False
    take = getattr(session, "take_idle_events", None)
    events = take() if take is not None else []
    for event in events:
        app.view.apply(event)
    version = getattr(session, "background_version", 0)
    if version == app.background_seen and not events:
        return False
    app.background_seen = version
    app.view.status_dirty = True
    return True
