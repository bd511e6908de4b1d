"""Subagents (the ``task`` tool) against the fake provider.

Parent and child requests arrive at one fake server in any order, so every script
entry is the same router: it looks at the request's first user message (the parent's
prompt or the child's task) and at how many tool results it carries, and answers that
conversation's next step.
"""

from __future__ import annotations

import argparse
import asyncio
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import psutil
from fakeprovider import Hold, RecordedRequest, ToolCall, Turn, tool_names, tool_results, user_texts
from kettle import adhoc, run_ketch, write_project_config

from ketch.protocol import events as ev
from ketch.frontends.assemble import build_session
from ketch.tools.shell import INTERRUPTED_MESSAGE

Step = Callable[[RecordedRequest, int], Turn]

WRITING = {"write_file", "edit_file", "shell", "todo_write", "memory", "web_fetch"}


def router(routes: dict[str, Step]) -> Callable[[RecordedRequest], Turn]:
    """One script entry: the route whose key starts the first user message answers,
    given the request and the number of tool results already in it."""

    def answer(req: RecordedRequest) -> Turn:
        first = user_texts(req)[0]
        for prefix, step in routes.items():
            if first.startswith(prefix):
                return step(req, len(tool_results(req)))
        raise AssertionError(f"no route for {first!r}")

    return answer


def first_user(req: RecordedRequest) -> str:
    return user_texts(req)[0]


def requests_of(fake: Any, prefix: str) -> list[RecordedRequest]:
    return [r for r in fake.model_requests if first_user(r).startswith(prefix)]


def called_tools(req: RecordedRequest) -> list[str]:
    """Names of the tool calls the (Chat Completions) history holds, in order."""
    assert req.body is not None
    return [
        call["function"]["name"]
        for msg in req.body["messages"]
        if msg.get("role") == "assistant"
        for call in msg.get("tool_calls") or []
    ]


def task_call(kind: str, prompt: str, description: str = "look around") -> ToolCall:
    return ToolCall("task", {"description": description, "prompt": prompt, "kind": kind})


async def new_session(fake: Any, root: Path, *, interactive: bool, yolo: bool = False) -> Any:
    args = argparse.Namespace(base_url=fake.base_url, wire="openai-chat", model="fake-model", cwd=str(root), yolo=yolo)
    return await build_session(args, interactive=interactive)


async def drive(session: Any, prompt: str, on_event: Callable[[Any], None] = lambda e: None) -> list[Any]:
    seen: list[Any] = []
    async with asyncio.timeout(30):
        async for event in session.run_turn(prompt):
            seen.append(event)
            on_event(event)
    return seen


async def test_worker_denied_write_never_runs_and_the_prompt_names_the_subagent(fake_provider: Any, tmp_path: Path) -> None:
    report = "WORKER REPORT: the user denied writing x.txt"
    fake = fake_provider([router({
        "delegate": lambda r, n: Turn(tool_calls=[task_call("worker", "WORK: create x.txt")]) if n == 0 else Turn(text="parent done"),
        "WORK": lambda r, n: Turn(tool_calls=[ToolCall("write_file", {"path": "x.txt", "content": "hi"})]) if n == 0 else Turn(text=report),
    })] * 4)
    session = await new_session(fake, tmp_path, interactive=True)
    try:
        def deny(event: Any) -> None:
            if isinstance(event, ev.ApprovalRequested):
                session.decide(event.request_id, "deny", "not now")

        events = await drive(session, "delegate", deny)
    finally:
        await session.aclose()

    assert not (tmp_path / "x.txt").exists()
    asked = [e for e in events if isinstance(e, ev.ApprovalRequested)]
    assert [(e.agent, e.name, e.args) for e in asked] == [("worker-1", "write_file", {"path": "x.txt", "content": "hi"})]
    assert asked[0].session_id == session.session_id and asked[0].turn_id  # in the parent's stream
    resolved = [(e.agent, e.name, e.decision, e.by) for e in events if isinstance(e, ev.ApprovalResolved)]
    assert resolved == [("worker-1", "write_file", "deny", "user")]
    # the child saw the denial as its tool result; the worker holds the writing tools
    worker_reqs = requests_of(fake, "WORK")
    assert "not now" in tool_results(worker_reqs[1])[0][1]
    assert {"write_file", "edit_file", "shell"} <= set(tool_names(worker_reqs[0]))
    assert "task" not in tool_names(worker_reqs[0])
    # the parent's next request holds the final message and none of the child's calls
    parent_reqs = requests_of(fake, "delegate")
    assert len(parent_reqs) == 2
    assert [content for _, content in tool_results(parent_reqs[1])] == [report]
    assert called_tools(parent_reqs[1]) == ["task"]
    assert events[-1] == ev.TurnFinished(session_id=session.session_id, turn_id=events[-1].turn_id, reason="done", text="parent done")


