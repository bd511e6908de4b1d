"""No git ketch starts runs a program a hostile repository (or a nested one, or ``GIT_*`` in the
environment) names: a real ketch process, a turn that uses every git tool, writes files (the
checkpoint store snapshots the workspace) and is rewound, with the instructions' git summary
made on every step. Every trap leaves a marker; each is first proven armed with plain git. The
nested-repository summary runs ``python -m ketch`` itself; the turn-and-rewind matrix runs
ketch processes forked from the preloaded interpreter (``ketch_processes.Preloaded``: its own
process, environment and cwd, only the imports done before), which spares that matrix an SDK
import per run."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from fakeprovider import FakeProvider, ToolCall, Turn
from gittraps import Traps, git
from ketch_processes import Preloaded
from kettle import adhoc, run_ketch

PROGRAM_KEYS = ("core.fsmonitor", "filter.t.clean", "filter.t.smudge", "filter.t.process", "diff.d.textconv",
                "diff.d.command", "diff.external", "core.pager", "pager.status", "pager.log", "pager.diff",
                "core.sshCommand", "credential.helper", "core.askPass", "gpg.program", "core.editor",
                "sequence.editor", "core.alternateRefsCommand")
HOOKS = ("pre-commit", "post-checkout", "post-index-change", "reference-transaction", "pre-auto-gc", "post-rewrite")


def _hostile_repo(root: Path, traps: Traps, tag: str) -> None:
    root.mkdir(parents=True, exist_ok=True)
    git(root, "init", "-q", "-b", "main")
    git(root, "config", "user.email", "t@example.com")
    git(root, "config", "user.name", "t")
    (root / "a.txt").write_text("alpha\nbravo\n")
    (root / "b.bin").write_text("binary-ish\n")
    (root / ".gitattributes").write_text("* filter=t diff=d\n")
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "first")
    hooks = root / ".git" / "trap-hooks"
    hooks.mkdir()
    for hook in HOOKS:
        (hooks / hook).symlink_to(traps.program(f"{tag}-hook-{hook}"))
    git(root, "config", "core.hooksPath", str(hooks))
    for key in PROGRAM_KEYS:
        git(root, "config", key, traps.program(f"{tag}-{key}"))
    git(root, "config", "filter.t.required", "true")
    git(root, "config", "alias.status", f"!{traps.program(tag + '-alias')}")
    git(root, "config", "log.showSignature", "true")
    (root / "a.txt").write_text("alpha\nbravo\ncharlie\n")


def _hostile_env(traps: Traps) -> dict[str, str]:
    """The ``GIT_*`` variables a hostile environment could carry into ketch."""
    return {
        "GIT_CONFIG_COUNT": "2", "GIT_CONFIG_KEY_0": "core.fsmonitor", "GIT_CONFIG_VALUE_0": traps.program("env-fsmonitor"),
        "GIT_CONFIG_KEY_1": "core.pager", "GIT_CONFIG_VALUE_1": traps.program("env-pager"),
        "GIT_CONFIG_PARAMETERS": f"'diff.external'='{traps.program('env-params-external')}'",
        "GIT_EXTERNAL_DIFF": traps.program("env-external-diff"), "GIT_PAGER": traps.program("env-git-pager"),
        "PAGER": traps.program("env-pager-var"), "GIT_SSH_COMMAND": traps.program("env-ssh"),
        "GIT_ASKPASS": traps.program("env-askpass"), "SSH_ASKPASS": traps.program("env-ssh-askpass"),
        "GIT_EDITOR": traps.program("env-editor"), "GIT_SEQUENCE_EDITOR": traps.program("env-seq-editor"),
    }


@pytest.fixture
def setup(tmp_path: Path, isolated_home: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, Traps]:
    monkeypatch.setenv("GIT_CONFIG_NOSYSTEM", "1")
    traps = Traps(tmp_path)
    ws = tmp_path / "ws"
    _hostile_repo(ws, traps, "outer")
    _hostile_repo(ws / "vendor" / "lib", traps, "nested")
    (isolated_home / "config" / "config.toml").write_text("titles = false\ncheckpoints = true\n")
    # armed: plain git in either repository, and plain git under the hostile environment, run the traps
    for root in (ws, ws / "vendor" / "lib"):
        git(root, "status", check=False)
        git(root, "-p", "log", "-1", "-p", check=False)
    git(ws, "-p", "diff", check=False, env=_hostile_env(traps))
    fired = traps.fired()
    for expected in ("outer-core.fsmonitor", "nested-core.fsmonitor", "outer-filter.t.process", "env-fsmonitor"):
        assert any(f.startswith(expected) for f in fired), (expected, fired)
    traps.clear()
    return ws, traps


def _git_turns(rel: str = "") -> list[Turn]:
    p = f"{rel}/" if rel else ""
    return [
        Turn(tool_calls=[
            ToolCall("git_status", {}, id="g1"), ToolCall("git_diff", {}, id="g2"),
            ToolCall("git_diff", {"staged": True}, id="g3"), ToolCall("git_diff", {"ref": "HEAD", "path": f"{p}a.txt"}, id="g4"),
            ToolCall("git_log", {}, id="g5"), ToolCall("git_show", {}, id="g6"),
            ToolCall("git_show", {"ref": "HEAD", "path": f"{p}a.txt"}, id="g7"), ToolCall("git_blame", {"path": f"{p}a.txt"}, id="g8"),
        ]),
        Turn(tool_calls=[
            ToolCall("write_file", {"path": f"{p}new.txt", "content": "new\n"}, id="w1"),
            ToolCall("edit_file", {"path": f"{p}a.txt", "old_string": "charlie", "new_string": "delta"}, id="w2"),
            ToolCall("write_file", {"path": "vendor/lib/added.txt" if not rel else "added.txt", "content": "x\n"}, id="w3"),
        ]),
        Turn(text="Done."),
    ]


@pytest.mark.parametrize("where", ["outer", "nested"])
@pytest.mark.parametrize("hostile_env", [False, True], ids=["clean-env", "hostile-env"])
def test_a_turn_and_its_rewind_run_no_program_the_repositories_name(
    setup, where: str, hostile_env: bool, preloaded_ketch: Preloaded
) -> None:
    ws, traps = setup
    cwd = ws if where == "outer" else ws / "vendor" / "lib"
    env = _hostile_env(traps) if hostile_env else {}
    with FakeProvider(_git_turns()) as fake:
        run = run_ketch(["-p", "look around", "--yolo", "--output-format", "json", *adhoc(fake, "openai-chat")],
                        cwd, env=env, subprocess_=True, forked_from=preloaded_ketch)
        assert run.code == 0, run.stderr
        results = [m for r in fake.model_requests for m in json.dumps(r.body).split("\\n") if "alpha" in m]
    assert results, "the git tools read nothing"
    assert (cwd / "new.txt").read_text() == "new\n"
    sid = json.loads(run.stdout)["session_id"]
    rewound = run_ketch(["rewind", sid, "--to", "1", "--code", "--yes", "--output-format", "json"], cwd, env=env,
                       subprocess_=True, forked_from=preloaded_ketch)
    assert rewound.code == 0, rewound.stderr
    assert not (cwd / "new.txt").exists(), "the rewind did not run"
    assert traps.fired() == []


def test_the_prompt_git_summary_in_a_nested_repository_runs_nothing(setup) -> None:
    ws, traps = setup
    with FakeProvider([Turn(text="hi")]) as fake:
        run = run_ketch(["-p", "hello", *adhoc(fake, "openai-chat")], ws / "vendor" / "lib", env=_hostile_env(traps), subprocess_=True)
        assert run.code == 0, run.stderr
        system = json.dumps(fake.model_requests[0].body)
    assert "main" in system  # the git summary was made (branch name in the instructions)
    assert traps.fired() == []
    assert os.listdir(traps.markers) == []
