"""Hostile commands of the option, parser and chain classes through the real binary.

A headless ``ketch`` (a separate process: ``python -m ketch`` itself for the read-only allow
table, a ketch process forked from the preloaded interpreter for the others) is pointed at the fake
provider, which issues every command of a table as a shell call in one turn. The
assertions are on the workspace: no marker file a command would leave, no victim file
changed. A control run of the same table with ``--yolo`` and no rule proves each command
really does it when let through, so an entry that is harmless by accident fails.

* under read-only allow rules for the programs (``find *``, ``sort *``, ``git log*`` ...),
  the forms of the program table that write or run (``test_program_options.ROWS``) and
  the wrappers around a program no rule allows;
* here-documents and other corners the grammar reads differently from bash;
* under a guard on ``touch`` (and ``--yolo``), the forms that run ``touch`` through an
  option's text, a git alias, git configuration from the command line or the
  environment;
* a deny rule after hundreds of chained commands.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
from fakeprovider import FakeProvider, ToolCall, Turn, tool_results
from kettle import adhoc, run_ketch
from test_program_options import ROWS, WRAPPED

WIRE = "openai-chat"
_NEEDS = ("./mk", "mk.py", "mkmod", "mk.js", "mk.sh", "prog.awk", "script.sed", "ssh.cfg", "curl.cfg", "{PORT}", "big")

# the table's forms that the workspace below can run as they are
TABLE = [
    (program, template)
    for program, template, _kind, how in ROWS
    if how == "run" and not any(n in template for n in (*_NEEDS, "m.tar")) and program not in ("make", "npm") and shutil.which(program) is not None
]

# what the grammar once read otherwise than bash: each hides a `touch` an allow for
# cat/ls/echo would have covered
CORNERS = [
    "cat <<E;\nE\ntouch {M}\nE;",
    "cat <<E|cat\nE\ntouch {M}\nE|cat",
    "cat <<E&&ls\nE\ntouch {M}\nE&&ls",
    "cat <<'E';\nE\ntouch {M}\nE';",
    "cat <<E>x\nE\ntouch {M}\nE>x",
]

# run `touch {M}` through text ketch does not parse or configuration; a guard on touch must refuse
THROUGH = [
    "tar --to-command='touch {M}' -xf a.tar",
    "tar --checkpoint=1 --checkpoint-action=exec='touch {M}' -cf x.tar in",
    "sed -n '1e touch {M}' in",
    "sed 's/.*/touch {M}/e' in",
    "awk 'BEGIN{{system(\"touch {M}\")}}'",
    "awk 'BEGIN{{print 1 | \"touch {M}\"}}'",
    "git -c alias.zz='!touch {M}' zz",
    "git -c core.fsmonitor='touch {M}' status",
    "git --config-env=core.fsmonitor=HOOK status",
    "GIT_CONFIG_COUNT=1 GIT_CONFIG_KEY_0=alias.zz GIT_CONFIG_VALUE_0='!touch {M}' git zz",
    "GIT_CONFIG_PARAMETERS=\"'alias.zz=!touch {M}'\" git zz",
    "export GIT_CONFIG_COUNT=1 GIT_CONFIG_KEY_0=core.fsmonitor GIT_CONFIG_VALUE_0='touch {M}'; git status",
    "env GIT_CONFIG_COUNT=1 GIT_CONFIG_KEY_0=alias.zz GIT_CONFIG_VALUE_0='!touch {M}' git zz",
    "git ls-remote --upload-pack='touch {M}; git-upload-pack' .",
    "git grep --open-files-in-pager='touch {M}' victim",
    "git touchit {M}",
    "env -S 'touch {M}'",
    "ssh -o ProxyCommand='touch {M}' -o BatchMode=yes x true",
    "timeout 5 touch {M}",
    "nice -n 5 touch {M}",
    "find . -maxdepth 0 -exec touch {M} ';'",
    "echo {M} | xargs touch",
    "python3 -c 'import os; os.system(\"touch {M}\")'",
    "node -e 'require(\"child_process\").execSync(\"touch {M}\")'",
    "perl -e 'system(\"touch {M}\")'",
]

READ_ONLY = sorted({f"{program} *" for program, _ in TABLE} | {"cat *", "ls*", "echo *", "true*"} | {f"{c.split()[0]} *" for c in WRAPPED})


def _mark(template: str, i: int) -> str:
    marker, victim = f"mark-{i:03d}", f"victim-{i:03d}"
    text = re.sub(r"(?<![A-Za-z])M(?![A-Za-z])|(?<=-o)M|(?<=-ro)M|(?<=-O)M", marker, template.replace("{M}", marker))
    return re.sub(r"(?<![A-Za-z.-])V(?![A-Za-z])", victim, text)


def _git(cwd: Path, *args: str) -> None:
    env = {**os.environ, "GIT_CONFIG_GLOBAL": os.devnull, "GIT_CONFIG_NOSYSTEM": "1"}
    subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", *args], cwd=cwd, env=env, check=True, capture_output=True)


def _workspace(tmp_path: Path, count: int) -> Path:
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "in").write_text("hello victim\n")
    for i in range(count):
        (ws / f"victim-{i:03d}").write_text("victim\n")
    staging = tmp_path / "stage"
    staging.mkdir()
    (staging / "in").write_text("x\n")
    subprocess.run(["tar", "-cf", str(ws / "a.tar"), "in"], cwd=staging, check=True)
    _git(ws, "init", "-q")
    _git(ws, "add", "in")
    _git(ws, "commit", "-qm", "x")
    # a git-NAME program on PATH would be an external git command; an alias in the
    # repository's config is another way to the same name
    _git(ws, "config", "alias.touchit", "!touch")
    return ws


def _marks(ws: Path) -> list[str]:
    return sorted(p.name for p in ws.iterdir() if p.name.startswith("mark-"))


def _config(text: str) -> None:
    path = Path(os.environ["KETCH_CONFIG_DIR"]) / "config.toml"
    path.write_text("titles = false\n" + text, encoding="utf-8")


def _run(ws: Path, commands: list[str], *flags: str, env: dict[str, str] | None = None,
         forked_from: Any = None) -> tuple[list[str], list[dict[str, Any]]]:
    """The table as one turn of a headless ketch process: ``python -m ketch`` itself, or (with
    ``forked_from``, the ``preloaded_ketch`` fixture) one forked from the preloaded interpreter."""
    calls = [ToolCall("shell", {"command": c}) for c in commands]
    base = {"KETCH_CONFIG_DIR": os.environ["KETCH_CONFIG_DIR"], "KETCH_DATA_DIR": os.environ["KETCH_DATA_DIR"], "HOME": os.environ["HOME"], "HOOK": "touch mark-hook"}
    with FakeProvider([Turn(tool_calls=calls), Turn(text="done")]) as fake:
        run = run_ketch(["-p", "go", "--output-format", "stream-json", *flags, *adhoc(fake, WIRE)], ws, env={**base, **(env or {})}, subprocess_=True,
                       timeout=600, forked_from=forked_from)
    assert run.code == 0, run.stderr[-3000:]
    results = [content for _, content in tool_results(fake.model_requests[1])]
    assert len(results) == len(commands)
    resolved = [e for e in map(json.loads, filter(str.strip, run.stdout.splitlines())) if e["type"] == "approval_resolved"]
    return results, resolved


def _allow_table(ws: Path | None = None) -> list[str]:
    commands = [_mark(t, i) for i, (_, t) in enumerate(TABLE)]
    commands += [_mark(t, len(TABLE) + k) for k, t in enumerate(CORNERS)]
    commands += [_mark(t, len(TABLE) + len(CORNERS) + k) for k, t in enumerate(WRAPPED)]
    return [c.replace("{IN}", str((ws or Path("/ws")) / "in")) for c in commands]


def _effects_seen(ws: Path, count: int) -> list[int]:
    return [
        i
        for i in range(count)
        if (ws / f"mark-{i:03d}").exists() or not (ws / f"victim-{i:03d}").exists() or (ws / f"victim-{i:03d}").read_text() != "victim\n"
    ]


def test_the_tables_are_as_large_as_promised() -> None:
    assert len(TABLE) >= 50 and len(THROUGH) >= 20 and len(CORNERS) >= 5 and len(CHAINS) >= 40
    assert len(set(_allow_table())) == len(_allow_table())


def test_headless_read_only_allow_rules_let_no_writing_or_running_form_through(tmp_path: Path) -> None:
    ws = _workspace(tmp_path, len(_allow_table()))
    commands = _allow_table(ws)
    _config("[permissions]\nshell = { " + ", ".join(f'"{p}" = "allow"' for p in READ_ONLY) + " }\n")
    results, resolved = _run(ws, commands)
    assert _effects_seen(ws, len(commands)) == []
    assert [r["decision"] for r in resolved] == ["deny"] * len(commands), [(c, r["decision"]) for c, r in zip(commands, resolved) if r["decision"] != "deny"]
    by_command = dict(zip(commands, results))
    assert "sort -o" in by_command[_mark("sort -o M in", next(i for i, (_, t) in enumerate(TABLE) if t == "sort -o M in"))]


def test_control_the_allow_table_really_writes_or_runs_when_let_through(tmp_path: Path, preloaded_ketch: Any) -> None:
    ws = _workspace(tmp_path, len(_allow_table()))
    commands = _allow_table(ws)
    _run(ws, commands, "--yolo", forked_from=preloaded_ketch)
    assert _effects_seen(ws, len(commands)) == list(range(len(commands))), [commands[i] for i in set(range(len(commands))) - set(_effects_seen(ws, len(commands)))]


def test_headless_the_read_only_forms_still_run_under_the_rules(tmp_path: Path, preloaded_ketch: Any) -> None:
    ws = _workspace(tmp_path, 0)
    _config("[permissions]\nshell = { " + ", ".join(f'"{p}" = "allow"' for p in READ_ONLY) + " }\n")
    harmless = ["find . -name in", "sort -r in", "sed -n 1p in", "awk '{print $1}' in", "git log --oneline", "tar -tf a.tar", "timeout 5 ls", "env", "cat <<'E'\nE\n", "nice -n 5 cat in"]
    results, resolved = _run(ws, harmless, forked_from=preloaded_ketch)
    assert [(r["decision"], r["by"]) for r in resolved] == [("allow", "rule")] * len(harmless), list(zip(harmless, resolved))
    assert "hello victim" in results[harmless.index("sed -n 1p in")]


def _guard_commands() -> list[str]:
    return [_mark(t, i) for i, t in enumerate(THROUGH)]


def test_headless_a_guard_on_touch_refuses_every_way_around_it_even_with_yolo(tmp_path: Path, preloaded_ketch: Any) -> None:
    commands = _guard_commands()
    ws = _workspace(tmp_path, 0)
    _config('guards = [{kind = "command_prefix", prefix = "touch", reason = "no touching"}]\n')
    results, resolved = _run(ws, commands, "--yolo", forked_from=preloaded_ketch)
    assert _marks(ws) == []
    assert [(r["decision"], r["by"]) for r in resolved] == [("deny", "guard")] * len(commands), [c for c, r in zip(commands, resolved) if r["by"] != "guard"]
    assert all("no touching" in r for r in results)


def test_control_the_guard_table_really_touches_without_the_guard(tmp_path: Path, preloaded_ketch: Any) -> None:
    commands = _guard_commands()
    ws = _workspace(tmp_path, 0)
    _run(ws, commands, "--yolo", forked_from=preloaded_ketch)
    hook = THROUGH.index("git --config-env=core.fsmonitor=HOOK status")  # its marker is named by $HOOK
    made = set(_marks(ws)) - {"mark-hook"} | ({f"mark-{hook:03d}"} if (ws / "mark-hook").exists() else set())
    assert sorted(made) == [f"mark-{i:03d}" for i in range(len(commands))], sorted(set(f"mark-{i:03d}" for i in range(len(commands))) - made)


CHAINS = [(n, sep, spelling) for n in (50, 300, 1000) for sep in (" && ", "; ", " || ", " | ", "\n") for spelling in ("touch", "t\\ouch", "to''uch")]


@pytest.mark.parametrize("n, sep, spelling", CHAINS)
def test_a_deny_rule_holds_after_hundreds_of_chained_commands(n: int, sep: str, spelling: str, tmp_path: Path) -> None:
    from ketch.gate.rules import RuleSet, rules_from_config

    command = sep.join(["true"] * n) + sep + f"{spelling} mark"
    rules = RuleSet(rules_from_config({"shell": {"touch*": "deny", "true*": "allow"}}), root=tmp_path)
    decided = rules.decide("shell", {"command": command}, "command")
    assert decided is not None and decided[0] == "deny", (n, sep, spelling)


def test_headless_a_deny_rule_holds_after_hundreds_of_chained_commands(tmp_path: Path, preloaded_ketch: Any) -> None:
    ws = _workspace(tmp_path, 0)
    _config('[permissions]\nshell = { "touch*" = "deny", "true*" = "allow", "ls*" = "allow" }\n')
    commands = [sep.join(["true"] * n) + sep + f"{spelling} mark-{k:03d}" for k, (n, sep, spelling) in enumerate(CHAINS)]
    _, resolved = _run(ws, commands, forked_from=preloaded_ketch)
    assert _marks(ws) == []
    assert [(r["decision"], r["by"]) for r in resolved] == [("deny", "rule")] * len(commands)
