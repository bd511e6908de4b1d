"""The built-in tools, collected in the order the model sees them."""

from __future__ import annotations

from .base import ToolSpec


def builtin_tool_specs() -> list[ToolSpec]:
    """Every built-in tool. Imports the tool modules (and pydantic-ai) on first call."""
    from .. import memory, notebook, skills
    from . import ask, files, git, search, shell, web

    specs: list[ToolSpec] = []
    for module in (files, search, shell, git, web, notebook, memory, skills, ask):
        specs.extend(module.TOOLS)
    return specs
