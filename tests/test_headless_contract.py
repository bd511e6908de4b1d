"""The headless contract as shipped: the JSON Schemas in the package, held to real runs.

Every end-to-end test that runs ``ketch -p`` through ``kettle.run_ketch`` already passes its
output through ``headless_schema.check_output``; these tests hold the schema files themselves
(shipped, current, strict) and the hook (it runs, and it catches a stray field).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import headless_schema
import pytest
from fakeprovider import FakeProvider, ToolCall, Turn
from kettle import adhoc, run_ketch

from ketch.protocol import event_schema
from ketch.protocol import events as ev


def test_the_shipped_schema_files_are_what_the_event_classes_say() -> None:
    for name, schema in event_schema.built().items():
        assert event_schema.shipped(name) == schema, f"{name} is stale: run python -m ketch.protocol.event_schema"
    stream = event_schema.shipped(event_schema.STREAM_FILE)
    assert set(stream["$defs"]) == set(ev.EVENT_TYPES)
    finished = stream["$defs"]["turn_finished"]["properties"]["reason"]["enum"]
    assert {"done", "refused", "step_limit", "max_tokens", "cost_limit", "time_limit", "error", "cancelled"} <= set(finished)


def test_the_schema_files_are_package_data_of_an_installed_wheel(tmp_path: Path) -> None:
    """A wheel built from the checkout holds both schema files and the Harbor install template."""
    root = Path(__file__).resolve().parents[1]
    subprocess.run([str(Path(sys.executable).parent / "uv"), "build", "--wheel", "--out-dir", str(tmp_path), str(root)],
                   check=True, capture_output=True, timeout=240)
    import zipfile

    [wheel] = tmp_path.glob("ketch-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    assert {"ketch/schemas/stream-json.schema.json", "ketch/schemas/json-output.schema.json",
            "ketch/harbor/install.sh.j2"} <= names


def test_every_event_of_a_real_run_is_checked_and_a_stray_field_is_caught(tmp_path: Path) -> None:
    before = headless_schema.checked["events"]
    with FakeProvider([Turn(tool_calls=[ToolCall("write_file", {"path": "a.txt", "content": "a\n"})]), Turn(text="ok")]) as fake:
        run = run_ketch(["-p", "go", "--yolo", "--output-format", "stream-json", *adhoc(fake, "openai-responses")], tmp_path)
    assert run.code == 0, run.stderr
    lines = run.stdout.splitlines()
    assert headless_schema.checked["events"] - before == len(lines) > 5
    first = json.loads(lines[0])
    with pytest.raises(AssertionError, match="breaks the schema"):
        headless_schema.check_output(["-p", "x", "--output-format", "stream-json"], json.dumps({**first, "extra": 1}))
    with pytest.raises(AssertionError, match="breaks the schema"):
        headless_schema.check_output(["-p", "x", "--output-format", "stream-json"],
                                     json.dumps({**json.loads(lines[-1]), "reason": "finished-ish"}))


def test_the_per_type_check_gives_the_whole_schemas_verdict(tmp_path: Path) -> None:
    """``check_output`` checks an event against its own type's branch (the other branches of
    the ``oneOf`` fail on the ``type`` constant); on real events and on broken ones (a stray
    field, a missing one, a type with another type's fields, an unknown type) that verdict is
    the whole schema's, and every event type has its narrowed check."""
    name = event_schema.STREAM_FILE
    assert set(headless_schema.by_event_type(name)) == set(ev.EVENT_TYPES)
    with FakeProvider([Turn(reasoning="think", tool_calls=[ToolCall("write_file", {"path": "a.txt", "content": "a\n"})]),
                       Turn(text="ok")]) as fake:
        run = run_ketch(["-p", "go", "--yolo", "--output-format", "stream-json", *adhoc(fake, "openai-responses")], tmp_path)
    events = [json.loads(line) for line in run.stdout.splitlines()]
    assert len({e["type"] for e in events}) >= 5, events
    shapeless: list[object] = [{}, [], "text_delta", {"type": 7}, {"type": "no_such_event"}]
    broken = [{**e, "extra": 1} for e in events] + [{k: v for k, v in e.items() if k != "session_id"} for e in events]
    relabelled = [{**o, "type": e["type"]} for e in events for o in events if o["type"] != e["type"]]
    whole = headless_schema.validator(name)
    for cases, fit in ((events, True), (shapeless, False), (broken, False), (relabelled, None)):
        for case in cases:
            verdict = not headless_schema.problems(case, name)
            assert verdict == whole.is_valid(case) and fit in (None, verdict), (verdict, case)


def test_the_json_result_is_checked(tmp_path: Path) -> None:
    before = headless_schema.checked["results"]
    with FakeProvider([Turn(text="hello")]) as fake:
        run = run_ketch(["-p", "hi", "--output-format", "json", *adhoc(fake, "anthropic-messages")], tmp_path)
    assert run.code == 0 and headless_schema.checked["results"] == before + 1
    payload = json.loads(run.stdout)
    del payload["cost_usd"]
    with pytest.raises(AssertionError, match="breaks the schema"):
        headless_schema.check_output(["-p", "x", "--output-format", "json"], json.dumps(payload))


def test_importing_ketch_never_imports_harbor() -> None:
    code = ("import sys, ketch, ketch.frontends.cli, ketch.harbor, ketch.harbor.connection, ketch.state.atif; "
            "print(sorted(m for m in sys.modules if m == 'harbor' or m.startswith('harbor.')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60)
    assert out.stdout.strip() == "[]"
