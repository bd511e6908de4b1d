"""Slash commands that change which conversation a session is, as an editor sees them.

In the terminal ``/clear`` and ``/fork`` move on to another stored session id. An editor
keeps the id it was given, so here the id stays and the stored conversation under it is what
the editor shows: ``/clear`` keeps the old conversation as a copy (listed, loadable) and
empties this one; ``/fork`` keeps the conversation so far as a copy and goes on here.
``/resume`` is not offered: loading another session is the editor's own ``session/load``.
"""

from __future__ import annotations

from typing import Any

NOT_IN_EDITORS = frozenset({"resume"})
"""Core commands an editor gets elsewhere (``session/load``, ``session/list``)."""


async def clear_in_place(session: Any) -> str:
    """Keep the conversation as a copy, then start afresh under the same id."""
    sid, store = session.session_id, session.store
    kept = store.fork(sid) if store is not None and not store.is_reserved(sid) else None
    session.switch_to(sid, [])
    if kept is not None:
        store.replace_history(sid, [])
        store.set_title(sid, "")
    notebook = session.deps.extras.get("notebook")
    if notebook is not None:
        notebook.write([])
    session.auto_title = bool(getattr(session.config, "titles", False))
    return "New conversation." + (f" The previous one is kept as session {kept}." if kept else "")


async def fork_in_place(session: Any) -> str:
    """Keep the conversation so far as a copy; this session goes on from here."""
    sid, store = session.session_id, session.store
    if store is None or store.is_reserved(sid):
        return "Nothing to fork yet: this conversation has no messages."
    kept = store.fork(sid)
    return f"Forked: the conversation so far is kept as session {kept}; you go on here."


IN_PLACE = {"clear": clear_in_place, "fork": fork_in_place}
