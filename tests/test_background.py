"""Background commands through a headless run and on their own: the gate judges them as it
judges any command, the ids belong to the session, the model is told when one ends (a
reminder after the newest message, and a ``background_finished`` event), and what a command
prints costs a bounded amount of memory however much it prints."""

from __future__ import annotations

import asyncio
import json
import re
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from fakeprovider import FakeProvider, ToolCall, Turn, reminder_texts, tool_results
from kettle import adhoc, run_ketch, write_project_config

from ketch.tools.background import BackgroundJobs, UnreadOutput
from ketch.tools.base import ToolDeps, ToolSettings

pytestmark = pytest.mark.usefixtures("subreaper")

WIRE = "openai-chat"
JOB_ID = re.compile(r"Started in the background as (bg-[0-9a-f]{6})\.")


def _start(command: str) -> Turn:
    return Turn(tool_calls=[ToolCall("shell", {"command": command, "background": True})])


def _results(fake: FakeProvider) -> list[str]:
    out: list[str] = []
    for req in fake.model_requests:
        for _, text in tool_results(req):
            if text not in out:
                out.append(text)
    return out


def _events(stdout: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in stdout.splitlines() if line.strip()]


# ---------------------------------------------------------------- the gate


def test_without_approval_a_background_command_is_denied_and_never_starts(tmp_path: Path) -> None:
    with FakeProvider([_start("touch started.txt; sleep 30"), Turn(text="Denied.")]) as fake:
        run = run_ketch(["-p", "start it", "--output-format", "stream-json", *adhoc(fake, WIRE)], tmp_path)
    assert run.code == 0, run.stderr
    assert not (tmp_path / "started.txt").exists()
    [result] = _results(fake)
    assert "Started in the background" not in result
    [resolved] = [e for e in _events(run.stdout) if e["type"] == "approval_resolved"]
    assert (resolved["name"], resolved["decision"]) == ("shell", "deny")


def test_a_guard_refuses_a_background_command_even_under_yolo(tmp_path: Path) -> None:
    write_project_config(tmp_path, 'guards = [{kind = "command_prefix", prefix = "touch", reason = "no touching"}]\n')
    with FakeProvider([_start("touch started.txt"), Turn(text="Refused.")]) as fake:
        run = run_ketch(["-p", "start it", "--yolo", *adhoc(fake, WIRE)], tmp_path)
    assert run.code == 0, run.stderr
    assert not (tmp_path / "started.txt").exists()
    assert "no touching" in _results(fake)[0]


def test_an_allow_rule_starts_it_and_an_id_of_no_command_is_an_error(tmp_path: Path) -> None:
    write_project_config(tmp_path, '[permissions]\nshell = {"touch started.txt" = "allow"}\n')
    script = [
        _start("touch started.txt"),
        Turn(tool_calls=[ToolCall("shell_output", {"id": "bg-000000"})]),
        Turn(tool_calls=[ToolCall("shell_kill", {"id": "bg-000000"})]),
        Turn(text="Done."),
    ]
    with FakeProvider(script) as fake:
        run = run_ketch(["-p", "start it", *adhoc(fake, WIRE)], tmp_path)
    assert run.code == 0, run.stderr
    started, unknown_read, unknown_kill = [text for _, text in tool_results(fake.model_requests[-1])]
    assert JOB_ID.search(started), started
    assert (tmp_path / "started.txt").exists()
    job = JOB_ID.search(started).group(1)  # type: ignore[union-attr]
    for text in (unknown_read, unknown_kill):
        assert "No background command 'bg-000000' in this session" in text and job in text


# ---------------------------------------------------------------- the model is told when one ends


def _poll_until_ended(req: Any) -> Turn:
    """Read the command until a read says it ended; then answer."""
    texts = [text for _, text in tool_results(req)]
    job = next(m.group(1) for text in texts for m in [JOB_ID.search(text)] if m)
    if "ended after" in texts[-1]:
        return Turn(text="It ended.")
    return Turn(tool_calls=[ToolCall("shell_output", {"id": job})])


