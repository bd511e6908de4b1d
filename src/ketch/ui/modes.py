"""Shift-Tab: step the session's approval mode (ask → auto → plan → ask).

The status line shows the new mode at once; the switch itself goes through the core's
``/approval`` command (``AppConfig.on_command``), whose reply is kept in the transcript as one
dim line, so the scrollback records when the mode changed.
"""

from __future__ import annotations

import dataclasses
from typing import Any

APPROVAL_CYCLE = ("ask", "auto", "plan")
"""The approval modes Shift-Tab steps through (``gate.approval.CYCLE``)."""


def cycle_approval(app: Any) -> None:
    """Switch ``app``'s session to the next mode of ``APPROVAL_CYCLE``."""
    current = app.status.approval if app.status is not None else ""
    if app.session is None or not current or app.config.on_command is None:
        app.hint = "the approval mode can be switched once the session has loaded"
    elif current == "yolo":
        app.hint = "--yolo is on: nothing asks, whatever the mode"
    else:
        following = APPROVAL_CYCLE[(APPROVAL_CYCLE.index(current) + 1) % 3] if current in APPROVAL_CYCLE else "ask"
        app.status = dataclasses.replace(app.status, approval=following)  # the status line shows it at once
        app._spawn(_switch(app, following))
    app.invalidate()


async def _switch(app: Any, mode: str) -> None:
    try:
        reply = await app.config.on_command("approval", mode)
    except Exception as exc:  # noqa: BLE001 - one line for the user
        reply = f"\x1b[31mcould not switch the approval mode: {exc}\x1b[0m"
    if reply:
        app.committer.commit([f"\x1b[2m{line}\x1b[0m" for line in str(reply).splitlines()] + [""])
    app.refresh_status()
    app.invalidate()
