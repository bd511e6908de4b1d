"""Every request extends the one before it byte for byte (the provider's prompt cache serves it).

On each wire a scripted two-turn session (a task list written on step 1, a file written, a
shell output, then a resumed second turn) is run against the fake provider, which records every
request body. After the first request each body's tools and instructions are the ones sent
before, and its history starts with the whole history of the request before it, item for item
as serialized JSON: nothing before the newest message moved. The task list written on step 1 is
in step 2's request (the todo_write result, which no reminder repeats), the git status moved by
the model's own write is said at the next turn's start, the instructions carry no volatile state,
and the reminder is not shown back as something the user typed.
"""

from __future__ import annotations

import json
import os
import sqlite3
from pathlib import Path
from typing import Any

import pytest
from fakeprovider import FakeProvider, ToolCall, Turn
from kettle import adhoc, run_ketch

TASK = "Rename the frobnicator module"
WIRES = ["openai-chat", "openai-responses", "anthropic-messages", "gemini"]


def _dump(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False)


def split_body(wire: str, body: dict[str, Any]) -> tuple[str, str, list[str]]:
    """(tools, instructions, history items) of one request body, each serialized."""
    if wire == "openai-chat":
        messages = list(body["messages"])
        system = [m for m in messages[:1] if m.get("role") in ("system", "developer")]
        return _dump(body.get("tools")), _dump(system), [_dump(m) for m in messages[len(system):]]
    if wire == "openai-responses":
        return _dump(body.get("tools")), _dump(body.get("instructions")), [_dump(i) for i in body["input"]]
    if wire == "anthropic-messages":
        return _dump(body.get("tools")), _dump(body.get("system")), [_dump(m) for m in body["messages"]]
    return _dump(body.get("tools")), _dump(body.get("systemInstruction")), [_dump(c) for c in body["contents"]]


def assert_append_only(wire: str, bodies: list[dict[str, Any]]) -> None:
    """Each body after the first keeps the tools, the instructions and the history of the one before."""
    for n in range(1, len(bodies)):
        tools_a, system_a, items_a = split_body(wire, bodies[n - 1])
        tools_b, system_b, items_b = split_body(wire, bodies[n])
        assert tools_b == tools_a, f"request {n + 1}: the tools changed"
        assert system_b == system_a, f"request {n + 1}: the instructions changed"
        assert len(items_b) > len(items_a), f"request {n + 1} does not extend request {n}"
        for i, (a, b) in enumerate(zip(items_a, items_b)):
            assert a == b, f"request {n + 1}: history item {i} differs from request {n}:\n{a[:400]}\n{b[:400]}"


def script() -> list[Turn]:
    todos = [{"content": TASK, "status": "in_progress"}, {"content": "Update the imports", "status": "pending"}]
    return [
        Turn(tool_calls=[ToolCall("todo_write", {"todos": todos})]),
        Turn(tool_calls=[ToolCall("write_file", {"path": "notes.txt", "content": "one\n" * 50})]),
        Turn(tool_calls=[ToolCall("shell", {"command": "seq 1 400"})]),
        Turn(text="Planned and started."),
        Turn(tool_calls=[ToolCall("read_file", {"path": "notes.txt"})]),
        Turn(text="Read it."),
    ]


def bodies_of(fake: FakeProvider) -> list[dict[str, Any]]:
    return [r.body for r in fake.model_requests if r.body is not None]


def text_of(body: dict[str, Any]) -> str:
    return _dump(body)


