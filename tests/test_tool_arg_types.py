"""A tool argument of the wrong type is refused, never coerced: the call does not run and the
model is told which argument was wrong (pydantic alone would turn ``"true"`` into ``True``).

The end-to-end cases drive the real ``ketch -p`` against the fake provider in full-access mode,
so nothing but the type check stands between the call and the command, and assert on the file
the command would have written and on what the next request told the model.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from fakeprovider import FakeProvider, ToolCall, Turn, tool_results
from kettle import adhoc, run_ketch
from pydantic_ai import Tool

from ketch.providers.arg_types import mismatch
from ketch.frontends.builtin_tools import builtin_tool_specs

WIRES = ["openai-chat", "openai-responses", "anthropic-messages", "gemini"]


def schema_of(name: str) -> dict:
    spec = next(s for s in builtin_tool_specs() if s.name == name)
    return Tool(spec.function, name=spec.name).tool_def.parameters_json_schema


@pytest.mark.parametrize(
    ("tool", "args", "named"),
    [
        ("shell", {"command": "true", "background": "true"}, "`background` must be a boolean"),
        ("shell", {"command": "true", "background": 1}, "`background` must be a boolean"),
        ("shell", {"command": "true", "timeout": "30"}, "`timeout` must be a number or null"),
        ("shell", {"command": "true", "timeout": True}, "`timeout` must be a number or null"),
        ("shell", {"command": ["rm", "-rf", "/"]}, "`command` must be a string"),
        ("shell", {"command": "true", "sudo": True}, "`sudo` is not an argument"),
        ("read_file", {"path": "a", "offset": 2.5}, "`offset` must be an integer"),
        ("read_file", {"path": "a", "limit": "10"}, "`limit` must be an integer or null"),
        ("read_file", {"offset": 1}, "`path` is required"),
        ("git_diff", {"staged": "yes"}, "`staged` must be a boolean"),
        ("todo_write", {"todos": [{"content": "x", "status": "done"}]}, "`todos[0].status` must be one of"),
        ("todo_write", {"todos": [{"content": 5, "status": "pending"}]}, "`todos[0].content` must be a string"),
        ("todo_write", {"todos": "[]"}, "`todos` must be an array"),
        ("ask", {"question": "q", "choices": "a,b"}, "`choices` must be an array or null"),
        ("memory", {"action": "drop", "text": "x"}, "`action` must be one of"),
    ],
)
def test_wrong_types_are_named(tool: str, args: dict, named: str) -> None:
    reason = mismatch(args, schema_of(tool))
    assert reason is not None and named in reason, reason


@pytest.mark.parametrize(
    ("tool", "args"),
    [
        ("shell", {"command": "true"}),
        ("shell", {"command": "true", "background": False, "timeout": 5}),
        ("shell", {"command": "true", "timeout": 2.5}),
        ("shell", {"command": "true", "timeout": None}),
        ("read_file", {"path": "a", "offset": 3.0, "limit": None}),  # JSON's 3.0 is an integer
        ("todo_write", {"todos": [{"id": "1", "content": "x", "status": "in_progress"}]}),
        ("git_status", {}),
    ],
)
def test_right_types_pass(tool: str, args: dict) -> None:
    assert mismatch(args, schema_of(tool)) is None


def test_schema_corners() -> None:
    assert mismatch(True, {"type": "integer"}) is not None
    assert mismatch(1, {"const": True}) is not None
    assert mismatch(1.0, {"enum": [1]}) is None
    assert mismatch("x", {"$ref": "https://elsewhere/schema"}) is None  # not ours to follow
    assert mismatch("x", {"$ref": "#/$defs/missing"}) is None
    assert mismatch({"a": "x"}, {"type": "object", "patternProperties": {".*": {"type": "integer"}}}) is None
    deep: dict = {"type": "array"}
    node = deep
    for _ in range(200):
        node["items"] = {"type": "array"}
        node = node["items"]
    value: list = []
    for _ in range(200):
        value = [value]
    assert mismatch(value, deep) is None  # bounded depth: no recursion error


@pytest.mark.parametrize("wire", WIRES)
def test_a_coerced_call_never_runs_and_the_model_is_told(wire: str, tmp_path: Path) -> None:
    marker = tmp_path / "ran.txt"
    bad = ToolCall("shell", {"command": f"echo ran > {marker.name}", "background": "true"}, id="call_bad")
    good = ToolCall("shell", {"command": f"echo ok > {marker.name}.ok"}, id="call_good")
    script = [Turn(tool_calls=[bad]), Turn(tool_calls=[good]), Turn(text="done")]
    with FakeProvider(script) as fake:
        result = run_ketch(["-p", "run it", "--yolo", *adhoc(fake, wire)], tmp_path)
    assert result.code == 0, result.stderr
    assert not marker.exists(), "a call with a string for a boolean ran"
    [(_, told)] = tool_results(fake.model_requests[1])
    assert "`background` must be a boolean" in told and "not a string" in told
    assert (tmp_path / "ran.txt.ok").read_text() == "ok\n"  # the corrected call ran
