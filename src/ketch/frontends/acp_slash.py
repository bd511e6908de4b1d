"""Slash commands that change which conversation a session is, as an editor sees them.

In the terminal ``/clear`` and ``/fork`` move on to another stored session id. An editor
keeps the id it was given, so here the id stays and the stored conversation under it is what
the editor shows: ``/clear`` keeps the old conversation as a copy (listed, loadable) and
empties this one; ``/fork`` keeps the conversation so far as a copy and goes on here.
``/resume`` is not offered: loading another session is the editor's own ``session/load``.
"""

from __future__ import annotations

from typing import Any

from ketch.protocol import operations as op

NOT_IN_EDITORS = frozenset({"resume"})
"""Core commands an editor gets elsewhere (``session/load``, ``session/list``)."""


async def clear_in_place(session: Any) -> str:
    """Keep the conversation as a copy, then start afresh under the same id."""
    kept = session.apply(op.Clear(in_place=True))
    return "New conversation." + (f" The previous one is kept as session {kept}." if kept else "")


async def fork_in_place(session: Any) -> str:
    """Keep the conversation so far as a copy; this session goes on from here."""
    kept = session.apply(op.Fork(in_place=True))
    if kept is None:
        return "Nothing to fork yet: this conversation has no messages."
    return f"Forked: the conversation so far is kept as session {kept}; you go on here."


IN_PLACE = {"clear": clear_in_place, "fork": fork_in_place}
