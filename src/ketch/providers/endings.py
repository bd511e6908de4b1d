"""How a turn ended when the model did not finish: cut by its output limit.

Every wire says so in its own words (Chat ``finish_reason: "length"``, Responses
``status: "incomplete"`` for ``max_output_tokens``, Anthropic ``stop_reason: "max_tokens"``);
the SDK maps them all to ``finish_reason == "length"`` on the response. A turn whose last
response ends that way finishes with reason ``max_tokens`` and a warning, never as ``done``.

Some servers do not say so: llama.cpp's Responses endpoint reports ``completed`` for an answer
its ``max_output_tokens`` cut. :class:`CutByTokenCount` reads the token count instead: an answer
without tool calls whose output tokens reached the request's ``max_tokens`` was cut.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

CUT_NOTICE = (
    "The answer was cut at the model's output limit (max_tokens) and is incomplete. "
    "Send 'continue' to let the model go on (headless: ketch --continue -p continue)."
)
RESUME_HINT = "The last answer of this session was cut at the model's output limit; send 'continue' to let the model go on."


def cut_by_output_limit(messages: Sequence[Any]) -> bool:
    """Whether the newest model response in ``messages`` stopped at the output limit."""
    from pydantic_ai.messages import ModelResponse

    for message in reversed(messages):
        if isinstance(message, ModelResponse):
            return message.finish_reason == "length"
    return False


REFUSED_NOTICE = "The provider declined to answer this request (a refusal or its content filter)."


def refused_by_model(messages: Sequence[Any]) -> bool:
    """Whether the newest model response in ``messages`` was a refusal (the SDK's
    ``content_filter``: Chat's ``finish_reason``, Anthropic's ``refusal`` stop)."""
    from pydantic_ai.messages import ModelResponse

    for message in reversed(messages):
        if isinstance(message, ModelResponse):
            return message.finish_reason == "content_filter"
    return False


class _CutByTokenCount:
    """Marks a text answer whose output tokens reached the request's cap as cut (``length``)."""

    @staticmethod
    def cut(response: Any, settings: Any) -> Any:
        import dataclasses

        from pydantic_ai.messages import ToolCallPart

        cap = settings.get("max_tokens") if isinstance(settings, dict) else None
        output = getattr(response.usage, "output_tokens", 0) or 0
        if (not isinstance(cap, int) or cap <= 0 or output < cap or response.finish_reason == "length"
                or any(isinstance(p, ToolCallPart) for p in response.parts)):
            return response
        return dataclasses.replace(response, finish_reason="length")


def counted_cut_capability() -> Any:
    """The capability that applies :class:`_CutByTokenCount` after every model request."""
    from pydantic_ai.capabilities import AbstractCapability

    class CutByTokenCount(AbstractCapability[Any]):
        @classmethod
        def get_serialization_name(cls) -> str | None:
            return None

        async def after_model_request(self, ctx: Any, *, request_context: Any, response: Any) -> Any:
            return _CutByTokenCount.cut(response, request_context.model_settings)

    return CutByTokenCount()


__all__ = ["CUT_NOTICE", "REFUSED_NOTICE", "RESUME_HINT", "counted_cut_capability", "cut_by_output_limit", "refused_by_model"]
