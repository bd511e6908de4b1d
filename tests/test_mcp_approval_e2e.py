"""A repository's MCP servers start only when each was approved for its exact launch: the real
``ketch`` (``-p`` against the fake provider, ``mcp list``/``approve``/``deny``) in a trusted
folder, each server a program that leaves a marker file the moment it is spawned.

Trusting the folder (``ketch trust add`` or ``--trust``) starts none of them; ``ketch mcp
approve NAME`` shows the program, every argument and env entry, and stores the answer for
exactly that; a change to the program, an argument, an env entry, the working directory or
the network setting is not covered; a declined or unanswered server is never spawned.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from fakeprovider import FakeProvider, Turn
from kettle import adhoc, run_ketch, write_project_config

WIRE = "openai-chat"
PY = json.dumps(sys.executable)


def _server(name: str, marker: Path, *, env: str = "", extra: str = "") -> str:
    """A server entry whose process writes ``marker`` as soon as it runs."""
    code = f'open({json.dumps(str(marker))}, "w").write("spawned")'
    return f"\n[mcp.servers.{name}]\ncommand = {PY}\nargs = ['-c', {json.dumps(code)}]\n{env}{extra}"


def _config(ws: Path, **servers: str) -> None:
    """Write the project config and trust the folder for it (not its servers)."""
    write_project_config(ws, "".join(servers.values()), trust=True, approve_mcp=False)


def _run(ws: Path, *flags: str, subprocess_: bool = False) -> tuple[object, list[dict]]:
    with FakeProvider([Turn(text="done")]) as fake:
        run = run_ketch(["-p", "hi", "--output-format", "stream-json", *flags, *adhoc(fake, WIRE)], ws, subprocess_=subprocess_)
    assert run.code == 0, run.stderr
    return run, [json.loads(line) for line in run.stdout.splitlines() if line.strip()]


def _held(events: list[dict], name: str) -> str:
    texts = [e.get("text", "") for e in events if f"MCP server '{name}' not started" in e.get("text", "")]
    assert texts, events
    return texts[0]


def _approve(ws: Path, name: str, answer: str = "y\n") -> object:
    return run_ketch(["mcp", "approve", name], ws, input=answer)


@pytest.mark.parametrize("how", ["trust-add", "trust-flag"])
def test_trusting_the_folder_spawns_none_of_its_servers(tmp_path: Path, how: str) -> None:
    a, b = tmp_path / "a-spawned", tmp_path / "b-spawned"
    if how == "trust-add":
        _config(tmp_path, a=_server("alpha", a), b=_server("beta", b))
        run, events = _run(tmp_path)
    else:
        write_project_config(tmp_path, _server("alpha", a) + _server("beta", b), trust=False)
        run, events = _run(tmp_path, "--trust", subprocess_=True)
    assert not a.exists() and not b.exists()
    text = _held(events, "alpha")
    assert "ketch mcp approve alpha" in text and str(a) in text  # the exact argv is named
    _held(events, "beta")


def test_each_server_is_approved_by_itself_with_its_exact_command_shown(tmp_path: Path) -> None:
    a, b = tmp_path / "a-spawned", tmp_path / "b-spawned"
    _config(tmp_path, a=_server("alpha", a, env='env = { MODE = "fast", API_TOKEN = "tok-123456" }\n'), b=_server("beta", b))
    shown = _approve(tmp_path, "alpha")
    assert shown.code == 0, shown.stderr
    assert f"runs {sys.executable} -c" in shown.stdout and str(a) in shown.stdout
    assert "MODE=fast" in shown.stdout and "API_TOKEN=<hidden>" in shown.stdout and "tok-123456" not in shown.stdout
    assert not a.exists()  # approving runs nothing
    _run(tmp_path)
    assert a.read_text() == "spawned"
    assert not b.exists()  # beta's answer is its own


@pytest.mark.parametrize(
    "change",
    ["argument", "program", "env-value", "env-added", "cwd", "network", "ld-preload"],
)
def test_any_change_to_the_launch_is_not_covered_by_the_old_approval(tmp_path: Path, change: str) -> None:
    first, second = tmp_path / "first", tmp_path / "second"
    _config(tmp_path, a=_server("alpha", first, env='env = { MODE = "fast" }\n'))
    assert _approve(tmp_path, "alpha").code == 0
    (tmp_path / "sub").mkdir()
    changed = {
        "argument": _server("alpha", second, env='env = { MODE = "fast" }\n'),
        "program": _server("alpha", first, env='env = { MODE = "fast" }\n').replace(f"command = {PY}", f"command = {json.dumps(sys.executable + '-other')}"),
        "env-value": _server("alpha", first, env='env = { MODE = "slow" }\n'),
        "env-added": _server("alpha", first, env='env = { MODE = "fast", PYTHONSTARTUP = "x.py" }\n'),
        "cwd": _server("alpha", first, env='env = { MODE = "fast" }\n', extra=f"cwd = {json.dumps(str(tmp_path / 'sub'))}\n"),
        "network": _server("alpha", first, env='env = { MODE = "fast" }\nnetwork = true\n'),
        "ld-preload": _server("alpha", first, env='env = { MODE = "fast", LD_PRELOAD = "/tmp/evil.so" }\n'),
    }[change]
    _config(tmp_path, a=changed)  # the user trusts the folder's new config: still not the server's
    _, events = _run(tmp_path)
    assert not first.exists() and not second.exists()
    assert "changed since you approved it" in _held(events, "alpha")
    listed = run_ketch(["mcp", "list"], tmp_path, subprocess_=True)
    assert "held" in listed.stdout and not first.exists() and not second.exists()
    # approving again, with the new launch shown, covers the new launch
    again = _approve(tmp_path, "alpha")
    assert again.code == 0
    if change == "ld-preload":
        assert "LD_PRELOAD=/tmp/evil.so" in again.stdout
    if change == "program":
        return  # that program does not exist: approved or not, nothing to spawn
    _run(tmp_path)
    assert first.exists() or second.exists()


def test_a_change_to_the_start_timeout_alone_needs_no_new_answer(tmp_path: Path) -> None:
    marker = tmp_path / "spawned"
    _config(tmp_path, a=_server("alpha", marker))
    assert _approve(tmp_path, "alpha").code == 0
    _config(tmp_path, a=_server("alpha", marker, extra="timeout = 3\n"))
    _run(tmp_path)
    assert marker.exists()


@pytest.mark.parametrize("answer", ["n\n", "\n", "yes please\n", "", "deny"])
def test_a_declined_or_unanswered_server_is_never_spawned(tmp_path: Path, answer: str) -> None:
    marker = tmp_path / "spawned"
    _config(tmp_path, a=_server("alpha", marker))
    if answer == "deny":
        result = run_ketch(["mcp", "deny", "alpha"], tmp_path)
        assert result.code == 0
    else:
        result = _approve(tmp_path, "alpha", answer)
        assert result.code == 1
    _, events = _run(tmp_path)
    run_ketch(["mcp", "list"], tmp_path, subprocess_=True)
    assert not marker.exists()
    text = _held(events, "alpha")
    assert ("you declined it" in text) if answer not in ("",) else ("was not approved" in text)


def test_a_repository_server_named_like_the_users_own_is_asked_about(tmp_path: Path, isolated_home: Path) -> None:
    """The project's entry merges over the user's server of the same name: what would run is
    no longer what the user configured, so it needs an answer; the user's own servers do not."""
    mine, theirs, other = tmp_path / "mine", tmp_path / "theirs", tmp_path / "other"
    (isolated_home / "config").mkdir(parents=True, exist_ok=True)
    (isolated_home / "config" / "config.toml").write_text(_server("tools", mine) + _server("own", other))
    code = f'open({json.dumps(str(theirs))}, "w").write("spawned")'
    _config(tmp_path, a=f"\n[mcp.servers.tools]\nargs = ['-c', {json.dumps(code)}]\n")
    _, events = _run(tmp_path)
    assert not theirs.exists() and not mine.exists()
    assert other.exists()  # the user's own server starts without a question
    _held(events, "tools")
    assert run_ketch(["mcp", "approve", "own"], tmp_path, input="y\n").code == 2  # not the folder's to approve


