"""Each row of the program table against the real program.

For every form the table says writes, runs or configures, the real program runs the
command (in a scratch directory, with git's global config off) and the side effect is
checked: the marker file ``M`` appears (or the victim file changes). Then ketch's
reading of the same command is checked: the table classifies it (``effects``), a
read-only allow rule for the program (``PROG *``) does not cover it, and where the form
runs text ketch does not parse, a guard on ``touch`` refuses it. A harmless form of each
program stays covered by the rule, so the table does not win by refusing everything.

A program that is not installed is skipped with the name in the reason (rg, ruby and
rsync are not in the image: .ci/run installs them).
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from ketch.gate.invocations import invocations_of
from ketch.extensions.plugins import compile_guard, config_rules
from ketch.gate.program_options import effects
from ketch.gate.rules import RuleSet, rules_from_config
from ketch.gate.shell_parse import parse_command

# (program, command, kind, how): kind is what the table must say; how is "run" (plain
# subprocess) or "pty" (the program only does it on a terminal). {V} is the victim file.
ROWS: list[tuple[str, str, str, str]] = [
    ("find", "find . -maxdepth 0 -exec touch M ';'", "exec", "run"),
    ("find", "find . -maxdepth 0 -execdir touch M ';'", "exec", "run"),
    ("find", "find . -maxdepth 0 -ok touch M ';'", "exec", "yes"),
    ("find", "find . -maxdepth 0 -okdir touch M ';'", "exec", "yes"),
    ("find", "find . -maxdepth 0 -fprint M", "write", "run"),
    ("find", "find . -maxdepth 0 -fprint0 M", "write", "run"),
    ("find", "find . -maxdepth 0 -fprintf M %p", "write", "run"),
    ("find", "find . -maxdepth 0 -fls M", "write", "run"),
    ("find", "find V -delete", "write", "run"),
    ("sort", "sort -o M in", "write", "run"),
    ("sort", "sort --output=M in", "write", "run"),
    ("sort", "sort --output M in", "write", "run"),
    ("sort", "sort --out=M in", "write", "run"),
    ("sort", "sort -roM in", "write", "run"),
    ("sort", "sort --compress-program=./mk -S 100K -T . big", "exec", "run"),
    ("rg", "rg --pre ./mk x in", "exec", "run"),
    ("rg", "rg --pre=./mk x in", "exec", "run"),
    ("tar", "tar --to-command='touch M' -xf a.tar", "exec", "run"),
    ("tar", "tar -I ./mk -cf x.tar in", "exec", "run"),
    ("tar", "tar --use-compress-program=./mk -cf x.tar in", "exec", "run"),
    ("tar", "tar --use-comp=./mk -cf x.tar in", "exec", "run"),
    ("tar", "tar --checkpoint=1 --checkpoint-action=exec='touch M' -cf x.tar in", "exec", "run"),
    ("tar", "tar -cf M in", "write", "run"),
    ("tar", "tar xf m.tar", "write", "run"),
    ("tar", "tar -xf m.tar", "write", "run"),
    ("sed", "sed -i s/victim/changed/ V", "write", "run"),
    ("sed", "sed -ni s/victim/changed/p V", "write", "run"),
    ("sed", "sed --in-place s/victim/changed/ V", "write", "run"),
    ("sed", "sed -i.bak s/victim/changed/ V", "write", "run"),
    ("sed", "sed -n 'w M' in", "write", "run"),
    ("sed", "sed -n 's/h/x/w M' in", "write", "run"),
    ("sed", "sed -n -e '1W M' in", "write", "run"),
    ("sed", "sed -n '1e touch M' in", "exec", "run"),
    ("sed", "sed 's/.*/touch M/e' in", "exec", "run"),
    ("sed", "sed --expression='s/.*/touch M/e' in", "exec", "run"),
    ("sed", "sed -f script.sed in", "exec", "run"),
    ("awk", "awk 'BEGIN{system(\"touch M\")}'", "exec", "run"),
    ("awk", "awk 'BEGIN{print 1 > \"M\"}'", "exec", "run"),
    ("awk", "awk 'BEGIN{print 1 | \"cat > M\"}'", "exec", "run"),
    ("awk", "awk 'BEGIN{\"touch M\" | getline}'", "exec", "run"),
    ("awk", "awk -f prog.awk", "exec", "run"),
    ("xargs", "echo M | xargs touch", "exec", "run"),
    ("xargs", "echo M | xargs -I{} touch {}", "exec", "run"),
    ("less", "cat in | less -o M", "write", "pty"),
    ("less", "cat in | less --log-file=M", "write", "pty"),
    ("less", "cat in | less -OM", "write", "pty"),
    ("man", "man -P 'touch M' ls", "exec", "pty"),
    ("man", "man --pager='touch M' ls", "exec", "pty"),
    ("python3", "python3 -c 'open(\"M\", \"w\")'", "exec", "run"),
    ("python3", "python3 mk.py", "exec", "run"),
    ("python3", "python3 -m mkmod", "exec", "run"),
    ("python3", "python3 -Ic 'open(\"M\", \"w\")'", "exec", "run"),
    ("python3", "python3 < mk.py", "exec", "run"),
    ("node", "node -e 'require(\"fs\").writeFileSync(\"M\", \"\")'", "exec", "run"),
    ("node", "node --eval='require(\"fs\").writeFileSync(\"M\", \"\")'", "exec", "run"),
    ("node", "node --eval 'require(\"fs\").writeFileSync(\"M\", \"\")'", "exec", "run"),
    ("node", "node -p 'require(\"fs\").writeFileSync(\"M\", \"\")'", "exec", "run"),
    ("node", "node --require ./mk.js -e 1", "exec", "run"),
    ("node", "node mk.js", "exec", "run"),
    ("perl", "perl -e 'open F, \">M\"'", "exec", "run"),
    ("perl", "perl -E 'open F, \">M\"'", "exec", "run"),
    ("perl", "perl -i -pe s/victim/changed/ V", "write", "run"),
    ("perl", "perl -pi -e s/victim/changed/ V", "write", "run"),
    ("ruby", "ruby -e 'File.write(\"M\", \"\")'", "exec", "run"),
    ("env", "env -S 'touch M'", "exec", "run"),
    ("env", "env --split-string='touch M'", "exec", "run"),
    ("env", "env X=1 touch M", "config", "run"),
    ("make", "make -s all", "exec", "run"),
    ("make", "make", "exec", "run"),
    ("git", "git -c alias.zz='!touch M' zz", "config", "run"),
    ("git", "git -c core.fsmonitor='touch M' status", "config", "run"),
    ("git", "git -c core.pager='touch M' -p log", "config", "pty"),
    ("git", "git log --output=M", "write", "run"),
    ("git", "git diff HEAD --output=M", "write", "run"),
    ("git", "git archive --output=M HEAD", "write", "run"),
    ("git", "git ls-remote --upload-pack='touch M; git-upload-pack' .", "exec", "run"),
    ("git", "git grep --open-files-in-pager='touch M' victim", "exec", "run"),
    ("git", "git grep -O'touch M' victim", "exec", "run"),
    ("git", "git zz", "exec", "run-alias"),
    ("git", "git config alias.zz '!touch M'", "config", "config"),
    ("git", "git config --add alias.zz '!touch M'", "config", "config"),
    ("ssh", "ssh -o ProxyCommand='touch M' -o BatchMode=yes x true", "config", "run"),
    ("ssh", "ssh -oProxyCommand='touch M' -o BatchMode=yes x true", "config", "run"),
    ("ssh", "ssh -F ssh.cfg -o BatchMode=yes x true", "config", "run"),
    ("curl", "curl -s -o M file://{IN}", "write", "run"),
    ("curl", "curl -s -oM file://{IN}", "write", "run"),
    ("curl", "curl -s --output M file://{IN}", "write", "run"),
    ("curl", "curl -s -K curl.cfg", "config", "run"),
    ("curl", "curl -s --config curl.cfg", "config", "run"),
    ("wget", "wget -q -o M --tries=1 http://127.0.0.1:{PORT}/", "write", "run"),
    ("npm", "npm run --silent mk", "exec", "run"),
    ("bash", "bash -c 'touch M'", "exec", "run"),
    ("sh", "sh -c 'touch M'", "exec", "run"),
    ("bash", "bash mk.sh", "exec", "run"),
    ("rsync", "rsync in M", "write", "run"),
    ("rsync", "rsync -e 'sh -c \"touch M\"' in x:y", "exec", "run"),
]

# a wrapper's own row: the wrapped program is what must be covered
WRAPPED = [
    "timeout 5 touch M",
    "timeout -s KILL 5 touch M",
    "nice -n 5 touch M",
    "nice -5 touch M",
    "nohup touch M",
    "stdbuf -oL touch M",
    "ionice -c 3 touch M",
    "chrt -o 0 touch M",
    "taskset 1 touch M",
    "env touch M",
    "env -i touch M",
    "command touch M",
    "time -p touch M",
    "setsid touch M",
]

HARMLESS = {
    "find": "find . -name '*.txt'", "sort": "sort -r in", "rg": "rg x in", "tar": "tar -tf a.tar", "sed": "sed -n 1p in", "awk": "awk '{print $1}' in",
    "less": "less in", "man": "man -w ls", "git": "git log --oneline", "env": "env", "ssh": "ssh -V", "curl": "curl -s file://{IN}", "python3": "python3 --version",
    "node": "node --version", "perl": "perl -v",
}


def _row_id(row: tuple[str, str, str, str]) -> str:
    return row[1][:60]


@pytest.fixture
def scratch(tmp_path: Path) -> Iterator[tuple[Path, dict[str, str]]]:
    (tmp_path / "in").write_text("hello victim\n")
    (tmp_path / "V").write_text("victim\n")
    (tmp_path / "big").write_text("".join(f"{i}\n" for i in range(200000, 0, -1)))
    (tmp_path / "mk").write_text("#!/bin/sh\ntouch M\ncat\n")
    (tmp_path / "mk").chmod(0o755)
    (tmp_path / "mk.py").write_text("open('M', 'w')\n")
    (tmp_path / "mkmod.py").write_text("open('M', 'w')\n")
    (tmp_path / "mk.js").write_text("require('fs').writeFileSync('M', '')\n")
    (tmp_path / "mk.sh").write_text("touch M\n")
    (tmp_path / "script.sed").write_text("1e touch M\n")
    (tmp_path / "prog.awk").write_text('BEGIN { system("touch M") }\n')
    (tmp_path / "Makefile").write_text("all:\n\ttouch M\n")
    (tmp_path / "ssh.cfg").write_text("Host x\n  ProxyCommand touch M\n")
    (tmp_path / "curl.cfg").write_text(f'output = "M"\nurl = "file://{tmp_path}/in"\n')
    (tmp_path / "package.json").write_text('{"name": "p", "version": "1.0.0", "scripts": {"mk": "touch M"}}\n')
    env = {"PATH": os.environ["PATH"], "HOME": str(tmp_path), "GIT_CONFIG_GLOBAL": os.devnull, "GIT_CONFIG_NOSYSTEM": "1", "LANG": "C", "TERM": "dumb", "npm_config_update_notifier": "false"}
    staging = tmp_path / "stage"
    staging.mkdir()
    (staging / "M").write_text("")
    subprocess.run(["tar", "-cf", str(tmp_path / "a.tar"), "in"], cwd=tmp_path, check=True)
    subprocess.run(["tar", "-cf", str(tmp_path / "m.tar"), "M"], cwd=staging, check=True)
    shutil.rmtree(staging)
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run(["git", "init", "-q"], cwd=tmp_path, env=env, check=True)
    subprocess.run([*git, "add", "in", "V"], cwd=tmp_path, env=env, check=True)
    subprocess.run([*git, "commit", "-qm", "x"], cwd=tmp_path, env=env, check=True)
    (tmp_path / "V").write_text("victim\nmore\n")
    with socket.socket() as sock:  # a port nothing listens on: wget fails, its log is written
        sock.bind(("127.0.0.1", 0))
        env["PORT"] = str(sock.getsockname()[1])
        yield tmp_path, env


def _command(template: str, root: Path, env: dict[str, str]) -> str:
    return template.replace("{IN}", str(root / "in")).replace("{PORT}", env["PORT"])


def _in_pty(command: str, cwd: Path, env: dict[str, str]) -> None:
    """Run on a terminal (``script``), with ``q`` typed (less and man only page on one)."""
    subprocess.run(["script", "-qc", command, "/dev/null"], cwd=cwd, env={**env, "TERM": "xterm"}, input="qqq", text=True, capture_output=True, timeout=120)


def _side_effect(root: Path) -> bool:
    return (root / "M").exists() or not (root / "V").exists() or "changed" in (root / "V").read_text()


def _run(program: str, template: str, how: str, root: Path, env: dict[str, str]) -> None:
    command = _command(template, root, env)
    if how == "pty":
        _in_pty(command, root, env)
        return
    if how == "run-alias":
        subprocess.run(["git", "config", "alias.zz", "!touch M"], cwd=root, env=env, check=True)
    stdin = "y\n" if how == "yes" else ""
    subprocess.run(["bash", "-c", command], cwd=root, env=env, input=stdin, text=True, capture_output=True, timeout=120)
    if how == "config":
        subprocess.run(["git", "zz"], cwd=root, env=env, capture_output=True, timeout=60)


@pytest.mark.parametrize("row", ROWS, ids=_row_id)
def test_the_real_program_does_it_and_ketch_says_so(row: tuple[str, str, str, str], scratch: tuple[Path, dict[str, str]]) -> None:
    program, template, kind, how = row
    root, env = scratch
    if shutil.which(program, path=env["PATH"]) is None:
        pytest.skip(f"{program} is not installed (.ci/run installs it)")
    if how == "pty" and shutil.which("script") is None:
        pytest.skip("script (util-linux) is not installed: no terminal to page on")
    assert not _side_effect(root)
    _run(program, template, how, root, env)
    assert _side_effect(root), f"the real {program} did not do it: {template}"
    command = _command(template, root, env)
    parsed = parse_command(command)
    assert not parsed.error, parsed.error
    kinds = {e.kind for c in parsed.commands for e in effects(c.words)}
    assert kind in kinds, (command, kinds)
    rules = RuleSet(rules_from_config({"shell": {f"{program} *": "allow", "cat *": "allow", "echo *": "allow"}}), root=root)
    assert rules.decide("shell", {"command": command}, "command") is None, command
    if "touch M" in command or "./mk" in command or how == "run-alias" or template.split()[-1] in ("prog.awk", "script.sed", "ssh.cfg"):
        guard = compile_guard([], config_rules([{"kind": "command_prefix", "prefix": "touch", "reason": "no touching"}]))
        assert guard.check("shell", {"command": command}) is not None, command


@pytest.mark.parametrize("command", WRAPPED)
def test_a_wrapper_is_looked_through_and_the_wrapped_program_needs_its_own_allow(command: str, tmp_path: Path) -> None:
    program = command.split()[0]
    if shutil.which(program) is None and program not in ("command", "time"):
        pytest.skip(f"{program} is not installed")
    subprocess.run(["bash", "-c", command], cwd=tmp_path, capture_output=True, timeout=60)
    assert (tmp_path / "M").exists(), command
    found, error = invocations_of(command)
    assert not error and "touch M" in [i.text() for i in found], [i.text() for i in found]
    rules = RuleSet(rules_from_config({"shell": {f"{program} *": "allow"}}), root=tmp_path)
    assert rules.decide("shell", {"command": command}, "command") is None
    both = RuleSet(rules_from_config({"shell": {f"{program} *": "allow", "touch *": "allow"}}), root=tmp_path)
    assert both.decide("shell", {"command": command}, "command")[0] == "allow"


@pytest.mark.parametrize("program", sorted(HARMLESS))
def test_a_read_only_form_stays_covered(program: str, tmp_path: Path) -> None:
    command = HARMLESS[program].replace("{IN}", str(tmp_path / "in"))
    rules = RuleSet(rules_from_config({"shell": {f"{program} *": "allow"}}), root=tmp_path)
    assert rules.decide("shell", {"command": command}, "command")[0] == "allow", (command, rules.shell_note(command))


@pytest.mark.parametrize(
    "command, pattern",
    [("make test -j2", "make test*"), ("npm test", "npm test*"), ("python3 -m pytest -q", "python3 -m pytest*"), ("git -C sub status", "git -C *|git status*"), ("sed -i s/a/b/ f", "sed -i *"), ("timeout 5 ls", "timeout *|ls*")],
)
def test_a_pattern_that_names_the_program_or_option_vouches_for_it(command: str, pattern: str) -> None:
    rules = RuleSet(rules_from_config({"shell": {p: "allow" for p in pattern.split("|")}}))
    assert rules.decide("shell", {"command": command}, "command")[0] == "allow"


def test_every_required_program_has_a_row() -> None:
    required = {"git", "find", "sort", "rg", "tar", "sed", "awk", "xargs", "less", "man", "python3", "node", "perl", "ruby", "env", "make", "ssh", "rsync", "curl", "npm", "bash", "sh"}
    assert required <= {r[0] for r in ROWS}
    assert {"timeout", "nice", "nohup", "stdbuf", "ionice", "chrt", "taskset"} <= {c.split()[0] for c in WRAPPED}

