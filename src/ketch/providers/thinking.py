"""Thinking levels that are honest about whether they reach the model.

pydantic-ai's unified ``thinking`` setting is dropped, silently, for a model its profiles do
not know to reason (``supports_thinking``): every model of a local or OpenAI-compatible server
it has no profile for, on Chat Completions and Responses alike, and unknown names on the
Anthropic wire. For a connection (or model) that declares ``reasoning = true`` ketch sends
the wire's own field instead: ``reasoning_effort`` (Chat), ``reasoning.effort`` (Responses),
``thinking`` with a token budget (Anthropic). Otherwise the level is not applied, and
:func:`thinking_notice` says so, once, and why.
"""

from __future__ import annotations

from typing import Any

_EFFORT = {"low": "low", "medium": "medium", "high": "high", "max": "high"}
"""``--think`` → OpenAI ``reasoning_effort`` for a model the SDK does not know: servers that are
not OpenAI's accept low/medium/high, so ``max`` asks for ``high``."""
_BUDGET = {"low": 2048, "medium": 10000, "high": 16384, "max": 32768}
"""``--think`` → Anthropic ``budget_tokens`` (the SDK's own table)."""
_FIELD = {"openai-chat": "reasoning_effort", "openai-responses": "reasoning.effort", "anthropic-messages": "thinking"}


def sdk_applies(model: Any) -> bool:
    """Whether pydantic-ai passes a unified ``thinking`` level on to ``model``'s request."""
    profile = getattr(model, "profile", None) or {}
    return bool(profile.get("supports_thinking") or profile.get("thinking_always_enabled"))


def declared_reasoning(conn: Any) -> bool:
    meta = getattr(conn, "meta", None)
    if meta is not None and getattr(meta, "reasoning", None) is not None:
        return bool(meta.reasoning)
    return bool(getattr(conn, "reasoning", None))


def thinking_settings(think: str, model: Any = None, conn: Any = None, wire: str | None = None) -> dict[str, Any]:
    """The model settings for thinking level ``think`` (``off`` sends none)."""
    if not think or think == "off":
        # Gemini 2.5 Flash and Z.AI's GLM think unless told not to: ``off`` sends the SDK's
        # ``thinking=False`` (a zero budget; ``thinking.type: disabled``), where the other wires
        # simply send no field.
        return {"thinking": False} if _thinks_unless_told(wire or getattr(conn, "wire", ""), conn) else {}
    if model is None or sdk_applies(model):
        return {"thinking": think}
    if not declared_reasoning(conn):
        return {}
    wire = wire or getattr(conn, "wire", "")
    if wire == "anthropic-messages":
        return {"anthropic_thinking": {"type": "enabled", "budget_tokens": _BUDGET[think]}}
    return {"openai_reasoning_effort": _EFFORT[think]}


def _thinks_unless_told(wire: str, conn: Any) -> bool:
    if wire == "gemini":
        return True
    preset = getattr(getattr(conn, "preset", None), "name", "")
    if wire != "openai-chat" or not preset:
        return False
    from ketch.providers.zai import speaks_zai

    return speaks_zai(preset, getattr(conn, "base_url", None))


def thinking_notice(think: str, model: Any, conn: Any, wire: str | None = None) -> str | None:
    """One line when ``think`` will not reach the model, saying why and what to do; else None."""
    if not think or think == "off" or model is None or sdk_applies(model) or declared_reasoning(conn):
        return None
    wire = wire or getattr(conn, "wire", "")
    name = getattr(conn, "name", "")
    where = f"[connections.{name}]" if name and name != "adhoc" else f"[models.\"{getattr(conn, 'model_name', 'MODEL')}\"]"
    return (
        f"--think {think} is not applied: the SDK does not know {getattr(conn, 'model_name', 'this model')} to reason, "
        f"so no {_FIELD.get(wire, 'thinking')} field is sent on {wire}. If the model does reason, set reasoning = true "
        f"under {where}"
    )


__all__ = ["declared_reasoning", "sdk_applies", "thinking_notice", "thinking_settings"]
