"""The built-in tools, collected in the order the model sees them, and what they stand on:
the workspace jail, the network guard, the run-later path list.

May import: core.events/errors/exceptions/config, state (the task list, memory), lsp (the
language servers the file tools ask for diagnostics) and the SDK's tool types. Never frontends or ui.
"""

from __future__ import annotations

from ketch.tools.base import ToolSpec


def builtin_tool_specs() -> list[ToolSpec]:
    """Every built-in tool. Imports the tool modules (and pydantic-ai) on first call."""
    from ketch.tools import memory
    from ketch.tools import notebook
    from ketch.extensions import skills
    from ketch.tools import ask, background, diagnostics, files, git, search, shell, web

    specs: list[ToolSpec] = []
    for module in (files, diagnostics, search, shell, background, git, web, notebook, memory, skills, ask):
        specs.extend(module.TOOLS)
    return specs
