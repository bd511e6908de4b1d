"""What the context machinery reads and writes of a session, as a protocol.

``compaction`` and ``request_retries`` run inside a session's step; typing them against this
view instead of ``core.session.Session`` keeps ``context`` below ``core`` (``core`` imports
``context``, never the reverse). ``Session`` satisfies it structurally. The private names are
the ones the code uses today; the session's recomposition (issue #32) is to hand ``context``
a small view of the turn instead.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol


class SessionView(Protocol):
    session_id: str
    model: Any
    messages: list[Any]
    prefix: Any
    """The prefix keeper: ``note_break(reason)`` records why a request's prefix changed."""
    history_rewritten: bool
    last_request_tokens: int
    input_tokens: int
    output_tokens: int
    cache_read_tokens: int
    cache_write_tokens: int
    cost_usd: float | None
    _turn: Any
    _emit: Callable[..., Any]
    _persist: Callable[..., Any]
