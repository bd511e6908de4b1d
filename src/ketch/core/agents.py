"""Agent variants (build, plan, user-defined) and the one function that narrows tools.

The tools described in the instructions and the tools on the wire both come from
``active_tool_names``, so a withheld tool is absent from both together.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from ketch.config.settings import Config, ConfigError

READ_ONLY_KINDS = frozenset({"read", "meta"})

_PLAN_PROMPT = (
    "You are in plan mode: investigate with the reading tools and answer with a concrete, "
    "step-by-step plan. You cannot change files or run commands in this mode."
)


@dataclass(frozen=True)
class AgentVariant:
    name: str
    prompt: str = ""
    tools: tuple[str, ...] | None = None
    """Explicit tool list (a ceiling); None means every tool the kind rules allow."""
    read_only: bool = False
    model: str | None = None
    think: str | None = None
    description: str = ""


BUILTIN_AGENTS: dict[str, AgentVariant] = {
    "build": AgentVariant("build", description="the default: reads, edits and runs commands"),
    "plan": AgentVariant("plan", prompt=_PLAN_PROMPT, read_only=True, description="read-only: investigates and plans"),
}


def agent_names(config: Config) -> list[str]:
    return [*BUILTIN_AGENTS, *(n for n in config.agents if n not in BUILTIN_AGENTS)]


def resolve_agent(name: str, config: Config) -> AgentVariant:
    user = config.agents.get(name)
    if user is not None:
        return AgentVariant(
            name,
            prompt=user.prompt,
            tools=tuple(user.tools) if user.tools is not None else None,
            model=user.model,
            think=user.think,
            description=user.description,
        )
    if name in BUILTIN_AGENTS:
        return BUILTIN_AGENTS[name]
    raise ConfigError(f"unknown agent '{name}'; available: {', '.join(agent_names(config))}")


def active_tool_names(
    kinds: Mapping[str, str],
    variant: AgentVariant,
    *,
    enabled: Iterable[str] | None = None,
    disabled: Iterable[str] = (),
    interactive: bool = True,
    ceiling: Iterable[str] | None = None,
) -> list[str]:
    """The tools offered on this step, in a stable order."""
    enabled_set = set(enabled) if enabled is not None else None
    disabled_set = set(disabled)
    ceiling_set = set(ceiling) if ceiling is not None else None
    names: list[str] = []
    for name, kind in kinds.items():
        if variant.read_only and kind not in READ_ONLY_KINDS:
            continue
        if variant.tools is not None and name not in variant.tools:
            continue
        if enabled_set is not None and name not in enabled_set:
            continue
        if name in disabled_set:
            continue
        if ceiling_set is not None and name not in ceiling_set:
            continue
        if kind == "interactive" and not interactive:
            continue
        names.append(name)
    return names
