"""USD cost per response through pydantic-ai's genai-prices integration.

A model genai-prices does not know costs ``None`` ("unknown"), never a guessed number.
"""

from __future__ import annotations

from typing import Any


def response_cost(response: Any) -> float | None:
    """The USD price of one ``ModelResponse``, or None when it cannot be known."""
    cost = getattr(response.usage, "cost", None)
    if cost is not None:
        return float(cost)
    try:
        price = response.cost()
    except Exception:  # noqa: BLE001 - unknown model, missing usage: the price is unknown
        return None
    total = getattr(price, "total_price", None)
    return float(total) if total is not None else None


def price_known(model: Any) -> bool:
    """Whether genai-prices knows ``model``'s price (so a session starts at $0, not unknown)."""
    from pydantic_ai.messages import ModelResponse

    name = getattr(model, "model_name", None)
    if not name:
        return False
    probe = ModelResponse(parts=[], model_name=name, provider_name=getattr(model, "system", None))
    try:
        probe.cost()
    except Exception:  # noqa: BLE001 - unknown model or provider: the price is unknown
        return False
    return True


def format_cost(cost: float | None) -> str:
    return "unknown" if cost is None else f"${cost:.4f}"
