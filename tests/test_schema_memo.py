"""The suite's memo of tool schemas (``schema_memo``) gives what a fresh build gives, a copy each
time, and keeps no closure: the in-process sessions of every other test see the tools exactly
as a user's ketch builds them."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic_ai import Tool, _function_schema
from pydantic_ai.tools import GenerateToolJsonSchema
from schema_memo import _kept

from ketch.frontends.builtin_tools import builtin_tool_specs


def _fresh(function: Any, name: str) -> Any:
    return _function_schema.function_schema.memo_of(function, GenerateToolJsonSchema, tool_name=name)


def test_the_memo_is_what_tools_are_built_with() -> None:
    assert getattr(_function_schema.function_schema, "memo_of", None) is not None


@pytest.mark.parametrize("spec", builtin_tool_specs(), ids=lambda spec: spec.name)
def test_each_builtin_tool_is_described_and_validated_as_a_fresh_build_does(spec: Any) -> None:
    fresh = _fresh(spec.function, spec.name)
    first, second = (Tool(spec.function, name=spec.name, max_retries=3) for _ in range(2))
    for tool in (first, second):
        kept = tool.function_schema
        assert (kept.json_schema, kept.return_schema, kept.description, kept.takes_ctx, kept.single_arg_name,
                kept.positional_fields, kept.var_positional_field) == (
            fresh.json_schema, fresh.return_schema, fresh.description, fresh.takes_ctx, fresh.single_arg_name,
            fresh.positional_fields, fresh.var_positional_field)
        assert tool.tool_def.parameters_json_schema == fresh.json_schema
    # the same validator (a pure function of the schema) but each its own schema dicts
    assert first.function_schema.validator is second.function_schema.validator
    assert first.function_schema.json_schema is not second.function_schema.json_schema
    first.function_schema.json_schema["properties"]["changed in place"] = {"type": "string"}
    assert "changed in place" not in second.function_schema.json_schema["properties"]
    assert "changed in place" not in Tool(spec.function, name=spec.name).function_schema.json_schema["properties"]


def test_a_closure_is_built_each_time_and_not_kept() -> None:
    def make(n: int) -> Any:
        def probe(value: int) -> str:
            """Echo.

            Args:
                value: a number.
            """
            return str(value + n)

        return probe

    before = len(_kept)
    one, two = Tool(make(1)), Tool(make(2))
    assert one.function_schema.json_schema == two.function_schema.json_schema
    assert one.function_schema.validator is not two.function_schema.validator
    assert len(_kept) == before
