"""A deny rule on a file keeps shell commands off it however they name it: as an operand, in
an option's value (``--file=F``, ``-fF``, ``if=F``), a response file (``@F``), quoted or spelled with ``./``. Through
the real binary (headless, ``--approval auto``, where deny rules come first; the fake
provider issues the command); the assertion is on the file the command would have filled
with the secret. A control run of the same table without the rule shows each command really
copies the secret when let through."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from fakeprovider import FakeProvider, ToolCall, Turn, tool_results
from kettle import adhoc, run_ketch

WIRE = "openai-chat"
SECRET = "TOPSECRET-42"

LEAKS = [
    "diff --from-file=secret.txt other.txt > leak",
    "diff --to-file=secret.txt other.txt > leak",
    "xargs -asecret.txt echo > leak",
    "xargs --arg-file=secret.txt echo > leak",
    "xargs -a ./secret.txt echo > leak",
    "grep -fsecret.txt haystack.txt > leak",
    "grep --file=secret.txt haystack.txt > leak",
    "dd if=secret.txt of=leak status=none",
    "dd if=./secret.txt of=leak status=none",
    "cat \"./sec\"ret.txt > leak",
    "cat sec''ret.txt > leak",
    "sort -o leak -- secret.txt",
    "cp -- secret.txt leak",
    "true && true; head -c 99 secret.txt > leak",
    "comm -- secret.txt other.txt > leak",
    "paste -d, secret.txt other.txt > leak",
    # response files: binutils and gcc read more arguments from @FILE (and name them in errors)
    "nm @secret.txt 2> leak",
    "size @./secret.txt 2> leak",
    "gcc -fsyntax-only @secret.txt 2> leak",
]


def _workspace(tmp_path: Path) -> Path:
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "secret.txt").write_text(SECRET + "\n")
    (ws / "other.txt").write_text("plain\n")
    (ws / "haystack.txt").write_text(f"hay\n{SECRET}\n")
    return ws


def _user_config(text: str = "") -> None:
    path = Path(os.environ["KETCH_CONFIG_DIR"]) / "config.toml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("titles = false\ncheckpoints = false\n" + text, encoding="utf-8")


def _run(ws: Path, commands: list[str], *, forked_from: object = None) -> list[dict]:
    with FakeProvider([Turn(tool_calls=[ToolCall("shell", {"command": c}) for c in commands]), Turn(text="done")]) as fake:
        run = run_ketch(["-p", "go", "--approval", "auto", "--output-format", "stream-json", *adhoc(fake, WIRE)], ws, forked_from=forked_from)
        assert run.code == 0, run.stderr[-2000:]
        assert len(tool_results(fake.model_requests[1])) == len(commands)
    return [e for e in map(json.loads, filter(str.strip, run.stdout.splitlines())) if e["type"] == "approval_resolved"]


@pytest.mark.parametrize("command", LEAKS)
def test_a_deny_rule_on_a_file_holds_against_every_way_a_command_names_it(tmp_path: Path, command: str) -> None:
    ws = _workspace(tmp_path)
    _user_config('[permissions]\nread_file = { "secret.txt" = "deny" }\n')
    resolved = _run(ws, [command])
    assert not (ws / "leak").exists() or SECRET not in (ws / "leak").read_text()
    assert [(r["decision"], r["by"]) for r in resolved] == [("deny", "rule")]


def test_control_every_command_of_the_table_leaks_the_secret_without_the_rule(tmp_path: Path, preloaded_ketch: object) -> None:
    ws = _workspace(tmp_path)
    _user_config()
    commands = [c.replace("leak", f"leak-{i:02d}") for i, c in enumerate(LEAKS)]
    _run(ws, commands, forked_from=preloaded_ketch)  # a ketch process of its own
    leaked = [c for i, c in enumerate(LEAKS) if (ws / f"leak-{i:02d}").exists() and SECRET in (ws / f"leak-{i:02d}").read_text()]
    assert leaked == LEAKS


def test_a_deny_rule_holds_under_yolo_too(tmp_path: Path) -> None:
    """``--yolo`` skips every prompt, not the user's deny rules (as bypass modes elsewhere)."""
    ws = _workspace(tmp_path)
    _user_config('[permissions]\nread_file = { "secret.txt" = "deny" }\n')
    commands = ["cp -- secret.txt leak", "cp other.txt plain-copy"]
    with FakeProvider([Turn(tool_calls=[ToolCall("shell", {"command": c}) for c in commands]), Turn(text="done")]) as fake:
        run = run_ketch(["-p", "go", "--yolo", "--output-format", "stream-json", *adhoc(fake, WIRE)], ws)
    assert run.code == 0, run.stderr[-2000:]
    resolved = [e for e in map(json.loads, filter(str.strip, run.stdout.splitlines())) if e["type"] == "approval_resolved"]
    assert sorted((r["decision"], r["by"]) for r in resolved) == [("allow", "yolo"), ("deny", "rule")]
    assert not (ws / "leak").exists()
    assert (ws / "plain-copy").read_text() == "plain\n"
