"""Histories shaped like a turn of tool-calling steps, for the property tests of the SDK fast paths
(``test_settled_history.py``, ``test_ordered_results.py``), which break or disturb them."""

from __future__ import annotations

import warnings
from typing import Any

from pydantic_ai.messages import (
    ModelRequest,
    ModelResponse,
    RetryPromptPart,
    SystemPromptPart,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)


def retry(tool_name: str | None, call_id: str) -> Any:
    """A legacy retry part (deprecated in pydantic-ai, still read from old histories)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return RetryPromptPart("try again", tool_name=tool_name, tool_call_id=call_id)


def turn(steps: list[int], *, provider_name: str | None = None) -> list[Any]:
    """A turn of steps; step ``i`` makes ``steps[i]`` calls, answered in call order by the next
    request (0 calls: the step ends with user text)."""
    history: list[Any] = [ModelRequest(parts=[SystemPromptPart("sys"), UserPromptPart("go")])]
    for i, calls in enumerate(steps):
        ids = [f"c{i}_{k}" for k in range(calls)]
        history.append(ModelResponse(parts=[TextPart(f"step {i}"), *(ToolCallPart("read", {"k": k}, tool_call_id=k) for k in ids)],
                                     provider_name=provider_name))
        if ids:
            history.append(ModelRequest(parts=[ToolReturnPart("read", f"out {k}", tool_call_id=k) for k in ids]))
        else:
            history.append(ModelRequest(parts=[UserPromptPart(f"next {i}")]))
    return history


def positions(history: list[Any], at: int) -> tuple[int, int]:
    """The index of a request after the first message and of a response, chosen by ``at``."""
    requests = [i for i, m in enumerate(history) if isinstance(m, ModelRequest) and i > 0]
    responses = [i for i, m in enumerate(history) if isinstance(m, ModelResponse)]
    return (requests[at % len(requests)] if requests else 0), (responses[at % len(responses)] if responses else 0)
