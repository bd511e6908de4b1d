"""The operations a front end sends a session between turns: what ``/model``, ``/think``,
``/agent``, ``/approval``, ``/sandbox``, ``/clear``, ``/fork``, ``/resume``, ``/repair`` and
``/rewind`` change.

A front end never sets a session's attributes or writes its stored conversation: it builds
one of these and hands it to ``Session.apply``, which is the one place the session's state
(and the store rows that mirror it) changes between turns. ``tests/test_frontend_boundary.py``
holds the front ends to that.

Operations are frozen data. Those that switch the model carry what the front end built (the
model, its connection, its settings, the search route): building a model is the providers'
business, not the session's. Imports nothing of ketch.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Union


@dataclass(frozen=True)
class SetModel:
    """Send the next requests to ``model`` over ``connection``; the history stays. ``search``,
    when given, replaces the session's web-search route (hosted search gained or lost)."""

    model: Any
    connection: Any
    search: Any = None


@dataclass(frozen=True)
class SetThinking:
    """Use thinking ``level`` from the next request on; ``settings`` are its model settings."""

    level: str
    settings: Any


@dataclass(frozen=True)
class SetAgent:
    """Switch the agent variant: tools and instructions follow it."""

    variant: Any


@dataclass(frozen=True)
class SetApprovalMode:
    """Switch the approval mode for the rest of the session (``apply`` returns the line to show)."""

    mode: str


@dataclass(frozen=True)
class SetSandboxMode:
    """Switch the sandbox mode for the rest of the session (``apply`` returns the line to show)."""

    mode: str


@dataclass(frozen=True)
class Clear:
    """Start a new conversation. In the terminal it gets a new id, reserved in ``directory``
    (``apply`` returns it); in place (an editor keeps its id) the old conversation is kept as
    a copy first (``apply`` returns the copy's id, or None when there was nothing to keep)."""

    directory: str = ""
    in_place: bool = False


@dataclass(frozen=True)
class Fork:
    """Keep the conversation so far as a copy. In the terminal the session goes on in the copy;
    in place it goes on under its own id. ``apply`` returns the copy's id, or None when the
    conversation has no messages yet."""

    in_place: bool = False


@dataclass(frozen=True)
class Resume:
    """Continue as the stored session ``session_id`` whose history the front end loaded."""

    session_id: str
    history: Sequence[Any]


@dataclass(frozen=True)
class Repair:
    """Replace the conversation with ``history`` (the last exchange rewritten) and store it."""

    history: Sequence[Any]


@dataclass(frozen=True)
class Rewind:
    """Go back to ``history`` (the conversation before a prompt): stored, and no call left pending."""

    history: Sequence[Any]


Operation = Union[SetModel, SetThinking, SetAgent, SetApprovalMode, SetSandboxMode, Clear, Fork, Resume, Repair, Rewind]

__all__ = ["Clear", "Fork", "Operation", "Repair", "Resume", "Rewind", "SetAgent", "SetApprovalMode",
           "SetModel", "SetSandboxMode", "SetThinking"]
