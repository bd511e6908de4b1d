"""Every tool ketch defines from a Python function has a Google-style docstring, so naming the style
(``Session`` builds its tools with ``docstring_format="google"``, skipping pydantic-ai's per-docstring
guess) gives each tool the definition the guess would: name, description and parameter schema."""

from __future__ import annotations

import pytest
from pydantic_ai import Tool

from ketch.core.subagent import SubagentKind, task_tool_spec
from ketch.frontends.builtin_tools import builtin_tool_specs
from ketch.tools.web_search import TOOLS as SEARCH_TOOLS

SPECS = [*builtin_tool_specs(), *SEARCH_TOOLS, task_tool_spec(),
         task_tool_spec({"docs": SubagentKind(name="docs", prompt="", tools=(), description="reads the docs")})]


@pytest.mark.parametrize("spec", SPECS, ids=lambda spec: spec.name)
def test_naming_the_docstring_style_changes_no_tool_definition(spec) -> None:
    guessed = Tool(spec.function, name=spec.name).tool_def
    named = Tool(spec.function, name=spec.name, docstring_format="google").tool_def
    assert named == guessed
    assert named.description, f"{spec.name} has no description"

