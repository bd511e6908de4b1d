"""Hostile shell commands against a read-only allow rule and a ``git push`` guard.

Every command is judged by the real gate (``ApprovalGate`` with the real ``RuleSet`` and
``Guard``), and the whole table also runs through a real headless session against the
fake provider, asserting on the file system: no marker file a command would leave, no
branch a push would create. A control run of the same table with ``--yolo`` and no
rule or guard proves each command really writes (or pushes) when let through, so a
table entry that is harmless by accident fails the test instead of passing it.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
from fakeprovider import FakeProvider, ToolCall, Turn, tool_results
from kettle import adhoc, run_ketch

from ketch.gate.approval import ApprovalGate
from ketch.extensions.plugins import compile_guard, config_rules
from ketch.gate.rules import RuleSet, rules_from_config

WIRE = "openai-chat"
READ_ONLY = {"shell": {"git status*": "allow", "ls*": "allow", "cat *": "allow"}}
GUARD = [{"kind": "command_prefix", "prefix": "git push", "reason": "pushing is for people"}]

# {M}: a marker path inside the workspace the command would create if its side effect ran.
HOSTILE_TO_ALLOW = [
    "git status > {M}",
    "git status >> {M}",
    "git status >| {M}",
    "git status &> {M}",
    "git status &>> {M}",
    "git status 2> {M}",
    "ls 1>{M}",
    "ls 3>{M}",
    "ls >& {M}",
    "cat README.md <> {M}",
    "ls > /dev/null > {M}",
    "ls -la 'x' >{M} 2>&1",
    "ls; touch {M}",
    "ls && touch {M}",
    "ls /nonexistent || touch {M}",
    "ls | tee {M}",
    "ls & touch {M}",
    "ls\ntouch {M}",
    "ls $(touch {M})",
    "ls `touch {M}`",
    'cat "$(touch {M})"',
    "cat <(touch {M})",
    "ls >(touch {M})",
    "(ls > {M})",
    "{{ ls; touch {M}; }}",
    "ls ${{x:=$(touch {M})}}",
    "ls $((a[$(touch {M})]))",
    "f() {{ touch {M}; }}; f",
    "ls; eval 'touch {M}'",
    "cat <<EOF | sh\ntouch {M}\nEOF",
    "cat <<EOF\n$(touch {M})\nEOF",
    'cat <<< "$(touch {M})"',
    "GIT_CONFIG_COUNT=1 GIT_CONFIG_KEY_0=core.fsmonitor GIT_CONFIG_VALUE_0='touch {M}' git status",
    "git -c core.fsmonitor='touch {M}' status",
    "git status --porcelain; touch {M}",
    "$(echo touch) {M}",
    "x=touch; $x {M}",
    "ls | xargs -I{{}} touch {M}",
    "ls | sh -c 'touch {M}'",
    "cat cmd.txt | bash",
    "git status 2>&1 | tee -a {M}",
    "if ls; then touch {M}; fi",
    "for f in a; do touch {M}; done",
    "trap 'touch {M}' EXIT; ls",
    "git status -- $(touch {M})",
    "ls | awk '{{system(\"touch {M}\")}}'",
    "cat README.md | python3 -c 'open(\"{M}\", \"w\")'",
    "ls ~ > {M}",
    "ls 2>/dev/null 1>>{M}",
    "source ./evil.sh",
    "coproc touch {M}",
    "cat README.md > {M}",
    "cat <<EOF\n`touch {M}`\nEOF",
    "cat <<-EOF\n\t$(touch {M})\n\tEOF",
    "git status | ls | ls\ntouch {M} && ls",
]

# These must still be allowed by the rule without a prompt (headless: they run).
HARMLESS = [
    "git status",
    "git status --short",
    "git status -sb 2>&1",
    "ls",
    "ls -la",
    "ls -la src",
    "ls 'my dir'",
    "cat README.md",
    'cat "README.md"',
    "ls && git status",
    "ls; cat README.md",
    "git status > /dev/null",
    "ls 2>/dev/null",
    "cat README.md 2>&1",
    "ls *.md",
    "ls -- src",
    "git status || ls",
    "ls \\\n  -la",
    "cat src/a.txt src/b.txt",
    "ls $HOME",
    "git status # what changed",
    "ls >&2",
    "cat README.md 2>&-",
    "ls | cat README.md",
    "! git status",
    "cat <<'EOF'\n$(touch never-made) `touch never-made`\nEOF",
    "cat <<EOF\nhello $USER\nEOF",
]

# {B}: a branch name no other entry uses; a push that runs creates it on the remote.
HOSTILE_TO_GUARD = [
    "git push origin HEAD:{B}",
    "git -C . push origin HEAD:{B}",
    "git -c user.name=x push origin HEAD:{B}",
    "git --no-pager push origin HEAD:{B}",
    "git --git-dir=.git --work-tree=. push origin HEAD:{B}",
    "git --namespace=x push origin HEAD:{B}",
    "{GIT} push origin HEAD:{B}",
    "env git push origin HEAD:{B}",
    "env -i PATH=\"$PATH\" HOME=\"$HOME\" git push origin HEAD:{B}",
    "command git push origin HEAD:{B}",
    "nice -n 5 git push origin HEAD:{B}",
    "timeout 30 git push origin HEAD:{B}",
    "nohup git push origin HEAD:{B}",
    "time git push origin HEAD:{B}",
    "stdbuf -oL git push origin HEAD:{B}",
    "sh -c 'git push origin HEAD:{B}'",
    'bash -lc "git push origin HEAD:{B}"',
    "eval 'git push origin HEAD:{B}'",
    "$(echo git) push origin HEAD:{B}",
    "G=git; $G push origin HEAD:{B}",
    "echo push origin HEAD:{B} | xargs git",
    "echo 'git push origin HEAD:{B}' | sh",
    "git $(echo push) origin HEAD:{B}",
    "\\git push origin HEAD:{B}",
    "'git' \"push\" origin HEAD:{B}",
    "g\\it pu\\sh origin HEAD:{B}",
    "ls; git push origin HEAD:{B}",
    "(git push origin HEAD:{B})",
    "x() {{ git push origin HEAD:{B}; }}; x",
    "git -c alias.p=push p origin HEAD:{B}",
    "python3 -c 'import subprocess; subprocess.run([\"git\", \"push\", \"origin\", \"HEAD:{B}\"])'",
    "find . -maxdepth 0 -exec git push origin HEAD:{B} \\;",
    "bash <<'EOF'\ngit push origin HEAD:{B}\nEOF",
    "env -S 'git push origin HEAD:{B}'",
    "git pu\\\nsh origin HEAD:{B}",
    "hash -p {GIT} g; g push origin HEAD:{B}",
    "shopt -s expand_aliases\nalias g=git\ng push origin HEAD:{B}",
    "trap 'git push origin HEAD:{B}' EXIT",
    "PS4='$(git push origin HEAD:{B})'; set -x; ls",
    "g\\it push origin HEAD:{B}\necho 'unterminated",
    "cat <<EOF\n`git push origin HEAD:{B}`\nEOF",
    "./run git push origin HEAD:{B}",
    "ls | ls | ls\ngit push origin HEAD:{B} && ls",
    "ls $((1))\n\\git push origin HEAD:{B}",
    "echo `true` `git push origin HEAD:{B}`",
    "ls `ls`\n`git push origin HEAD:{B}` \\\n ; ls",
]


def _marker(i: int) -> str:
    return f"mark-{i:02d}"


def _hostile(i: int, template: str) -> str:
    return template.format(M=_marker(i))


def _pushing(i: int, template: str) -> str:
    return template.format(B=f"b{i:02d}", GIT=shutil.which("git") or "/usr/bin/git")


def _gate(*, rules: dict[str, Any] | None = None, guards: list[dict[str, Any]] | None = None, yolo: bool = False) -> ApprovalGate:
    return ApprovalGate(
        kinds={"shell": "shell"},
        key_args={"shell": "command"},
        rules=RuleSet(rules_from_config(rules or {}), root=Path(__file__).parent),
        guard=compile_guard([], config_rules(guards or [])),
        yolo=yolo,
    )


# ---------------------------------------------------------------- the gate decides
def test_the_tables_are_as_large_as_promised() -> None:
    assert len(HOSTILE_TO_ALLOW) >= 40 and len(HOSTILE_TO_GUARD) >= 20 and len(HARMLESS) >= 20
    assert len(set(HOSTILE_TO_ALLOW)) == len(HOSTILE_TO_ALLOW) and len(set(HOSTILE_TO_GUARD)) == len(HOSTILE_TO_GUARD)


@pytest.mark.parametrize("template", HOSTILE_TO_ALLOW)
async def test_a_read_only_allow_rule_does_not_cover_a_command_that_writes_or_runs_more(template: str) -> None:
    command = _hostile(0, template)
    decision = await _gate(rules=READ_ONLY).evaluate("shell", {"command": command})
    assert decision.action == "ask", (command, decision)
    assert decision.by == "default"


@pytest.mark.parametrize("command", HARMLESS)
async def test_a_read_only_allow_rule_still_allows_harmless_commands(command: str) -> None:
    decision = await _gate(rules=READ_ONLY).evaluate("shell", {"command": command})
    assert (decision.action, decision.by) == ("allow", "rule"), (command, decision)


@pytest.mark.parametrize("template", HOSTILE_TO_GUARD)
async def test_a_push_guard_refuses_every_spelling_even_under_yolo(template: str) -> None:
    command = _pushing(0, template)
    decision = await _gate(guards=GUARD, yolo=True).evaluate("shell", {"command": command})
    assert (decision.action, decision.by) == ("deny", "guard"), (command, decision)
    assert "pushing is for people" in decision.reason


@pytest.mark.parametrize("command", ["git status", "git log --oneline -3", "git pull", "ls | grep push", "echo 'git push'", "git commit -m 'push it'", "cat push.txt"])
async def test_the_push_guard_leaves_other_commands_alone(command: str) -> None:
    decision = await _gate(guards=GUARD, yolo=True).evaluate("shell", {"command": command})
    assert (decision.action, decision.by) == ("allow", "yolo"), (command, decision)


# ---------------------------------------------------------------- real headless runs
def _git(cwd: Path, *args: str) -> str:
    env = {**os.environ, "GIT_CONFIG_GLOBAL": os.devnull, "GIT_CONFIG_NOSYSTEM": "1"}
    return subprocess.run(["git", *args], cwd=cwd, env=env, check=True, capture_output=True, text=True).stdout


def _workspace(tmp_path: Path) -> Path:
    ws = tmp_path / "ws"
    (ws / "src").mkdir(parents=True)
    (ws / "my dir").mkdir()
    (ws / "README.md").write_text("hello from the readme\n")
    (ws / "src" / "a.txt").write_text("alpha\n")
    (ws / "src" / "b.txt").write_text("beta\n")
    (ws / "cmd.txt").write_text(f"touch {_marker(HOSTILE_TO_ALLOW.index('cat cmd.txt | bash'))}\n")
    (ws / "run").write_text('#!/bin/sh\nexec "$@"\n')  # a repository's own runner of its arguments
    (ws / "run").chmod(0o755)
    (ws / "evil.sh").write_text(f"touch {_marker(HOSTILE_TO_ALLOW.index('source ./evil.sh'))}\n")
    _git(ws, "init", "-q", "-b", "main")
    _git(ws, "-c", "user.name=t", "-c", "user.email=t@t", "add", "-A")
    _git(ws, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "init")
    _git(ws, "init", "-q", "--bare", "remote.git")
    _git(ws, "remote", "add", "origin", str(ws / "remote.git"))
    (ws / ".git" / "info" / "exclude").write_text("remote.git/\n")
    return ws


def _user_config(text: str) -> None:
    path = Path(os.environ["KETCH_CONFIG_DIR"]) / "config.toml"
    path.write_text("titles = false\n" + text, encoding="utf-8")


def _run_all(ws: Path, commands: list[str], *flags: str) -> tuple[Any, list[str], list[dict[str, Any]]]:
    calls = [ToolCall("shell", {"command": c}) for c in commands]
    with FakeProvider([Turn(tool_calls=calls), Turn(text="done")]) as fake:
        run = run_ketch(["-p", "go", "--output-format", "stream-json", *flags, *adhoc(fake, WIRE)], ws)
    assert run.code == 0, run.stderr
    results = [content for _, content in tool_results(fake.model_requests[1])]
    assert len(results) == len(commands)
    resolved = [e for e in map(json.loads, filter(str.strip, run.stdout.splitlines())) if e["type"] == "approval_resolved"]
    return run, results, resolved


def _markers(ws: Path) -> list[str]:
    return sorted(p.name for p in ws.iterdir() if p.name.startswith("mark-"))


def test_headless_the_hostile_table_under_a_read_only_rule_leaves_no_marker(tmp_path: Path) -> None:
    ws = _workspace(tmp_path)
    _user_config("[permissions]\nshell = { \"git status*\" = \"allow\", \"ls*\" = \"allow\", \"cat *\" = \"allow\" }\n")
    commands = [_hostile(i, t) for i, t in enumerate(HOSTILE_TO_ALLOW)]
    _, results, resolved = _run_all(ws, commands)
    assert _markers(ws) == []
    assert [(r["decision"], r["by"]) for r in resolved] == [("deny", "default")] * len(commands)
    # the model reads why the rule did not cover the command
    by_command = dict(zip(commands, results))
    assert "a redirection that writes to mark-00" in by_command[commands[0]]
    assert "cannot parse" in by_command[_hostile(9, HOSTILE_TO_ALLOW[9])]


def test_control_the_hostile_table_really_writes_when_let_through(tmp_path: Path) -> None:
    ws = _workspace(tmp_path)
    commands = [_hostile(i, t) for i, t in enumerate(HOSTILE_TO_ALLOW)]
    _run_all(ws, commands, "--yolo")
    assert _markers(ws) == sorted(_marker(i) for i in range(len(commands)))


def test_headless_harmless_commands_run_under_the_rule_without_a_prompt(tmp_path: Path) -> None:
    ws = _workspace(tmp_path)
    _user_config("[permissions]\nshell = { \"git status*\" = \"allow\", \"ls*\" = \"allow\", \"cat *\" = \"allow\" }\n")
    _, results, resolved = _run_all(ws, HARMLESS)
    assert [(r["decision"], r["by"]) for r in resolved] == [("allow", "rule")] * len(HARMLESS)
    assert "hello from the readme" in results[HARMLESS.index("cat README.md")]
    assert "alpha" in results[HARMLESS.index("cat src/a.txt src/b.txt")]
    assert "README.md" in results[HARMLESS.index("ls -la")]
    assert not (ws / "never-made").exists()


def _branches(ws: Path) -> list[str]:
    """Every ref on the remote by its last part (a namespaced push lands under refs/namespaces)."""
    return sorted(r.rsplit("/", 1)[-1] for r in _git(ws / "remote.git", "for-each-ref", "--format=%(refname)").split())


def test_headless_the_push_table_under_a_guard_pushes_nothing_even_with_yolo(tmp_path: Path) -> None:
    ws = _workspace(tmp_path)
    _user_config('guards = [{kind = "command_prefix", prefix = "git push", reason = "pushing is for people"}]\n')
    commands = [_pushing(i, t) for i, t in enumerate(HOSTILE_TO_GUARD)]
    _, results, resolved = _run_all(ws, commands, "--yolo")
    assert _branches(ws) == []
    assert [(r["decision"], r["by"]) for r in resolved] == [("deny", "guard")] * len(commands)
    assert all("pushing is for people" in r for r in results)


def test_control_the_push_table_really_pushes_without_the_guard(tmp_path: Path) -> None:
    ws = _workspace(tmp_path)
    commands = [_pushing(i, t) for i, t in enumerate(HOSTILE_TO_GUARD)]
    _run_all(ws, commands, "--yolo")
    assert _branches(ws) == [f"b{i:02d}" for i in range(len(commands))]


def test_headless_a_read_only_rule_lets_no_redirection_overwrite_a_tracked_file_or_write_outside(tmp_path: Path) -> None:
    ws = _workspace(tmp_path)
    _user_config("[permissions]\nshell = { \"git status*\" = \"allow\", \"ls*\" = \"allow\", \"cat *\" = \"allow\" }\n")
    commands = [
        "git status > README.md",
        "ls >> src/a.txt",
        "cat README.md > ../outside.txt",
        f"git status &> {tmp_path}/absolute-outside.txt",
        "ls > .git/hooks/pre-commit",
    ]
    _, results, resolved = _run_all(ws, commands)
    assert (ws / "README.md").read_text() == "hello from the readme\n"
    assert (ws / "src" / "a.txt").read_text() == "alpha\n"
    assert not (tmp_path / "outside.txt").exists() and not (tmp_path / "absolute-outside.txt").exists()
    assert not (ws / ".git" / "hooks" / "pre-commit").exists()
    assert [r["decision"] for r in resolved] == ["deny"] * len(commands)
    assert all("a redirection that writes to" in r for r in results)


def test_the_real_binary_headless_denies_a_subset_and_runs_the_harmless(tmp_path: Path) -> None:
    """The same judgement through ``python -m ketch`` as a separate process."""
    ws = _workspace(tmp_path)
    _user_config("[permissions]\nshell = { \"git status*\" = \"allow\", \"ls*\" = \"allow\", \"cat *\" = \"allow\" }\n")
    picked = [0, 9, 12, 18, 29, 32, 35, 38]
    commands = [_hostile(i, HOSTILE_TO_ALLOW[i]) for i in picked] + ["cat README.md", "git status --short"]
    calls = [ToolCall("shell", {"command": c}) for c in commands]
    with FakeProvider([Turn(tool_calls=calls), Turn(text="done")]) as fake:
        run = run_ketch(
            ["-p", "go", "--output-format", "stream-json", *adhoc(fake, WIRE)],
            ws,
            env={"KETCH_CONFIG_DIR": os.environ["KETCH_CONFIG_DIR"], "KETCH_DATA_DIR": os.environ["KETCH_DATA_DIR"], "HOME": os.environ["HOME"]},
            subprocess_=True,
        )
    assert run.code == 0, run.stderr
    assert _markers(ws) == []
    results = [c for _, c in tool_results(fake.model_requests[1])]
    assert "hello from the readme" in results[-2]
    resolved = [e for e in map(json.loads, filter(str.strip, run.stdout.splitlines())) if e["type"] == "approval_resolved"]
    assert sorted(r["decision"] for r in resolved) == ["allow"] * 2 + ["deny"] * len(picked)
