"""A stored session as an ATIF trajectory (the Agent Trajectory Interchange Format Harbor reads).

Evaluators and RL pipelines read every agent's runs in this one shape: a list of steps, each a
user prompt or one model response (its text, reasoning, tool calls with their arguments, and
its token usage and cost), with each tool's result as the observation of the step that called
it. Written from the stored history without Harbor installed; Harbor's own validator accepts
it (the tests check with the real package). Reminders ketch appends for the model are not
something the user typed and are left out, as in every other export.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from ketch import __version__
from ketch.protocol import strict_json

if TYPE_CHECKING:
    from pydantic_ai.messages import ModelMessage, ModelResponse

    from ketch.state.store import SessionRow

SCHEMA_VERSION = "ATIF-v1.6"
AGENT_NAME = "ketch"


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, (list, tuple)):
        return "\n".join(_text(c) for c in content if isinstance(c, str) or not hasattr(c, "url"))
    try:
        return strict_json.dumps(content, ensure_ascii=False, default=str)
    except (TypeError, ValueError):
        return str(content)


def _arguments(part: Any) -> dict[str, Any]:
    """A call's arguments as an object; text no JSON parser reads stays whole under one key."""
    try:
        args = part.args_as_dict()
    except (ValueError, TypeError):
        return {"unreadable_arguments": str(part.args)}
    return args if isinstance(args, dict) else {"arguments": args}


def _cost(response: ModelResponse) -> float | None:
    """The response's USD price as the SDK's genai-prices knows it (None: unknown)."""
    cost = getattr(response.usage, "cost", None)
    if cost is not None:
        return float(cost)
    try:
        total = getattr(response.cost(), "total_price", None)
    except Exception:  # noqa: BLE001 - an unknown model or provider: the price is unknown
        return None
    return float(total) if total is not None else None


def _metrics(response: ModelResponse) -> dict[str, Any]:
    usage = response.usage
    out: dict[str, Any] = {"prompt_tokens": usage.input_tokens or 0, "completion_tokens": usage.output_tokens or 0}
    if usage.cache_read_tokens:
        out["cached_tokens"] = usage.cache_read_tokens
    if usage.cache_write_tokens:
        out["extra"] = {"cache_write_tokens": usage.cache_write_tokens}
    if (cost := _cost(response)) is not None:
        out["cost_usd"] = cost
    return out


def _stamp(value: Any) -> str | None:
    return value.isoformat() if value is not None and hasattr(value, "isoformat") else None


class _Builder:
    """Folds the history's parts into ATIF steps, in order."""

    def __init__(self, default_model: str) -> None:
        self.steps: list[dict[str, Any]] = []
        self.owner: dict[str, dict[str, Any]] = {}
        self.default_model = default_model

    def user(self, part: Any) -> None:
        step = {"step_id": len(self.steps) + 1, "source": "user", "message": _text(part.content)}
        if stamp := _stamp(getattr(part, "timestamp", None)):
            step["timestamp"] = stamp
        self.steps.append(step)

    def response(self, message: Any) -> None:
        from pydantic_ai import messages as m

        step: dict[str, Any] = {"step_id": len(self.steps) + 1, "source": "agent", "message": ""}
        if stamp := _stamp(message.timestamp):
            step["timestamp"] = stamp
        if message.model_name and message.model_name != self.default_model:
            step["model_name"] = message.model_name
        texts, thoughts, calls = [], [], []
        self.steps.append(step)
        for part in message.parts:
            if isinstance(part, m.TextPart):
                texts.append(part.content)
            elif isinstance(part, m.ThinkingPart) and part.content:
                thoughts.append(part.content)
            elif isinstance(part, m.BaseToolCallPart):
                calls.append({"tool_call_id": part.tool_call_id, "function_name": part.tool_name, "arguments": _arguments(part)})
                self.owner[part.tool_call_id] = step
            elif isinstance(part, m.BaseToolReturnPart):  # a provider-run tool's result, in the response itself
                self.result(part.tool_call_id, _text(part.content))
        step["message"] = "".join(texts)
        if thoughts:
            step["reasoning_content"] = "\n\n".join(thoughts)
        if calls:
            step["tool_calls"] = calls
        step["metrics"] = _metrics(message)

    def result(self, call_id: str | None, content: str) -> None:
        """A tool's result, as an observation of the step whose call it answers."""
        step = self.owner.get(call_id or "")
        if step is None:
            return  # a result whose call is not in this history (cut by compaction): nothing to hang it on
        step.setdefault("observation", {"results": []})["results"].append({"source_call_id": call_id, "content": content})


def trajectory(session: SessionRow, messages: Sequence[ModelMessage]) -> dict[str, Any]:
    """``session``'s history as one ATIF trajectory object (plain JSON values)."""
    from pydantic_ai import messages as m

    from ketch.context.reminders import is_reminder

    build = _Builder(session.model)
    for message in messages:
        if isinstance(message, m.ModelResponse):
            build.response(message)
            continue
        for part in message.parts:
            if isinstance(part, m.UserPromptPart) and not is_reminder(part):
                build.user(part)
            elif isinstance(part, m.BaseToolReturnPart):
                build.result(part.tool_call_id, _text(part.content))
            elif isinstance(part, m.RetryPromptPart) and part.tool_call_id:
                build.result(part.tool_call_id, part.model_response())
    steps = build.steps
    if not steps:  # ATIF needs one step at least; a session with nothing in it says so
        steps = [{"step_id": 1, "source": "system", "message": "(this session holds no messages)"}]
    metrics = [s["metrics"] for s in steps if "metrics" in s]
    costs = [x.get("cost_usd") for x in metrics]
    final = {
        "total_prompt_tokens": sum(x["prompt_tokens"] for x in metrics),
        "total_completion_tokens": sum(x["completion_tokens"] for x in metrics),
        "total_cached_tokens": sum(x.get("cached_tokens", 0) for x in metrics),
        "total_steps": len(steps),
    }
    if metrics and all(c is not None for c in costs):
        final["total_cost_usd"] = sum(costs)  # type: ignore[arg-type]
    agent: dict[str, Any] = {"name": AGENT_NAME, "version": __version__, "model_name": session.model,
                             "extra": {"agent": session.agent}}
    out: dict[str, Any] = {"schema_version": SCHEMA_VERSION, "session_id": session.id, "agent": agent,
                           "steps": steps, "final_metrics": final}
    if session.parent_id:
        out["extra"] = {"forked_from": session.parent_id}
    return out


def render(session: SessionRow, messages: Sequence[ModelMessage]) -> str:
    return strict_json.dumps(trajectory(session, messages), indent=2, ensure_ascii=False) + "\n"
