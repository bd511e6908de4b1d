"""A hook that cannot run blocks the call it guards, and says so: the real binary, a trusted
folder's ``before_tool`` hook that is missing, crashes, times out or exits non-zero, and a
shell call that must not run (its marker file stays absent); the reason reaches stream-json
(a ``notice`` naming the hook) and the model (the call's result). The failing-hook matrix runs
``python -m ketch`` itself for one case per flag set and a ketch process forked from the
preloaded interpreter (``ketch_processes``) for the rest and for the single cases, which does
not pay the SDK imports per case."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from fakeprovider import FakeProvider, Hold, ToolCall, Turn, tool_results
from ketch_processes import Preloaded
from kettle import adhoc, ketch_env, run_ketch, write_project_config

WIRE = "openai-chat"

FAILING = {
    "missing-absolute": ("/nonexistent/ketch-hook-program", "command not found"),
    "missing-on-path": ("ketch-no-such-hook-program --check", "command not found"),
    "not-executable": ("./hook.sh", "not executable"),
    "exit-1": ("echo policy server down >&2; exit 1", "failed (exit 1): policy server down"),
    "exit-3": ("exit 3", "failed (exit 3)"),
    "exit-255": ("exit 255", "failed (exit 255)"),
    "crash-sigkill": ("kill -KILL $$", "signal 9"),
    "crash-sigsegv": ("kill -SEGV $$", "signal 11"),
    "timeout": ("sleep 30", "timed out after 0.5s"),
    "syntax-error": ("if then fi (", "failed (exit 2)"),
}
"""A syntax error makes bash exit 2, the refusal code: the call is refused either way."""
REAL_EXEC_CASE = "missing-absolute"
"""The case that runs the binary itself (the others: a preloaded fork)."""


def _config(tmp_path: Path, command: str, *, extra: str = "", timeout: float | None = None) -> str:
    hook = f"[[hooks.before_tool]]\ncommand = {json.dumps(command)}\nmatcher = \"shell\"\n"
    if timeout is not None:
        hook += f"timeout = {timeout}\n"
    return '[permissions]\nshell = "allow"\n' + hook + extra


def _run(tmp_path: Path, *flags: str, forked_from: Preloaded | None = None) -> tuple[list[dict], list[tuple[str, str]], int, str]:
    marker = tmp_path / "shell-ran"
    with FakeProvider() as fake:
        fake.add(Turn(tool_calls=[ToolCall("shell", {"command": f"touch {marker}"})]), Turn(text="done"))
        run = run_ketch(["-p", "go", "--output-format", "stream-json", *flags, *adhoc(fake, WIRE)], tmp_path,
                        subprocess_=True, forked_from=forked_from)
        results = tool_results(fake.model_requests[1]) if len(fake.model_requests) > 1 else []
    events = [json.loads(line) for line in run.stdout.splitlines() if line.strip()]
    return events, results, run.code, run.stderr


def _notices(events: list[dict]) -> list[str]:
    return [e["text"] for e in events if e["type"] == "notice" and "hook" in e["text"]]


@pytest.mark.parametrize("case", list(FAILING))
@pytest.mark.parametrize("flags", [(), ("--yolo",)], ids=["allow-rule", "yolo"])
def test_a_hook_that_cannot_run_blocks_the_shell_call(
    tmp_path: Path, case: str, flags: tuple[str, ...], preloaded_ketch: Preloaded
) -> None:
    command, words = FAILING[case]
    (tmp_path / "hook.sh").write_text("#!/bin/sh\nexit 0\n")  # not executable (mode 644)
    write_project_config(tmp_path, _config(tmp_path, command, timeout=0.5 if case == "timeout" else None))
    events, results, code, stderr = _run(tmp_path, *flags, forked_from=None if case == REAL_EXEC_CASE else preloaded_ketch)
    assert code == 0, stderr
    assert not (tmp_path / "shell-ran").exists()
    ((_, result),) = results
    assert command in result and "blocked" in result or "Refused" in result, result
    if case != "syntax-error":
        (notice,) = _notices(events)
        assert command in notice and words in notice and "blocked" in notice, notice
        assert words in result
    (resolved,) = [e for e in events if e["type"] == "approval_resolved"]
    assert resolved["decision"] == "deny" and resolved["by"] == "hook"


def test_a_hook_that_exits_0_lets_the_call_run_without_a_notice(tmp_path: Path, preloaded_ketch: Preloaded) -> None:
    write_project_config(tmp_path, _config(tmp_path, "cat > /dev/null; exit 0"))
    events, _, code, stderr = _run(tmp_path, forked_from=preloaded_ketch)
    assert code == 0, stderr
    assert (tmp_path / "shell-ran").exists()
    assert _notices(events) == []


def test_on_failure_allow_runs_the_call_and_still_says_so(tmp_path: Path, preloaded_ketch: Preloaded) -> None:
    write_project_config(tmp_path, _config(tmp_path, "/nonexistent/hook").replace(
        'matcher = "shell"\n', 'matcher = "shell"\non_failure = "allow"\n'))
    events, _, code, stderr = _run(tmp_path, forked_from=preloaded_ketch)
    assert code == 0, stderr
    assert (tmp_path / "shell-ran").exists()
    (notice,) = _notices(events)
    assert "/nonexistent/hook" in notice and "ran anyway" in notice


def test_a_failing_hook_of_another_event_is_a_notice(tmp_path: Path, preloaded_ketch: Preloaded) -> None:
    write_project_config(tmp_path, '[permissions]\nshell = "allow"\n'
                         '[[hooks.prompt_submitted]]\ncommand = "/nonexistent/prompt-hook"\n'
                         '[[hooks.after_tool]]\ncommand = "exit 9"\n')
    # the after_tool hook runs beside the turn (fire and forget), and its notice is a stream-json
    # event only while the turn runs: the request after the call is held until the notice is out,
    # or a fast turn ends first (seen under load; the notice then waits for a next turn)
    hold = Hold("the request after the shell call")
    with FakeProvider() as fake:
        fake.add(Turn(tool_calls=[ToolCall("shell", {"command": f"touch {tmp_path / 'shell-ran'}"})]),
                 Turn(text="done", hold=hold))
        out = tmp_path / "out"
        out.mkdir()
        proc = preloaded_ketch.start(["-p", "go", "--output-format", "stream-json", *adhoc(fake, WIRE)], tmp_path,
                                     ketch_env(), out)
        try:
            proc.wait_for(lambda: any("`exit 9` failed" in t for t in _notices(proc.events())), "the after_tool notice")
        finally:
            hold.release()
            code, stderr = proc.wait(), proc.stderr()
        events = proc.events()
    assert code == 0, stderr
    assert (tmp_path / "shell-ran").exists()  # these hooks guard nothing
    texts = _notices(events)
    assert any("/nonexistent/prompt-hook" in t and "command not found" in t for t in texts), texts
    assert any("`exit 9` failed (exit 9)" in t for t in texts), texts


def test_a_failing_user_hook_blocks_too(tmp_path: Path, isolated_home: Path, preloaded_ketch: Preloaded) -> None:
    """The user's own config: trusted, and still fail-closed."""
    user = isolated_home / "config" / "config.toml"
    user.write_text(user.read_text() + _config(tmp_path, "/nonexistent/user-hook"))
    events, _, code, stderr = _run(tmp_path, forked_from=preloaded_ketch)
    assert code == 0, stderr
    assert not (tmp_path / "shell-ran").exists()
    (notice,) = _notices(events)
    assert "/nonexistent/user-hook" in notice
