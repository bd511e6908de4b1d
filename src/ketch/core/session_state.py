"""What a session's controls change, in one object: the conversation, the model, the agent, the
settings and the running totals.

``/model`` changes ``model`` and ``connection`` (and the hosted search decided for it), ``/think``
the ``config``'s level, ``/agent`` the ``variant``; ``/clear``, ``/fork``, ``/resume``, a repair
and a rewind change ``session_id`` and ``messages`` and start ``usage`` afresh. Everything else a
session holds is either a service (``core.session_services``, fixed) or the bookkeeping of the
turn in progress. ``Session`` keeps its familiar attribute names (``session.model``,
``session.input_tokens``) as views of this object (:func:`state_field`, :func:`usage_field`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass
class Usage:
    """This process's totals for the conversation in ``SessionState`` (started afresh on a switch)."""

    input_tokens: int = 0
    output_tokens: int = 0
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0
    """Of ``input_tokens``, read from / written to the provider's prompt cache."""
    cost_usd: float | None = 0.0
    """The spend; None when a price is unknown (from the start for a model genai-prices does not know)."""
    last_request_tokens: int = 0


@dataclass(eq=False)
class SessionState:
    session_id: str
    messages: list[Any]
    model: Any
    connection: Any
    variant: Any
    """The ``core.agents.AgentVariant``: tools and instructions follow it."""
    config: Any
    """The settings (``/think`` replaces it with a copy at the new level)."""
    web_search: Any = None
    """The ``websearch.wiring.SessionSearch`` decided for the model (children derive their route from it)."""
    auto_title: bool = False
    """Name the conversation after its first finished turn (one auxiliary model call)."""
    usage: Usage = field(default_factory=Usage)


def state_field(name: str) -> Any:
    """An attribute of ``Session`` that reads and writes ``self.state.<name>``."""

    def read(self: Any) -> Any:
        return getattr(self.state, name)

    def write(self: Any, value: Any) -> None:
        setattr(self.state, name, value)

    return property(read, write, doc=f"``SessionState.{name}``.")


def usage_field(name: str) -> Any:
    """An attribute of ``Session`` that reads and writes ``self.state.usage.<name>``."""

    def read(self: Any) -> Any:
        return getattr(self.state.usage, name)

    def write(self: Any, value: Any) -> None:
        setattr(self.state.usage, name, value)

    return property(read, write, doc=f"``Usage.{name}`` of the session's state.")


__all__ = ["SessionState", "Usage", "state_field", "usage_field"]