def test_the_end_of_a_background_command_reaches_the_model_as_a_reminder_and_an_event(tmp_path: Path) -> None:
    script = [_start("echo hello; echo oops >&2; exit 3"), *([_poll_until_ended] * 40)]
    with FakeProvider(script) as fake:
        run = run_ketch(["-p", "run it", "--yolo", "--output-format", "stream-json", *adhoc(fake, WIRE)], tmp_path)
    assert run.code == 0, run.stderr
    events = _events(run.stdout)
    [finished] = [e for e in events if e["type"] == "background_finished"]
    assert (finished["exit_code"], finished["how"]) == (3, "exit code 3")
    assert finished["command"] == "echo hello; echo oops >&2; exit 3"
    reads = [t for t in _results(fake) if t.startswith(finished["job_id"] + ":")]
    assert "hello" in "".join(reads) and "[stderr] oops" in "".join(reads)
    # the request after the end carries the reminder, after the newest message, once
    told = [i for i, req in enumerate(fake.model_requests) if any("# Background commands" in t for t in reminder_texts(req))]
    assert told, "no request told the model that the command ended"
    last = fake.model_requests[-1]
    reminders = [t for t in reminder_texts(last) if "# Background commands" in t]
    assert len(reminders) == 1, reminders
    assert f"{finished['job_id']} `echo hello; echo oops >&2; exit 3` ended: exit code 3" in reminders[0]


# ---------------------------------------------------------------- bounded memory


def test_unread_output_keeps_the_newest_bytes_and_counts_the_rest() -> None:
    out = UnreadOutput(1000)
    for n in range(500):
        out.add("stdout", f"{n:09d}\n".encode())  # 5,000 bytes in all
    out.add("stderr", "é".encode()[:1])  # a character cut between two reads of the pipe
    out.add("stderr", "é".encode()[1:] + b" failed\n")
    text, dropped = out.take()
    assert dropped == 5000 + 10 - 1000
    assert text.endswith("000000499\n[stderr] é failed\n"), text[-60:]
    assert out.take() == ("", 0)


def test_a_command_printing_megabytes_costs_no_more_than_the_buffer(tmp_path: Path) -> None:
    async def scenario() -> tuple[int, int, str]:
        jobs = BackgroundJobs()
        deps = ToolDeps(workspace=SimpleNamespace(root=tmp_path), settings=ToolSettings(shell_output_cap=4096),
                        extras={"background": jobs})
        job = await jobs.start(deps, "call-1", "head -c 4000000 /dev/zero | tr '\\0' 'x'; echo; echo tail-line")
        await asyncio.wait_for(job.done.wait(), 60)
        held = job.output._size
        text, dropped = job.output.take()
        await jobs.close()
        return held, dropped, text

    held, dropped, text = asyncio.run(scenario())
    assert held <= 4096
    assert dropped == 4000000 + 1 + len("tail-line\n") - held
    assert text.endswith("x\ntail-line\n")


# ---------------------------------------------------------------- checkpoints and rewind


def test_a_rewind_puts_back_what_a_background_command_wrote(tmp_path: Path, isolated_home: Path) -> None:
    (isolated_home / "config" / "config.toml").write_text("titles = false\ncheckpoints = true\n")
    (tmp_path / ".git").mkdir()
    (tmp_path / "kept.txt").write_text("before\n")
    writer = "while [ ! -e go.flag ]; do sleep 0.05; done; echo after > kept.txt; echo new > made.txt"
    script = [_start(writer), Turn(tool_calls=[ToolCall("shell", {"command": "touch go.flag"})]), *([_poll_until_ended] * 40)]
    with FakeProvider(script) as fake:
        run = run_ketch(["-p", "let it write", "--yolo", "--output-format", "json", *adhoc(fake, WIRE)], tmp_path)
    assert run.code == 0, run.stderr
    assert (tmp_path / "kept.txt").read_text() == "after\n" and (tmp_path / "made.txt").exists()
    sid = json.loads(run.stdout)["session_id"]
    listing = run_ketch(["rewind", sid, "--output-format", "json"], tmp_path)
    [prompt] = json.loads(listing.stdout)["prompts"]
    assert {"kept.txt", "made.txt"} <= set(prompt["files"])
    undo = run_ketch(["rewind", sid, "--to", "1", "--code", "--yes", "--output-format", "json"], tmp_path)
    assert undo.code == 0, undo.stderr
    assert (tmp_path / "kept.txt").read_text() == "before\n"
    assert not (tmp_path / "made.txt").exists()


def test_a_background_command_gets_the_environment_without_keys(tmp_path: Path) -> None:
    script = [_start("env > seen.env"), *([_poll_until_ended] * 40)]
    with FakeProvider(script) as fake:
        run = run_ketch(["-p", "run it", "--yolo", *adhoc(fake, WIRE)], tmp_path,
                        env={"DEPLOY_TOKEN": "tok-bg-123", "PLAIN_SETTING": "visible-1"})
    assert run.code == 0, run.stderr
    seen = (tmp_path / "seen.env").read_text()
    assert "PLAIN_SETTING=visible-1" in seen and "tok-bg-123" not in seen
