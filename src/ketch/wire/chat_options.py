"""The option fields of a Chat Completions request, decided from the model's profile.

``tools`` and ``tool_choice`` (forcing only where the model allows it; ``allowed_tools`` where
the API takes it, else the tool list narrowed), ``reasoning_effort`` (the unified thinking level
on the efforts the model accepts) and a native-output ``response_format``: the rules
pydantic-ai's Chat model applied, so the bytes stay the same.
"""

from __future__ import annotations

from typing import Any

EFFORT_ORDER = ("none", "minimal", "low", "medium", "high", "xhigh", "max")


def reasoning_effort(profile: Any, settings: dict[str, Any], thinking: Any) -> str | None:
    """``reasoning_effort``: the explicit setting, else the unified level on the profile's scale."""
    if effort := settings.get("openai_reasoning_effort"):
        return effort
    if thinking is None or (thinking is False and "openai_chat_thinking_false_body" in profile):
        return None
    from pydantic_ai.profiles.openai import OPENAI_REASONING_EFFORT_MAP

    supports_max = profile.get("openai_chat_supports_max_reasoning_effort", False)
    supported = profile.get("openai_reasoning_efforts")
    if supported is None:
        if thinking is False and profile.get("thinking_always_enabled", False):
            return None
        if thinking == "minimal" and not profile.get("openai_supports_minimal_reasoning_effort", True):
            return "low"
        if thinking == "max" and supports_max:
            return "max"
        return OPENAI_REASONING_EFFORT_MAP[thinking]
    accepted = sorted((e for e in supported if e != "max" or supports_max), key=EFFORT_ORDER.index)
    if thinking is False:
        return next(iter(accepted), None)
    wanted = EFFORT_ORDER.index("max" if thinking == "max" and supports_max else OPENAI_REASONING_EFFORT_MAP[thinking])
    active = [e for e in accepted if e != "none"]
    return next((e for e in active if EFFORT_ORDER.index(e) >= wanted), active[-1] if active else None)


def tools_and_choice(profile: Any, model_name: str, settings: dict[str, Any], params: Any, thinks: bool, *,
                     forcing_thinks: bool | None = None, remedy: str | None = None) -> tuple[list[dict[str, Any]], Any]:
    """The request's function ``tools`` and its ``tool_choice`` (None when there are no tools).

    ``forcing_thinks``: the thinking that rules out a forced choice, where a dialect counts only the
    thinking the caller asked for (OpenRouter); ``remedy``: what the refusal of a forced choice advises."""
    from pydantic_ai.models._tool_choice import resolve_tool_choice, support_tool_forcing, tool_forcing_unavailable_reason

    resolved = resolve_tool_choice(settings, params)  # type: ignore[arg-type]
    defs = params.declared_tool_defs

    def forcing() -> bool:
        reason = tool_forcing_unavailable_reason(
            profile, thinking=thinks if forcing_thinks is None else forcing_thinks,
            thinking_remedy=remedy or "Disable thinking with `thinking=False` or `openai_reasoning_effort='none'`")
        return support_tool_forcing(model_name, settings, reason,  # type: ignore[arg-type]
                                    disables_thinking=thinks and profile.get("forced_tool_choice_disables_thinking", False))

    choice: Any
    if resolved in ("auto", "none"):
        choice = resolved
    elif resolved == "required":
        choice = "required" if forcing() else "auto"
    else:
        mode, names = resolved
        supports = forcing()
        effective = "auto" if mode == "auto" or not supports else mode
        if mode == "required" and len(names) == 1 and supports:
            choice = {"type": "function", "function": {"name": next(iter(names))}}
        elif profile.get("openai_chat_supports_allowed_tools", False):
            choice = {"type": "allowed_tools", "allowed_tools": {"mode": effective, "tools": [
                {"type": "function", "function": {"name": n}} for n in defs if n in names]}}
        else:
            defs = {k: v for k, v in defs.items() if k in names}
            choice = effective
    tools = [function_tool(profile, t) for t in defs.values()]
    return (tools, choice) if tools else (tools, None)


def function_tool(profile: Any, tool: Any) -> dict[str, Any]:
    function: dict[str, Any] = {"name": tool.name, "description": tool.description or "",
                                "parameters": tool.parameters_json_schema}
    if tool.strict and profile.get("openai_supports_strict_tool_definition", True):
        function["strict"] = tool.strict
    return {"type": "function", "function": function}


def json_schema_format(profile: Any, output: Any) -> dict[str, Any]:
    """``response_format`` for native structured output."""
    from pydantic_ai._output import DEFAULT_OUTPUT_TOOL_NAME

    schema: dict[str, Any] = {"name": output.name or DEFAULT_OUTPUT_TOOL_NAME, "schema": output.json_schema}
    if output.description:
        schema["description"] = output.description
    if profile.get("openai_supports_strict_tool_definition", True):
        schema["strict"] = output.strict
    return {"type": "json_schema", "json_schema": schema}


__all__ = ["function_tool", "json_schema_format", "reasoning_effort", "tools_and_choice"]