def test_read_only_kinds_never_get_a_writing_tool_and_the_parent_list_is_a_ceiling(fake_provider: Any, tmp_path: Path) -> None:
    write_project_config(tmp_path, """
[tools]
disabled = ["glob"]

[agents.lead]
tools = ["task", "read_file", "grep", "list_dir", "glob", "git_diff", "git_log", "git_status"]

[agents.runner]
prompt = "You run things."
tools = ["read_file", "shell", "glob"]
description = "runs commands"
model = "gpt-5"
think = "high"
""")
    (tmp_path / "notes.txt").write_text("alpha\n", encoding="utf-8")
    fake = fake_provider([router({
        "survey": lambda r, n: Turn(tool_calls=[
            task_call("explore", "EXPLORE the notes"), task_call("review", "REVIEW the diff"), task_call("runner", "RUN it"),
        ]) if n == 0 else Turn(text="all reported"),
        "EXPLORE": lambda r, n: Turn(tool_calls=[ToolCall("read_file", {"path": "notes.txt"})]) if n == 0 else Turn(text="found alpha"),
        "REVIEW": lambda r, n: Turn(text="looks fine"),
        "RUN": lambda r, n: Turn(text="nothing to run"),
    })] * 6)
    run = run_ketch(["-p", "survey", "--agent", "lead", "--output-format", "stream-json", *adhoc(fake, "openai-chat")], tmp_path)
    assert run.code == 0, run.stderr

    # the ceiling: the parent variant's list (no shell, no todo tools) and config (no glob)
    assert tool_names(requests_of(fake, "EXPLORE")[0]) == ["read_file", "list_dir", "grep"]
    assert tool_names(requests_of(fake, "REVIEW")[0]) == ["read_file", "list_dir", "grep", "git_status", "git_diff", "git_log"]
    assert tool_names(requests_of(fake, "RUN")[0]) == ["read_file"]
    # a configured kind's own model (a bare name: the parent's endpoint) and thinking level
    run_body, parent_body = requests_of(fake, "RUN")[0].body or {}, requests_of(fake, "survey")[0].body or {}
    assert (run_body["model"], parent_body["model"]) == ("gpt-5", "fake-model")
    assert (run_body.get("reasoning_effort"), parent_body.get("reasoning_effort")) == ("high", None)

    events = [json.loads(line) for line in run.stdout.splitlines()]
    started = sorted((e["subagent_id"], e["kind"]) for e in events if e["type"] == "subagent_started")
    assert started == [("explore-1", "explore"), ("review-1", "review"), ("runner-1", "runner")]
    progress = [(e["agent"], e["tool"], e["detail"]) for e in events if e["type"] == "subagent_progress"]
    assert progress == [("explore-1", "read_file", "notes.txt")]
    finished = {e["subagent_id"]: (e["ok"], e["input_tokens"], e["output_tokens"]) for e in events if e["type"] == "subagent_finished"}
    assert finished == {"explore-1": (True, 20, 10), "review-1": (True, 10, 5), "runner-1": (True, 10, 5)}
    assert not [e for e in events if e["type"] == "approval_requested"]
    assert events[-1]["type"] == "turn_finished" and events[-1]["text"] == "all reported" and events[-1]["agent"] == ""


