"""The built-in tools, collected in the order the model sees them.

The list is the composition root's: it names tools from three packages (``tools``, the skills of
``extensions``, memory and the task list), so it lives above all of them instead of making
``tools`` import the extensions that stand on it.
"""

from __future__ import annotations

from ketch.tools.base import ToolSpec


def builtin_tool_specs() -> list[ToolSpec]:
    """Every built-in tool. Imports the tool modules (and pydantic-ai) on first call."""
    from ketch.tools import skills
    from ketch.tools import ask, background, diagnostics, files, git, memory, notebook, search, shell, web

    specs: list[ToolSpec] = []
    for module in (files, diagnostics, search, shell, background, git, web, notebook, memory, skills, ask):
        specs.extend(module.TOOLS)
    return specs
