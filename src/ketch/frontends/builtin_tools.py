"""The built-in tools, collected in the order the model sees them.

The list is the composition root's: every built-in tool is defined in ``tools``, but the order
the model sees is a decision of the session being built, made here with the rest of it.
"""

from __future__ import annotations

from ketch.tools.base import ToolSpec


def builtin_tool_specs() -> list[ToolSpec]:
    """Every built-in tool. Imports the tool modules (and pydantic-ai) on first call."""
    from ketch.tools import ask, background, diagnostics, files, git, memory, notebook, search, shell, skills, web

    specs: list[ToolSpec] = []
    for module in (files, diagnostics, search, shell, background, git, web, notebook, memory, skills, ask):
        specs.extend(module.TOOLS)
    return specs
