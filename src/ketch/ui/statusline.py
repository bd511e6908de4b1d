"""The one-line status bar: model, thinking, agent, approval mode (Shift-Tab cycles it),
context, cost, cwd, branch."""

from __future__ import annotations

import os

from ketch.protocol.frontend import SessionStatus


def format_cost(cost: float | None) -> str:
    """'$0.0123', or 'cost unknown' when a price was missing."""
    return "cost unknown" if cost is None else f"${cost:.4f}"


def short_cwd(cwd: str) -> str:
    """The working directory with the home directory shown as ~."""
    home = os.path.expanduser("~")
    return "~" + cwd[len(home):] if home and cwd.startswith(home) else cwd


def status_text(status: SessionStatus | None, width: int, *, loading: bool = False) -> str:
    """The status line, cut to ``width`` (least important parts dropped first)."""
    if status is None:
        return "loading model…" if loading else ""
    parts = [status.model or "?", f"think {status.thinking}", status.agent]
    if status.approval:
        parts.append(f"{status.approval} ⇧tab")
    if status.background:
        from ketch.ui.background import status_entry

        parts.append(status_entry(status.background))
    parts += [f"ctx {status.context_used_pct:.0f}%", format_cost(status.cost_usd)]
    tail = [short_cwd(status.cwd)] if status.cwd else []
    if status.git_branch:
        tail.append(f"⎇ {status.git_branch}")
    text = " · ".join(parts + tail)
    while len(text) > width and tail:
        tail.pop()
        text = " · ".join(parts + tail)
    return text[:width]
