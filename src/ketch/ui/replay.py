"""Printing an earlier conversation exactly as the live session printed it.

The caller (``frontends/replay.py``) turns the stored history into the same events the
live turn produced; here they go through the same ``TurnView`` (same Markdown renderer,
same tool results, same numbering for ``/expand``), with the prompts echoed as typed.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ketch.ui.controller import KetchApp


@dataclass(frozen=True)
class Prompt:
    """A prompt the user sent (starts a turn)."""

    text: str


@dataclass(frozen=True)
class Banner:
    """Lines printed as they are (ANSI), e.g. 'Resumed session …'."""

    lines: tuple[str, ...]


ReplayItem = Any
"""A ``Prompt``, a ``Banner`` or an ``AgentEvent``."""
YIELD_EVERY = 40


async def play(app: KetchApp, items: Sequence[ReplayItem]) -> None:
    """Commit ``items`` to the scrollback through the app's transcript view."""
    view = app.view
    for i, item in enumerate(items):
        if isinstance(item, Prompt):
            view.end_turn()
            app.echo_prompt(item.text)
        elif isinstance(item, Banner):
            view.end_turn()
            app.committer.commit(list(item.lines))
        else:
            view.apply(item)
        if i % YIELD_EVERY == YIELD_EVERY - 1:
            view.flush()
            await asyncio.sleep(0)  # keys typed meanwhile are echoed
    view.end_turn()