async def test_three_subagents_run_concurrently_and_usage_rolls_up(fake_provider: Any, tmp_path: Path) -> None:
    """Concurrency shown by the fake's holds, not by a stopwatch: each child's answer is held
    until all three children have asked; run one after another, the second would never ask
    while the first is held, and the wait below would fail."""
    holds = {f"PART {i}": Hold(f"PART {i}") for i in range(3)}

    def held_child(req: RecordedRequest, done: int) -> Turn:
        part = next(name for name in holds if first_user(req).startswith(name))
        return Turn(text=f"report on {part}", usage=(100, 7), hold=holds[part])

    fake = fake_provider([router({
        "fan out": lambda r, n: Turn(tool_calls=[task_call("explore", f"PART {i}") for i in range(3)]) if n == 0 else Turn(text="merged"),
        "PART": held_child,
    })] * 5)
    session = await new_session(fake, tmp_path, interactive=False)
    turn = asyncio.create_task(drive(session, "fan out"))
    try:
        for part, hold in holds.items():
            assert await asyncio.to_thread(hold.wait_reached, 60), f"{part} never asked while the others were held"
        assert not turn.done()  # every child is still waiting for its answer
        for hold in holds.values():
            hold.release()
        events = await turn
    finally:
        for hold in holds.values():
            hold.release()
        if not turn.done():
            turn.cancel()
        await session.aclose()

    labels = ["explore-1", "explore-2", "explore-3"]
    finished = sorted((e.subagent_id, e.ok, e.input_tokens, e.output_tokens) for e in events if isinstance(e, ev.SubagentFinished))
    assert finished == [(label, True, 100, 7) for label in labels]
    for req in requests_of(fake, "PART"):  # no ceiling here: the build agent holds every tool
        assert {"read_file", "grep"} <= set(tool_names(req)) and not set(tool_names(req)) & (WRITING | {"task"})
    assert {"write_file", "shell", "task"} <= set(tool_names(requests_of(fake, "fan out")[0]))
    results = sorted(content for _, content in tool_results(requests_of(fake, "fan out")[1]))
    assert results == [f"report on PART {i}" for i in range(3)]
    status = session.status()
    assert (status.input_tokens, status.output_tokens) == (2 * 10 + 3 * 100, 2 * 5 + 3 * 7)
    child_usage = [e for e in events if isinstance(e, ev.Usage) and e.agent]
    assert sorted(e.agent for e in child_usage) == labels


def _sleeping_worker(fake_provider: Any, after: Callable[[RecordedRequest], Turn]) -> Any:
    return fake_provider([router({
        "run it": lambda r, n: Turn(tool_calls=[task_call("worker", "SLEEP")]) if n == 0 else Turn(text="parent saw it"),
        "SLEEP": lambda r, n: Turn(tool_calls=[ToolCall("shell", {"command": "echo $$ > pid.txt; exec sleep 30"})]) if n == 0 else after(r),
    })] * 4)


async def _child_pid(root: Path) -> int:
    for _ in range(200):
        text = (root / "pid.txt").read_text() if (root / "pid.txt").exists() else ""
        if text.strip():
            return int(text)
        await asyncio.sleep(0.02)
    raise AssertionError("the child's command never started")


async def test_esc_in_the_parent_cancels_the_subagent_and_kills_its_command(fake_provider: Any, tmp_path: Path) -> None:
    fake = _sleeping_worker(fake_provider, lambda r: Turn(text="unreachable"))
    session = await new_session(fake, tmp_path, interactive=True, yolo=True)
    events: list[Any] = []
    try:
        async for event in session.run_turn("run it"):
            events.append(event)
            if isinstance(event, ev.ToolCallStarted) and event.agent == "worker-1":
                pid = await _child_pid(tmp_path)
                assert psutil.pid_exists(pid)
                session.cancel_turn()
    finally:
        await session.aclose()
    assert events[-1].reason == "cancelled"
    assert [(e.subagent_id, e.ok) for e in events if isinstance(e, ev.SubagentFinished)] == [("worker-1", False)]
    assert not psutil.pid_exists(pid) or psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    assert len(fake.model_requests) == 2  # the parent's first step and the child's first


async def test_ctrl_c_in_the_parent_reaches_the_subagents_command(fake_provider: Any, tmp_path: Path) -> None:
    fake = _sleeping_worker(fake_provider, lambda r: Turn(text=f"child saw: {tool_results(r)[0][1]}"))
    session = await new_session(fake, tmp_path, interactive=True, yolo=True)
    interrupted: list[bool] = []
    try:
        async for event in session.run_turn("run it"):
            if isinstance(event, ev.ToolCallStarted) and event.agent == "worker-1":
                await _child_pid(tmp_path)
                for _ in range(200):  # the registry learns of the command just after it starts
                    if session.interrupt_command():
                        interrupted.append(True)
                        break
                    await asyncio.sleep(0.01)
    finally:
        await session.aclose()
    assert interrupted == [True]
    parent_last = requests_of(fake, "run it")[-1]
    assert INTERRUPTED_MESSAGE in tool_results(parent_last)[0][1]


