""""Allow commands like this": the rule proposed from the parsed command, never wider than
program + what it runs; through a real session, the accepted rule lets the next command like
it run without asking, a command outside it asks again, and "save" puts it in the user's config."""

from __future__ import annotations

import argparse
import tomllib
from pathlib import Path
from typing import Any

import pytest
from fakeprovider import FakeProvider, ToolCall, Turn, tool_results

from ketch.protocol import events as ev
from ketch.gate.user_rules import save_user_rule
from ketch.gate.rule_proposal import propose
from ketch.gate.rules import Rule, RuleSet
from ketch.frontends.assemble import build_session

WIRE = "openai-chat"


def _allows(pattern: str, command: str) -> bool:
    return RuleSet([Rule("shell", pattern, "allow")]).decide("shell", {"command": command}, "command") is not None


@pytest.mark.parametrize(("command", "expected"), [
    ("python3 src/app.py --x", "python3 src/app.py *"),
    ("python3 -m pytest -q tests", "python3 -m pytest *"),
    ("npm test", "npm test *"),
    ("git status --short", "git status *"),
    ("rm -rf build", "rm -rf build"),
])
def test_the_proposal_fixes_the_program_and_what_it_runs(command: str, expected: str) -> None:
    assert propose(command) == (expected, "")
    assert _allows(expected, command)


def test_the_proposal_for_a_script_is_no_wider_than_its_directory() -> None:
    pattern, _ = propose("python3 src/app.py --x")
    assert pattern is not None
    for outside in ("python3 other.py", "python3 lib/app.py", "python3 -c 'import os'", "python3 src/app.py --x; rm -rf ~",
                    "python3 src/app.py --x > /etc/passwd", "bash -c 'python3 src/app.py'", "python3"):
        assert not _allows(pattern, outside), outside
        assert not _allows("python3 src/*", outside) or outside.startswith("python3 src/"), outside


@pytest.mark.parametrize("command", ["a && b", "echo x > f", "python3 -c 'print(1)'", "sudo make install", "$CMD run", "(cd x; make)",
                                     "/usr/bin/python3 src/app.py", "./run.sh --fast"])
def test_shell_constructs_get_no_proposal_and_a_reason(command: str) -> None:
    pattern, why = propose(command)
    assert pattern is None and why


async def _session(fake: FakeProvider, cwd: Path) -> Any:
    args = argparse.Namespace(cwd=str(cwd), base_url=fake.base_url, wire=WIRE, model="fake-model", yolo=False,
                              sandbox="full-access", approval=None)
    return await build_session(args, interactive=True)


async def test_an_accepted_rule_lets_commands_like_it_run_and_others_ask_again(tmp_path: Path, isolated_home: Path) -> None:
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "app.py").write_text("import sys\nprint('app ran', sys.argv[1:])\n")
    (tmp_path / "other.py").write_text("print('other ran')\n")
    py = "python3"  # by name: a program named by its path gets no proposal
    script = [Turn(tool_calls=[ToolCall("shell", {"command": f"{py} src/app.py --x"})]),
              Turn(tool_calls=[ToolCall("shell", {"command": f"{py} src/app.py --y"})]),
              Turn(tool_calls=[ToolCall("shell", {"command": f"{py} other.py"})]),
              Turn(text="done")]
    asked: list[ev.ApprovalRequested] = []
    with FakeProvider(script) as fake:
        session = await _session(fake, tmp_path)
        try:
            async for event in session.run_turn("go"):
                if isinstance(event, ev.ApprovalRequested):
                    asked.append(event)
                    if len(asked) == 1:
                        session.decide(event.request_id, "allow_rule_saved", event.rule_proposal)
                    else:
                        session.decide(event.request_id, "deny", "not that one")
        finally:
            await session.aclose()
    assert [a.args["command"] for a in asked] == [f"{py} src/app.py --x", f"{py} other.py"]
    assert asked[0].rule_proposal == f"{py} src/app.py *" and asked[0].cwd == str(tmp_path.resolve())
    assert "app ran" in tool_results(fake.model_requests[1])[-1][1]
    assert "'--y'" in tool_results(fake.model_requests[2])[-1][1]  # ran without asking
    assert "not that one" in tool_results(fake.model_requests[3])[-1][1]
    saved = tomllib.loads((isolated_home / "config" / "config.toml").read_text())
    assert saved["permissions"]["allow"] == [f"shell({py} src/app.py *)"]
    assert saved["titles"] is False  # the rest of the file is kept


def test_saving_refuses_a_layout_it_cannot_edit_safely_and_keeps_the_file(tmp_path: Path) -> None:
    config = tmp_path / "config.toml"
    config.write_text('[permissions]\nallow = ["shell(ls *)"]\n')
    with pytest.raises(ValueError, match="add"):
        save_user_rule(Rule("shell", "npm test *", "allow"), config)
    assert config.read_text() == '[permissions]\nallow = ["shell(ls *)"]\n'
    other = tmp_path / "other.toml"
    other.write_text('model = "x"\n[permissions]\nshell = { "git status*" = "allow" }\n')
    save_user_rule(Rule("shell", 'say "hi" *', "allow"), other)
    parsed = tomllib.loads(other.read_text())
    assert parsed["permissions"]["allow"] == ['shell(say "hi" *)'] and parsed["permissions"]["shell"] == {"git status*": "allow"}
