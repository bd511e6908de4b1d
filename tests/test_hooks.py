from __future__ import annotations

import json
import os
import time
from pathlib import Path

import psutil
import pytest

from ketch.extensions.hooks import HookConfigError, HookRunner, parse_hooks


def script(tmp_path: Path, name: str, body: str) -> str:
    path = tmp_path / name
    path.write_text("#!/usr/bin/env bash\n" + body)
    path.chmod(0o755)
    return str(path)


async def test_exit_2_refuses_with_stderr_and_the_hook_saw_the_event(tmp_path):
    guard = script(tmp_path, "guard.sh", 'cat > "$PWD/seen.json"\necho "  no pushing on fridays  " >&2\nexit 2\n')
    runner = HookRunner({"before_tool": [{"command": guard, "matcher": "shell|write_file"}]}, tmp_path)
    reason = await runner.before_tool("shell", {"command": "git push"})
    assert reason == "no pushing on fridays"
    seen = json.loads((tmp_path / "seen.json").read_text())
    assert seen == {"event": "before_tool", "tool": "shell", "args": {"command": "git push"}, "cwd": str(tmp_path)}
    assert runner.warnings == []


async def test_matcher_is_a_full_match_on_the_tool_name(tmp_path):
    runner = HookRunner({"before_tool": [{"command": "touch ran-$KETCH_TOOL_NAME; exit 2", "matcher": "shell|write_file"}]}, tmp_path)
    assert await runner.before_tool("read_file", {"path": "a"}) is None
    assert await runner.before_tool("shell_status", {}) is None
    assert await runner.before_tool("write_file", {"path": "a"}) == "refused by hook: touch ran-$KETCH_TOOL_NAME; exit 2"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ran-write_file"]


async def test_other_failures_are_warnings_not_refusals(tmp_path):
    runner = HookRunner(
        {"before_tool": [{"command": "echo broken config >&2; exit 1"}, {"command": "touch second-ran"}]}, tmp_path
    )
    assert await runner.before_tool("shell", {"command": "ls"}) is None
    assert runner.warnings == ["hook before_tool `echo broken config >&2; exit 1` exited 1: broken config"]
    assert (tmp_path / "second-ran").exists()


async def test_first_refusal_stops_later_hooks(tmp_path):
    runner = HookRunner({"before_tool": [{"command": "echo stop >&2; exit 2"}, {"command": "touch later"}]}, tmp_path)
    assert await runner.before_tool("shell", {}) == "stop"
    assert not (tmp_path / "later").exists()


async def test_timeout_kills_the_whole_process_tree(tmp_path):
    # the hook starts a grandchild in a session of its own (out of the hook's process group)
    command = "setsid bash -c 'echo $$ > child.pid; exec sleep 30' & echo $$ > hook.pid; wait"
    runner = HookRunner({"before_tool": [{"command": command, "timeout": 0.5}]}, tmp_path)
    assert await runner.before_tool("shell", {}) is None
    assert runner.warnings == [f"hook before_tool `{command}` timed out after 0.5s and was killed"]
    for name in ("hook.pid", "child.pid"):
        pid = int((tmp_path / name).read_text())
        deadline = time.monotonic() + 3
        while psutil.pid_exists(pid) and psutil.Process(pid).status() != psutil.STATUS_ZOMBIE:
            assert time.monotonic() < deadline, f"{name} {pid} still running"
            time.sleep(0.05)


async def test_after_tool_prompt_and_stop_events_reach_their_hooks(tmp_path):
    record = 'cat >> "$PWD/events.jsonl"; echo >> "$PWD/events.jsonl"; exit 2'
    runner = HookRunner(
        {
            "after_tool": [{"command": record, "matcher": "shell"}],
            "prompt_submitted": [{"command": record}],
            "turn_stopped": {"command": record},
        },
        tmp_path,
    )
    await runner.prompt_submitted("fix the bug")
    await runner.after_tool("shell", {"command": "ls"}, "2 files", False)
    await runner.after_tool("read_file", {"path": "x"}, "ok", False)
    await runner.turn_stopped("done")
    events = [json.loads(line) for line in (tmp_path / "events.jsonl").read_text().splitlines() if line]
    cwd = str(tmp_path)
    assert events == [
        {"event": "prompt_submitted", "prompt": "fix the bug", "cwd": cwd},
        {"event": "after_tool", "tool": "shell", "args": {"command": "ls"}, "result": "2 files", "is_error": False, "cwd": cwd},
        {"event": "turn_stopped", "reason": "done", "cwd": cwd},
    ]
    # exit 2 outside before_tool refuses nothing; it is reported like any failure
    assert len(runner.warnings) == 3 and all("exited 2" in w for w in runner.warnings)


async def test_hooks_run_in_the_given_directory(tmp_path):
    runner = HookRunner({"turn_stopped": [{"command": "pwd > where.txt"}]}, tmp_path)
    await runner.turn_stopped("done")
    assert Path((tmp_path / "where.txt").read_text().strip()).resolve() == tmp_path.resolve()


async def test_no_hooks_configured_runs_nothing(tmp_path):
    runner = HookRunner(None, tmp_path)
    assert await runner.before_tool("shell", {"command": "ls"}) is None
    assert os.listdir(tmp_path) == []


@pytest.mark.parametrize(
    "config, message",
    [
        ({"on_error": [{"command": "x"}]}, "not a hook event"),
        ({"before_tool": [{"matcher": "x"}]}, "needs a non-empty 'command'"),
        ({"before_tool": [{"command": "x", "matcher": "("}]}, "not a valid regex"),
        ({"before_tool": [{"command": "x", "timeout": -1}]}, "positive number"),
        ({"before_tool": [{"command": "x", "shell": "zsh"}]}, "unknown key"),
        ({"before_tool": "echo hi"}, "list of tables"),
    ],
)
def test_bad_hook_config_is_rejected_with_a_clear_message(config, message):
    with pytest.raises(HookConfigError, match=message):
        parse_hooks(config)