def test_after_tool_hooks_run_for_the_subagents_calls_without_blocking_it(fake_provider: Any, tmp_path: Path) -> None:
    """A user's after_tool hook (a real script, slow for writes) runs for the worker's write
    as for the parent's own calls, with the same payload; neither the worker nor the parent
    waits for it, ketch does before exiting; calls the gate denied (a guard, in parent and
    child) never ran and fire no hook."""
    root, log = tmp_path / "proj", tmp_path / "log"
    root.mkdir(), log.mkdir()
    hook = tmp_path / "after.sh"
    # the write's hook outlasts the parent's whole turn: only ketch's close can still wait for it
    hook.write_text(f'#!/usr/bin/env bash\n[ "$KETCH_TOOL_NAME" = write_file ] && sleep 1.5\n'
                    f'f=$(mktemp "{log}/$KETCH_TOOL_NAME.XXXXXX")\ncat > "$f"\n')
    hook.chmod(0o755)
    write_project_config(root, f"""
[[hooks.after_tool]]
command = "{hook}"

[[guards]]
kind = "command_prefix"
prefix = "touch"
reason = "no touching"
""")
    logged_when_worker_resumed: list[int] = []
    logged_when_parent_resumed: list[int] = []

    def worker(req: RecordedRequest, done: int) -> Turn:
        if done == 0:
            return Turn(tool_calls=[
                ToolCall("write_file", {"path": "x.txt", "content": "hi\n"}),
                ToolCall("shell", {"command": "touch child.txt"}),
            ])
        logged_when_worker_resumed.append(len(list(log.glob("write_file.*"))))
        return Turn(text="WORKER: wrote x.txt")

    def parent(req: RecordedRequest, done: int) -> Turn:
        if done == 0:
            return Turn(tool_calls=[task_call("worker", "WORK: write x.txt"), ToolCall("shell", {"command": "touch parent.txt"})])
        logged_when_parent_resumed.append(len(list(log.glob("write_file.*"))))
        return Turn(text="parent done")

    fake = fake_provider([router({"delegate": parent, "WORK": worker})] * 4)
    run = run_ketch(["-p", "delegate", "--yolo", "--output-format", "stream-json", *adhoc(fake, "openai-chat")], root,
                    subprocess_=True)
    assert run.code == 0, run.stderr
    assert "destroyed but it is pending" not in run.stderr and "was never awaited" not in run.stderr

    assert (root / "x.txt").read_text() == "hi\n"
    assert not (root / "child.txt").exists() and not (root / "parent.txt").exists()
    # the worker went on while its write's hook still slept, and so did the parent once the task returned
    assert logged_when_worker_resumed == [0] and logged_when_parent_resumed == [0]
    events = [json.loads(line) for line in run.stdout.splitlines()]
    finished = {(e["agent"], e["name"]): e for e in events if e["type"] == "tool_call_finished"}
    assert set(finished) == {("worker-1", "write_file"), ("worker-1", "shell"), ("", "task"), ("", "shell")}
    assert "no touching" in finished["worker-1", "shell"]["summary"] and "no touching" in finished["", "shell"]["summary"]

    seen = sorted((json.loads(p.read_text()) for p in log.iterdir()), key=lambda payload: payload["tool"])
    assert [payload["tool"] for payload in seen] == ["task", "write_file"]  # neither denied shell call
    task_payload, write_payload = seen
    assert write_payload == {
        "event": "after_tool",
        "tool": "write_file",
        "args": {"path": "x.txt", "content": "hi\n"},
        "result": finished["worker-1", "write_file"]["summary"],
        "is_error": False,
        "cwd": str(root),
    }
    assert task_payload["args"] == {"description": "look around", "prompt": "WORK: write x.txt", "kind": "worker"}
    assert task_payload["result"] == "WORKER: wrote x.txt" and task_payload["is_error"] is False