def git_repo(root: Path) -> None:
    import subprocess

    subprocess.run(["git", "init", "-q", str(root)], check=True)
    (root / "README").write_text("x\n")
    subprocess.run(["git", "-C", str(root), "add", "README"], check=True)
    subprocess.run(["git", "-C", str(root), "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "x"], check=True)


def reminders_in(items: list[str]) -> list[str]:
    return [item for item in items if "<system-reminder>" in item]


@pytest.mark.parametrize("wire", WIRES)
def test_each_request_extends_the_last_and_state_arrives_as_a_reminder(wire: str, tmp_path: Path) -> None:
    git_repo(tmp_path)
    with FakeProvider(script()) as fake:
        first = run_ketch(["-p", "plan the rename", "--yolo", *adhoc(fake, wire)], tmp_path)
        assert first.code == 0, first.stderr
        second = run_ketch(["--continue", "-p", "now read the notes", "--yolo", *adhoc(fake, wire)], tmp_path)
        assert second.code == 0, second.stderr
    bodies = bodies_of(fake)
    assert len(bodies) == 6
    assert_append_only(wire, bodies)  # across the resume too: the second process sent the same bytes
    # the instructions say nothing that moves
    for body in bodies:
        _, system, _ = split_body(wire, body)
        assert TASK not in system and "Git:" not in system and "Date:" not in system and "reminder>\\n" not in system
    # the first request states everything once; the task list written on step 1 is in step 2's
    # request (the todo_write result shows it, so no reminder repeats it)
    _, _, items = split_body(wire, bodies[0])
    [opening] = reminders_in(items)
    assert "# Date" in opening and "branch " in opening and "# Task list" in opening and TASK not in opening
    _, _, items = split_body(wire, bodies[1])
    assert reminders_in(items) == [opening]
    assert TASK in items[-1] and "Current task list" in items[-1]
    # writing notes.txt moved the git status: the model did it itself, so the rest of the turn
    # does not say so; the next turn's first request does, once
    for body in bodies[2:4]:
        _, _, items = split_body(wire, body)
        assert reminders_in(items) == [opening]
    _, _, items = split_body(wire, bodies[4])
    [_, news] = reminders_in(items)
    assert "1 untracked" in news and "# Date" not in news
    assert "now read the notes" in items[-1] or "now read the notes" in items[-2]
    _, _, items = split_body(wire, bodies[5])
    assert len(reminders_in(items)) == 2  # reading a file changed nothing the model was told


def test_a_reminder_is_stored_but_never_shown_as_a_prompt(tmp_path: Path) -> None:
    with FakeProvider(script()[:4]) as fake:
        run = run_ketch(["-p", "plan the rename", "--yolo", *adhoc(fake, "openai-chat")], tmp_path)
    assert run.code == 0, run.stderr
    data_dir = Path(os.environ["KETCH_DATA_DIR"])
    [db] = list(data_dir.rglob("*.db"))
    with sqlite3.connect(db) as conn:
        rows = [r[0] for r in conn.execute("SELECT data FROM messages ORDER BY seq")]
    marker = json.dumps("<system-reminder>\n# Date")[1:-1]  # as the stored JSON spells it
    assert sum(marker in row for row in rows) == 1, "the reminder is in the stored history"
    [(sid,)] = sqlite3.connect(db).execute("SELECT id FROM sessions").fetchall()
    export = run_ketch(["export", sid, "--format", "md"], tmp_path)
    assert export.code == 0, export.stderr
    assert "plan the rename" in export.stdout and "Planned and started." in export.stdout
    assert "<system-reminder>" not in export.stdout and export.stdout.count("## User") == 1


def _preset_args(fake: FakeProvider, root: Path, preset: str, wire: str) -> tuple[list[str], dict[str, str]]:
    """A connection of ``preset`` (whose cache rules ketch knows) pointed at the fake."""
    from kettle import write_project_config

    url = fake.base_url.removesuffix("/v1") if wire == "anthropic-messages" else fake.base_url
    write_project_config(root, f'[connections.c]\npreset = "{preset}"\nbase_url = "{url}"\nwire = "{wire}"\n')
    key_env = {"anthropic": "ANTHROPIC_API_KEY", "openai": "OPENAI_API_KEY"}[preset]
    return ["-m", "c:fake-model"], {key_env: "sk-fake"}


def test_anthropic_requests_carry_cache_breakpoints(tmp_path: Path) -> None:
    with FakeProvider(script()[:4]) as fake:
        args, env = _preset_args(fake, tmp_path, "anthropic", "anthropic-messages")
        run = run_ketch(["-p", "plan the rename", "--yolo", *args], tmp_path, env=env)
    assert run.code == 0, run.stderr
    bodies = bodies_of(fake)
    assert len(bodies) == 4
    for body in bodies:
        assert body["cache_control"] == {"type": "ephemeral", "ttl": "5m"}  # automatic caching: the newest block
        assert body["tools"][-1]["cache_control"]["type"] == "ephemeral"  # after the tool definitions
        assert body["system"][-1]["cache_control"]["type"] == "ephemeral"  # after the system prompt
        marks = _dump(body).count('"cache_control"')
        assert marks <= 4  # Anthropic takes at most four breakpoints
    assert_append_only("anthropic-messages", bodies)


@pytest.mark.parametrize("wire", ["openai-chat", "openai-responses"])
def test_openai_prompt_cache_key_is_the_session_over_resume_and_fork(wire: str, tmp_path: Path) -> None:
    with FakeProvider([*script()[:4], Turn(text="again"), Turn(text="forked")]) as fake:
        args, env = _preset_args(fake, tmp_path, "openai", wire)
        assert run_ketch(["-p", "plan the rename", "--yolo", *args], tmp_path, env=env).code == 0
        assert run_ketch(["--continue", "-p", "more", "--yolo", *args], tmp_path, env=env).code == 0
        fork = run_ketch(["--continue", "--fork", "-p", "other way", "--yolo", *args], tmp_path, env=env)
        assert fork.code == 0, fork.stderr
    data_dir = Path(os.environ["KETCH_DATA_DIR"])
    [db] = list(data_dir.rglob("*.db"))
    with sqlite3.connect(db) as conn:
        sessions = dict(conn.execute("SELECT id, parent_id FROM sessions").fetchall())
    [parent] = [sid for sid, up in sessions.items() if up is None]
    assert len(sessions) == 2
    keys = [body.get("prompt_cache_key") for body in bodies_of(fake)]
    assert keys == ["ketch-" + parent] * 6  # one key: the resumed process and the fork keep it
    assert_append_only(wire, bodies_of(fake)[:5])


def test_unknown_servers_get_no_cache_fields(tmp_path: Path) -> None:
    with FakeProvider(script()[:4]) as fake:
        assert run_ketch(["-p", "plan the rename", "--yolo", *adhoc(fake, "openai-chat")], tmp_path).code == 0
    for body in bodies_of(fake):
        assert "prompt_cache_key" not in body and "cache_control" not in _dump(body)


def extends(wire: str, before: dict[str, Any], after: dict[str, Any]) -> bool:
    """Whether ``after`` keeps the tools, instructions and whole history of ``before``."""
    tools_a, system_a, items_a = split_body(wire, before)
    tools_b, system_b, items_b = split_body(wire, after)
    return tools_a == tools_b and system_a == system_b and items_b[: len(items_a)] == items_a


FILES = 40


def _reader(req: Any) -> Turn:
    """Read the next file until every one is in, then answer (a request without tools is a summary)."""
    from fakeprovider import tool_results

    if not (req.body or {}).get("tools"):
        return Turn(text="Summary: files were read.")
    done = len(tool_results(req))
    if done >= FILES:
        return Turn(text=f"Read all {done} files.")
    return Turn(tool_calls=[ToolCall("read_file", {"path": f"f{done:02}.txt"})])


@pytest.mark.parametrize("wire", WIRES)
def test_a_long_turn_breaks_the_prefix_only_at_compactions_and_says_so(wire: str, tmp_path: Path) -> None:
    from kettle import write_project_config

    for n in range(FILES):
        (tmp_path / f"f{n:02}.txt").write_text("".join(f"file {n} line {i}: {'x' * 60}\n" for i in range(40)))
    write_project_config(tmp_path, "[compaction]\ncontext_window = 25000\n")
    with FakeProvider([_reader] * (FILES + 10)) as fake:
        run = run_ketch(["-p", "Read every file in order.", "--output-format", "stream-json", *adhoc(fake, wire)], tmp_path)
    assert run.code == 0, run.stderr
    events = [json.loads(line) for line in run.stdout.splitlines() if line.strip()]
    assert events[-1]["type"] == "turn_finished" and events[-1]["text"] == f"Read all {FILES} files.", events[-1]
    bodies = bodies_of(fake)
    assert len(bodies) == FILES + 1  # no summary call: the cheap rungs were enough
    breaks = [n for n in range(1, len(bodies)) if not extends(wire, bodies[n - 1], bodies[n])]
    causes = [e["cause"] for e in events if e["type"] == "prefix_break"]
    assert breaks, "the turn never needed compaction: the window is too large for this test"
    assert len(causes) == len(breaks) and all(c.startswith("compaction (") for c in causes), (breaks, causes)
    # chunked: between two compactions several requests only append (no one-step slide)
    gaps = [b - a for a, b in zip([0, *breaks], breaks)]
    assert min(gaps) >= 4, gaps


def test_a_subagent_gets_the_state_as_reminders_and_its_requests_only_append(tmp_path: Path) -> None:
    from fakeprovider import reminder_texts, tool_results, user_texts

    def answer(req: Any) -> Turn:
        done = len(tool_results(req))
        if user_texts(req)[0].startswith("LOOK"):  # the child: two reads and a todo list, then its report
            steps = [Turn(tool_calls=[ToolCall("todo_write", {"todos": [{"content": "child step", "status": "pending"}]})]),
                     Turn(tool_calls=[ToolCall("read_file", {"path": "a.txt"})]),
                     Turn(tool_calls=[ToolCall("read_file", {"path": "a.txt"})]),
                     Turn(text="CHILD REPORT")]
            return steps[min(done, 3)]
        return Turn(tool_calls=[ToolCall("task", {"description": "look", "prompt": "LOOK at a.txt", "kind": "worker"})]) if done == 0 else Turn(text="parent done")

    (tmp_path / "a.txt").write_text("alpha\n")
    with FakeProvider([answer] * 8) as fake:
        run = run_ketch(["-p", "delegate", "--yolo", *adhoc(fake, "openai-chat")], tmp_path)
    assert run.code == 0, run.stderr
    child = [r for r in fake.model_requests if user_texts(r)[0].startswith("LOOK")]
    assert len(child) >= 3
    bodies = [r.body for r in child if r.body is not None]
    assert_append_only("openai-chat", bodies)
    assert "# Date" in reminder_texts(child[0])[0]
    # the child's own task list, the next step: in its todo_write result, not said again
    assert any("child step" in text for _, text in tool_results(child[1]))
    assert not any("child step" in text for text in reminder_texts(child[1]))


@pytest.mark.parametrize("wire", ["openai-chat", "anthropic-messages"])
def test_the_task_list_stays_in_view_when_compaction_drops_its_result(wire: str, tmp_path: Path) -> None:
    """The todo_write result stands in for a reminder only while the request still holds it: once
    a compaction has pruned it, the list is said again (as a reminder), so every request after the
    write shows the current list somewhere."""
    from fakeprovider import reminder_texts, tool_results
    from kettle import write_project_config

    todos = [{"content": TASK, "status": "in_progress"}]

    def answer(req: Any) -> Turn:
        if not (req.body or {}).get("tools"):
            return Turn(text="Summary: files were read.")
        done = len(tool_results(req))
        if done == 0:
            return Turn(tool_calls=[ToolCall("todo_write", {"todos": todos})])
        if done > FILES:
            return Turn(text="Read them all.")
        return Turn(tool_calls=[ToolCall("read_file", {"path": f"f{done - 1:02}.txt"})])

    for n in range(FILES):
        (tmp_path / f"f{n:02}.txt").write_text("".join(f"file {n} line {i}: {'x' * 60}\n" for i in range(40)))
    write_project_config(tmp_path, "[compaction]\ncontext_window = 24000\n")
    with FakeProvider([answer] * (FILES + 10)) as fake:
        run = run_ketch(["-p", "Plan, then read every file.", "--output-format", "stream-json", *adhoc(fake, wire)], tmp_path)
    assert run.code == 0, run.stderr
    events = [json.loads(line) for line in run.stdout.splitlines() if line.strip()]
    assert any(e["type"] == "prefix_break" for e in events), "no compaction: the window is too large for this test"
    steps = [r for r in fake.model_requests if (r.body or {}).get("tools")]
    shown_by = []
    for n, req in enumerate(steps[1:], start=2):
        in_result = any(TASK in text for _, text in tool_results(req))
        in_reminder = any(TASK in text for text in reminder_texts(req))
        assert in_result or in_reminder, f"request {n} does not show the task list"
        shown_by.append("result" if in_result else "reminder")
    assert shown_by[0] == "result" and "reminder" in shown_by, shown_by  # said again once the result was pruned


def _marked_blocks(body: dict[str, Any]) -> list[tuple[int, int, dict[str, Any]]]:
    """(message index, block index, block) of every message block carrying a ``cache_control``."""
    return [(m, b, block) for m, message in enumerate(body["messages"]) if isinstance(message["content"], list)
            for b, block in enumerate(message["content"]) if "cache_control" in block]


def _result_text(block: dict[str, Any]) -> str:
    content = block.get("content")
    return content if isinstance(content, str) else "".join(c.get("text", "") for c in content or [])


def _without_markers(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _without_markers(v) for k, v in value.items() if k != "cache_control"}
    return [_without_markers(v) for v in value] if isinstance(value, list) else value


def test_anthropic_reads_the_settled_history_back_after_each_compaction(tmp_path: Path) -> None:
    """Anthropic reads a cache entry only at a breakpoint or up to 20 blocks before one, so when a
    compaction placeholders results the history before them would be prefilled again: a fourth
    breakpoint at the end of what a compaction already rewrote (the newest placeholdered result, or
    the summary) is what the next compaction's request reads back. Between compactions every
    request only appends, markers included."""
    from fake_cache import ManualClock, PromptCache
    from kettle import write_project_config

    for n in range(FILES):
        (tmp_path / f"f{n:02}.txt").write_text("".join(f"file {n} line {i}: {'x' * 60}\n" for i in range(40)))
    cache = PromptCache(clock=ManualClock())
    with FakeProvider([_reader] * (FILES + 20), cache=cache) as fake:
        args, env = _preset_args(fake, tmp_path, "anthropic", "anthropic-messages")
        config = (tmp_path / ".ketch" / "config.toml").read_text()
        write_project_config(tmp_path, config + "context_window = 25000\n")
        run = run_ketch(["-p", "Read every file in order.", "--yolo", *args], tmp_path, env=env)
    assert run.code == 0, run.stderr
    bodies = bodies_of(fake)
    assert len(cache.log) == len(bodies)
    steps = [n for n, body in enumerate(bodies) if body.get("tools")]  # side requests (a summary) aside
    breaks = [n for p, n in zip(steps, steps[1:]) if not extends("anthropic-messages", bodies[p], bodies[n])]
    first_read = cache.log[steps[1]].read  # tools + system + the prompt, written by the first request
    reread = 0
    for p, n in zip(steps, steps[1:]):
        body, marked = bodies[n], _marked_blocks(bodies[n])
        assert _dump(body).count('"cache_control"') <= 4
        if n < breaks[0]:
            assert marked == [], f"request {n + 1}: a breakpoint before any compaction"
            continue
        [(m, _, block)] = marked
        settled = _result_text(block).startswith("[pruned: ") or block.get("text", "").startswith("[Summary of")
        assert settled and m < len(body["messages"]) - 1, block  # the newest message has the automatic one
        later = [b for msg in body["messages"][m + 1:] if isinstance(msg["content"], list) for b in msg["content"]]
        assert not any(_result_text(b).startswith("[pruned: ") for b in later if b.get("type") == "tool_result")
        if n not in breaks:
            assert extends("anthropic-messages", bodies[p], body), f"request {n + 1} does not extend {p + 1}"
            continue
        before = _marked_blocks(bodies[p])
        if before and _without_markers(body["messages"][: before[0][0] + 1]) == _without_markers(bodies[p]["messages"][: before[0][0] + 1]):
            # a pruning after another: the history up to the previous settled point is read back
            assert cache.log[n].read > first_read, (n, [c.read for c in cache.log])
            reread += 1
    assert len(breaks) >= 3 and reread >= 2, (breaks, reread)