def test_an_approval_belongs_to_its_folder(tmp_path: Path) -> None:
    one, two = tmp_path / "one", tmp_path / "two"
    one.mkdir(), two.mkdir()
    marker = tmp_path / "spawned"
    for ws in (one, two):
        _config(ws, a=_server("alpha", marker))
    assert _approve(one, "alpha").code == 0
    _, events = _run(two)
    assert not marker.exists()
    _held(events, "alpha")


def test_a_control_character_in_an_argument_is_shown_escaped(tmp_path: Path) -> None:
    marker = tmp_path / "spawned"
    _config(tmp_path, a=_server("alpha", marker).replace('"]\n', '", "x\\u001b[2K"]\n', 1))
    shown = _approve(tmp_path, "alpha", "n\n")
    assert "\x1b" not in shown.stdout and "\\x1b[2K" in shown.stdout
    _run(tmp_path)
    assert not marker.exists()


def test_the_interactive_question_names_each_server_and_its_answer_binds(tmp_path: Path) -> None:
    """What the terminal UI asks after the folder: one question per server with its launch;
    answering no for one leaves it unspawned in the next run, yes for the other starts it."""
    from types import SimpleNamespace

    from ketch.frontends.interactive import _trust_question

    a, b = tmp_path / "a-spawned", tmp_path / "b-spawned"
    _config(tmp_path, a=_server("alpha", a), b=_server("beta", b))
    args = SimpleNamespace(trust=False)
    first = _trust_question(args, tmp_path)
    assert first is not None and "alpha" in first.heading and any(str(a) in text for text, _ in first.items)
    first.answer(False)
    second = _trust_question(args, tmp_path)
    assert second is not None and "beta" in second.heading and any(str(b) in text for text, _ in second.items)
    second.answer(True)
    assert _trust_question(args, tmp_path) is None
    _run(tmp_path)
    assert b.exists() and not a.exists()


def test_an_unreadable_approvals_file_approves_nothing(tmp_path: Path, isolated_home: Path) -> None:
    marker = tmp_path / "spawned"
    _config(tmp_path, a=_server("alpha", marker))
    assert _approve(tmp_path, "alpha").code == 0
    path = isolated_home / "data" / "mcp_approvals.json"
    assert path.exists()
    data = json.loads(path.read_text())
    (entry,) = data["folders"][str(tmp_path.resolve())].values()
    entry["approved"] = "true"  # a wrong-typed answer is no answer
    path.write_text(json.dumps(data))
    _, events = _run(tmp_path)
    assert not marker.exists()
    _held(events, "alpha")
    path.write_text("{not json")
    _run(tmp_path)
    assert not marker.exists()
