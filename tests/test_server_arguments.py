"""A model that emits tool arguments no strict parser reads back cannot poison the session.

The fake parses every request as a strict server does (llama.cpp answers 500 otherwise); the
tests assert on the recorded requests, on every stream-json line, on the store's rows and on
the exit code, on each wire.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from fakeprovider import FakeProvider, ToolCall, Turn, tool_results
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kettle import adhoc, run_ketch
from servertools import assert_store_strict, store_rows, strict_lines

from ketch.protocol import strict_json
from ketch.providers.strict_args import UNREADABLE_KEY, unreadable_reason

WIRES = ["openai-chat", "openai-responses", "anthropic-messages"]
UNREADABLE = {
    "overflow": '{"path": "a.txt", "limit": 1e999}',
    "negative overflow": '{"path": "a.txt", "limit": -1e999}',
    "nan": '{"path": "a.txt", "limit": NaN}',
    "infinity word": '{"path": "a.txt", "limit": Infinity}',
    "huge integer": '{"path": "a.txt", "limit": 1' + "0" * 400 + "}",
    "lone surrogate": '{"path": "a\\ud800.txt"}',
    "not json": '{"path": "a.txt", "limit": ',
}


@pytest.mark.parametrize("wire", WIRES)
@pytest.mark.parametrize("kind", list(UNREADABLE))
def test_unreadable_arguments_are_refused_and_the_session_continues(wire: str, kind: str, tmp_path: Path) -> None:
    raw = UNREADABLE[kind]
    script = [Turn(tool_calls=[ToolCall("read_file", {}, raw_args=raw)]), Turn(text="fixed"), Turn(text="still here")]
    with FakeProvider(script, strict_json=True) as fake:
        first = run_ketch(["-p", "read it", "--output-format", "stream-json", *adhoc(fake, wire)], tmp_path)
        second = run_ketch(["-p", "and now?", "--continue", "--output-format", "json", *adhoc(fake, wire)], tmp_path)
    assert first.code == 0, first.stderr
    events = strict_lines(first.stdout)
    started = next(e for e in events if e["type"] == "tool_call_started")
    assert started["args"] == {UNREADABLE_KEY: started["args"][UNREADABLE_KEY]}
    finished = next(e for e in events if e["type"] == "tool_call_finished")
    assert finished["is_error"] is True and "strict JSON" in finished["summary"]
    assert events[-1]["type"] == "turn_finished" and events[-1]["reason"] == "done"
    # the model was told, in the request that followed
    [(_, told)] = tool_results(fake.model_requests[1])
    assert "could not be read as strict JSON" in told
    # every request (also the next turn's, which replays the call) was strict JSON
    assert fake.json_problems == []
    assert second.code == 0, second.stderr
    assert json.loads(second.stdout)["result"] == "still here"
    replayed = json.dumps(fake.model_requests[2].body)
    assert UNREADABLE_KEY in replayed
    assert_store_strict()


def test_the_raw_text_is_kept_for_replay(tmp_path: Path) -> None:
    raw = UNREADABLE["overflow"]
    with FakeProvider([Turn(tool_calls=[ToolCall("read_file", {}, raw_args=raw)]), Turn(text="ok")], strict_json=True) as fake:
        run = run_ketch(["-p", "go", *adhoc(fake, "openai-chat")], tmp_path)
    assert run.code == 0, run.stderr
    calls = [m for m in fake.model_requests[1].body["messages"] if m.get("tool_calls")]
    arguments = json.loads(calls[0]["tool_calls"][0]["function"]["arguments"])
    assert arguments == {UNREADABLE_KEY: raw}


def test_readable_arguments_are_untouched(tmp_path: Path) -> None:
    (tmp_path / "a.txt").write_text("alpha\n")
    raw = '{"path": "a.txt", "limit": 12345678901234567}'
    with FakeProvider([Turn(tool_calls=[ToolCall("read_file", {}, raw_args=raw)]), Turn(text="ok")], strict_json=True) as fake:
        run = run_ketch(["-p", "go", "--output-format", "stream-json", *adhoc(fake, "openai-chat")], tmp_path)
    assert run.code == 0, run.stderr
    started = next(e for e in strict_lines(run.stdout) if e["type"] == "tool_call_started")
    assert started["args"] == {"path": "a.txt", "limit": 12345678901234567}
    [(_, result)] = tool_results(fake.model_requests[1])
    assert "alpha" in result


# ---------------------------------------------------------------- the property
def _raw(value: object) -> str:
    """JSON text of ``value`` as a model could stream it: non-finite floats as overflowing
    literals or NaN, big integers in full, lone surrogates as escapes."""
    if isinstance(value, bool) or value is None:
        return json.dumps(value)
    if isinstance(value, float):
        if value != value:
            return "NaN"
        if value in (float("inf"), float("-inf")):
            return "1e999" if value > 0 else "-1e999"
        return repr(value)
    if isinstance(value, int):
        return str(value)
    if isinstance(value, str):
        return json.dumps(value)  # ensure_ascii: a lone surrogate becomes its \udXXX escape
    if isinstance(value, list):
        return "[" + ",".join(_raw(v) for v in value) + "]"
    assert isinstance(value, dict)
    return "{" + ",".join(f"{json.dumps(k)}:{_raw(v)}" for k, v in value.items()) + "}"


_TEXT = st.text(st.characters(codec=None, categories=None, exclude_categories=()) | st.sampled_from(["\ud800", "\udfff"]), max_size=6)
_LEAVES = st.none() | st.booleans() | st.floats() | st.integers() | st.integers(min_value=2**63, max_value=10**400) | _TEXT
JSON_VALUES = st.recursive(_LEAVES, lambda inner: st.lists(inner, max_size=3) | st.dictionaries(_TEXT, inner, max_size=3), max_leaves=8)


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(value=JSON_VALUES, wire=st.sampled_from(WIRES))
def test_any_generated_arguments_leave_the_session_continuable(value: object, wire: str, tmp_path_factory: pytest.TempPathFactory) -> None:
    cwd = tmp_path_factory.mktemp("prop")
    raw = _raw({"value": value})
    script = [Turn(tool_calls=[ToolCall("todo_read", {}, raw_args=raw)]), Turn(text="done"), Turn(text="next")]
    with FakeProvider(script, strict_json=True) as fake:
        first = run_ketch(["-p", "go", "--output-format", "stream-json", *adhoc(fake, wire)], cwd)
        second = run_ketch(["-p", "again", "--continue", "--output-format", "json", *adhoc(fake, wire)], cwd)
    assert first.code == 0, first.stderr
    strict_lines(first.stdout)
    assert second.code == 0, second.stderr
    assert json.loads(second.stdout)["result"] == "next"
    assert fake.json_problems == [], fake.json_problems  # every request, the replay included, was strict
    assert len(fake.model_requests) == 3


# ---------------------------------------------------------------- pieces
def test_reasons_name_what_was_wrong() -> None:
    assert "too large for a double" in unreadable_reason('{"a": 1e999}')
    assert "NaN" in unreadable_reason('{"a": NaN}')
    assert "64 bits" in unreadable_reason('{"a": ' + "9" * 30 + "}")
    assert "surrogate" in unreadable_reason('{"a": "\\udc80"}')
    assert "not an object" in unreadable_reason("[1, 2]")
    assert unreadable_reason('{"a": 1.5, "b": [true, null, "x"], "c": 18446744073709551615}') is None
    assert unreadable_reason("") is None and unreadable_reason({"a": 1}) is None
    assert unreadable_reason({"a": float("inf")}) is not None


def test_strict_dumps_never_writes_nan_or_infinity() -> None:
    text = strict_json.dumps({"a": float("inf"), "b": [float("nan"), 1.5], "c": -float("inf")})
    assert json.loads(text, parse_constant=lambda c: pytest.fail(c)) == {"a": None, "b": [None, 1.5], "c": None}


def test_every_json_writer_in_ketch_is_strict() -> None:
    """No module writes JSON with the stdlib's lenient default: every ``json.dump(s)`` call passes
    ``allow_nan=False`` (or goes through ``strict_json.dumps``), except where the text is measured,
    never written (the budget's length estimates), where the provider's own SSE event goes back to
    the SDK in this process unchanged but merged (``coalesce``: a null for a provider's
    ``-Infinity`` logprob would fail the SDK's validation), and where the model's raw arguments
    become the text of a JSON *string* (``strict_args``)."""
    import ast

    root = Path(__file__).parent.parent / "src" / "ketch"
    measuring = {"context/budget.py", "websearch/capability.py", "providers/coalesce.py", "providers/strict_args.py"}
    offenders = []
    for path in root.rglob("*.py"):
        rel = path.relative_to(root).as_posix()
        if rel in measuring:
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                    and node.func.attr in ("dump", "dumps") and isinstance(node.func.value, ast.Name)
                    and node.func.value.id == "json"):
                continue
            strict = any(k.arg == "allow_nan" and isinstance(k.value, ast.Constant) and k.value.value is False
                         for k in node.keywords)
            if not strict:
                offenders.append(f"{rel}:{node.lineno}")
    assert offenders == [], f"lenient json.dumps (pass allow_nan=False or use ketch.protocol.strict_json.dumps): {offenders}"


@pytest.mark.parametrize("wire", ["openai-chat", "anthropic-messages"])
def test_a_session_poisoned_before_the_check_is_cleaned_on_resume(wire: str, tmp_path: Path) -> None:
    """A history stored by a ketch that kept `1e4000` (the session of the issue) continues."""
    from pydantic_ai.messages import ModelRequest, ModelResponse, TextPart, ToolCallPart, ToolReturnPart, UserPromptPart

    from ketch.state.store import Store

    poisoned = '{"path": "a.txt", "limit": 1e4000}'
    store = Store.open()
    try:
        session = store.reserve_session(str(tmp_path.resolve()), "adhoc:fake-model", "build")
        store.append_step(session, [
            ModelRequest(parts=[UserPromptPart("read it")]),
            ModelResponse(parts=[ToolCallPart("read_file", poisoned, "call_old")]),
            ModelRequest(parts=[ToolReturnPart("read_file", "alpha", "call_old")]),
            ModelResponse(parts=[TextPart("It says alpha.")]),
        ])
    finally:
        store.close()
    with FakeProvider([Turn(text="continuing")], strict_json=True) as fake:
        run = run_ketch(["-p", "go on", "--continue", "--output-format", "json", *adhoc(fake, wire)], tmp_path)
    assert run.code == 0, run.stderr
    assert json.loads(run.stdout)["result"] == "continuing"
    assert fake.json_problems == []
    assert UNREADABLE_KEY in json.dumps(fake.model_requests[0].body)
    assert_store_strict()
    assert not any("1e4000" in row and UNREADABLE_KEY not in row for row in store_rows())
