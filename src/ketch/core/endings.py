"""How a turn ended when the model did not finish: cut by its output limit.

Every wire says so in its own words (Chat ``finish_reason: "length"``, Responses
``status: "incomplete"`` for ``max_output_tokens``, Anthropic ``stop_reason: "max_tokens"``);
the SDK maps them all to ``finish_reason == "length"`` on the response. A turn whose last
response ends that way finishes with reason ``max_tokens`` and a warning, never as ``done``.
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


__all__ = ["CUT_NOTICE", "RESUME_HINT", "cut_by_output_limit"]
