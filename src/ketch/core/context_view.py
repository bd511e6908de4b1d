"""The view of a session that ``context`` is handed (``context.session_view.SessionView``).

Built once per session from its own attributes: compaction, the request retries and the
small-window profile read and change the session only through it, so they depend on this list
and not on the session's private names.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ketch.context.session_view import SessionView


def context_view(session: Any) -> SessionView:
    """The view of ``session`` (a ``core.session.Session``) that ``context`` works through."""

    def first_compaction() -> bool:
        turn = session._turn
        if turn is None or turn.compacted:
            return False
        turn.compacted = True
        return True

    def rewrote_history() -> None:
        session.history_rewritten = True

    def forget_request_size() -> None:
        session.last_request_tokens = 0

    def narrow_tools(names: Sequence[str]) -> None:
        session.tool_ceiling = names

    def full_profile() -> tuple[str, list[Any]]:
        active = session.active_tools()
        defs = [session._tool_defs[name] for name in active if name in session._tool_defs]
        return session.instructions_for(active), defs

    return SessionView(
        session_id_now=lambda: session.session_id,
        model_now=lambda: session.model,
        messages_now=lambda: session.messages,
        compactor_now=lambda: session.compactor,
        interactive=session.interactive,
        turn_id_now=lambda: session._turn.turn_id if session._turn is not None else None,
        delivered_now=lambda: session._turn is not None and session._turn.delivered,
        first_compaction=first_compaction,
        emit=session._emit,
        persist=session._persist,
        note_break=lambda reason: session.prefix.note_break(reason),
        rewrote_history=rewrote_history,
        charge=session._charge,
        forget_request_size=forget_request_size,
        ask=lambda call_id, question, choices: session._ask(call_id, question, list(choices)),
        narrow_tools=narrow_tools,
        full_profile=full_profile,
    )
