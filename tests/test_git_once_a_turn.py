"""The git status behind the state reminder runs once a turn, not once a step, and still sees
every change the model is due to be told of.

The reminder says the git status at a turn's first request and mid-turn only while the
history holds no value of it (``context.reminders.AT_TURN_START``), so the mid-turn steps of a
turn must start no git at all (each read is two git processes: the config listing and
``status``). A ``git`` first on PATH logs every process ketch starts and runs the real one:
the count is of processes, and the reminders are read off the fake provider's wire.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from fakeprovider import FakeProvider, ToolCall, Turn
from kettle import adhoc, run_ketch

WIRE = "openai-chat"


def _git_logged(tmp_path: Path) -> tuple[dict[str, str], Path]:
    """An environment whose PATH starts with a ``git`` that appends its arguments to a log."""
    real = subprocess.run(["sh", "-c", "command -v git"], capture_output=True, text=True, check=True).stdout.strip()
    shim, log = tmp_path / "shim", tmp_path / "git.log"
    shim.mkdir()
    (shim / "git").write_text(f'#!/bin/sh\nprintf "%s\\n" "$*" >> {log}\nexec {real} "$@"\n', encoding="utf-8")
    (shim / "git").chmod(0o755)
    return {"PATH": f"{shim}{os.pathsep}{os.environ['PATH']}"}, log


def _statuses(log: Path) -> int:
    lines = log.read_text(encoding="utf-8").splitlines() if log.exists() else []
    return sum(1 for line in lines if " status " in f" {line} ")


def _ketchs(log: Path) -> list[str]:
    """The git command lines ketch ran (``git -C ROOT ...``; the test's own start otherwise)."""
    return [line for line in log.read_text(encoding="utf-8").splitlines() if line.startswith("-C ")]


def _reminders(body: dict) -> list[str]:
    """The reminders of a Chat Completions body (user messages that are a reminder; the system
    message only names the frame)."""
    return [m["content"] for m in body["messages"]
            if m.get("role") == "user" and isinstance(m.get("content"), str) and m["content"].startswith("<system-reminder>")]


def test_a_four_step_turn_runs_git_status_once_and_the_next_turn_sees_the_change(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    subprocess.run(["git", "init", "-q", str(ws)], check=True)
    (ws / "README").write_text("x\n")
    subprocess.run(["git", "-C", str(ws), "add", "README"], check=True)
    subprocess.run(["git", "-C", str(ws), "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "x"], check=True)
    env, log = _git_logged(tmp_path)
    script = [
        Turn(tool_calls=[ToolCall("write_file", {"path": "a.txt", "content": "a\n"})]),
        Turn(tool_calls=[ToolCall("write_file", {"path": "b.txt", "content": "b\n"})]),
        Turn(tool_calls=[ToolCall("read_file", {"path": "a.txt"})]),
        Turn(text="wrote two files"),
        Turn(text="seen"),
    ]
    with FakeProvider(script) as fake:
        first = run_ketch(["-p", "write", "--yolo", *adhoc(fake, WIRE)], ws, env=env)
        assert first.code == 0, first.stderr
        in_first_turn = _statuses(log)
        (ws / "c.txt").write_text("the user's own change between turns\n")
        second = run_ketch(["--continue", "-p", "look", "--yolo", *adhoc(fake, WIRE)], ws, env=env)
        assert second.code == 0, second.stderr
    bodies = [r.body for r in fake.model_requests if r.body is not None]
    assert len(bodies) == 5
    # four requests in the first turn, one git status: at its first request
    assert in_first_turn == 1, log.read_text()
    [opening] = _reminders(bodies[0])
    assert "branch " in opening and "clean" in opening
    for body in bodies[1:4]:
        assert _reminders(body) == [opening]  # the model's own writes are not repeated mid-turn
    # the next turn reads the repository again and says what moved (the model's two files and the user's)
    assert _statuses(log) == 2, log.read_text()
    [_, news] = _reminders(bodies[4])
    assert "3 untracked" in news, news


def _init(path: Path, *flags: str) -> None:
    subprocess.run(["git", "init", "-q", *flags, str(path)], check=True)


def test_outside_any_repository_the_summary_starts_no_git_and_inside_one_it_does(tmp_path: Path, monkeypatch) -> None:
    """Only where no folder at or above holds ``.git`` is git skipped: there (and in a bare
    repository, which the launcher refuses to find implicitly) the summary is "" as git's own
    failure made it; a sub-folder of a repository, and a work tree whose ``.git`` is a file,
    still run git and get their branch."""
    from ketch.core.prompt import git_summary

    env, log = _git_logged(tmp_path)
    monkeypatch.setenv("PATH", env["PATH"])
    plain = tmp_path / "plain" / "deep"
    plain.mkdir(parents=True)
    bare = tmp_path / "bare.git"
    _init(bare, "--bare")
    assert git_summary(plain) == "" and git_summary(bare) == ""
    assert _ketchs(log) == [], log.read_text()  # neither started a git (the test's own git init is logged too)

    repo = tmp_path / "repo"
    _init(repo)
    (repo / "sub").mkdir()
    (repo / "sub" / "f.txt").write_text("x\n")
    assert git_summary(repo / "sub").startswith("branch ") and "1 untracked" in git_summary(repo / "sub")
    subprocess.run(["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q",
                    "--allow-empty", "-m", "x"], check=True)
    linked = tmp_path / "linked"
    subprocess.run(["git", "-C", str(repo), "worktree", "add", "-q", "-b", "side", str(linked)], check=True)
    assert (linked / ".git").is_file()
    assert git_summary(linked).startswith("branch side")
    assert _statuses(log) == 3
