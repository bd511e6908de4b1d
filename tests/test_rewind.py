"""Checkpoints and rewind through the real ``ketch`` against the fake provider: what a turn did
to the files (by the file tools and by the shell) is put back exactly, the user's own edits are
left alone unless confirmed, the user's git repository is untouched, and a conversation
rewind sends the model exactly the history before the chosen prompt."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
from pathlib import Path

import pytest

from fakeprovider import FakeProvider, ToolCall, Turn, user_texts
from ketch_processes import Preloaded
from kettle import adhoc, run_ketch

WIRES = ["openai-chat", "openai-responses", "anthropic-messages", "gemini"]


@pytest.fixture(autouse=True)
def checkpoints_on(isolated_home: Path) -> None:
    (isolated_home / "config" / "config.toml").write_text("titles = false\ncheckpoints = true\n")


def git(repo: Path, *args: str) -> str:
    env = {**os.environ, "GIT_CONFIG_GLOBAL": os.devnull, "GIT_CONFIG_NOSYSTEM": "1"}
    return subprocess.run(["git", "--no-optional-locks", *args], cwd=repo, env=env, capture_output=True, text=True, check=True).stdout


def make_repo(root: Path) -> None:
    git(root, "init", "-q")
    git(root, "config", "user.email", "t@example.com")
    git(root, "config", "user.name", "t")
    (root / "edited.py").write_text("value = 1\n")
    (root / "doomed.txt").write_text("keep me\n")
    (root / ".gitignore").write_text("*.log\n")
    (root / "build.log").write_text("old log\n")
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "start")


def repo_state(root: Path) -> dict[str, str]:
    """What the user's git knows: status, the index's entries, every ref, the HEAD file."""
    return {
        "status": git(root, "status", "--porcelain", "--ignored"),
        "index": git(root, "ls-files", "--stage", "--debug"),
        "refs": git(root, "for-each-ref"),
        "stash": git(root, "stash", "list"),
        "objects": git(root, "count-objects", "-v"),
    }


def the_turn() -> list[Turn]:
    return [
        Turn(tool_calls=[ToolCall("edit_file", {"path": "edited.py", "old_string": "value = 1", "new_string": "value = 2"}, id="c1")]),
        Turn(tool_calls=[ToolCall("shell", {"command": "echo fresh > created.txt && rm doomed.txt && echo new >> build.log"}, id="c2")]),
        Turn(text="Done."),
    ]


def assert_strict_history(request: object) -> None:
    """The rules a real provider applies to a history: roles alternate (Anthropic), every tool
    call is answered by the next message(s) and no result answers nothing (all wires)."""
    from fakeprovider import ANTHROPIC, CHAT, _messages, wire_of

    messages = list(_messages(request))
    wire = wire_of(request)
    if wire == ANTHROPIC:
        roles = [m["role"] for m in messages]
        assert all(a != b for a, b in zip(roles, roles[1:])), roles
        for m, nxt in zip(messages, messages[1:] + [None]):
            uses = [b["id"] for b in m.get("content", []) if isinstance(b, dict) and b.get("type") == "tool_use"]
            if uses:
                results = [b["tool_use_id"] for b in (nxt or {}).get("content", []) if isinstance(b, dict) and b.get("type") == "tool_result"]
                assert results == uses
    elif wire == CHAT:
        open_calls: list[str] = []
        for m in messages:
            if m.get("role") == "tool":
                assert m["tool_call_id"] in open_calls
                open_calls.remove(m["tool_call_id"])
                continue
            assert not open_calls, f"unanswered calls {open_calls}"
            open_calls = [c["id"] for c in m.get("tool_calls") or []]
        assert not open_calls


def session_id(stdout: str) -> str:
    return json.loads(stdout)["session_id"]


def test_code_rewind_puts_back_what_the_turn_did_and_leaves_the_repository_alone(tmp_path: Path) -> None:
    make_repo(tmp_path)
    before = repo_state(tmp_path)
    with FakeProvider(the_turn()) as fake:
        run = run_ketch(["-p", "change things", "--yolo", "--output-format", "json", *adhoc(fake, "openai-chat")], tmp_path)
    assert run.code == 0, run.stderr
    sid = session_id(run.stdout)
    assert (tmp_path / "edited.py").read_text() == "value = 2\n"
    assert (tmp_path / "created.txt").exists() and not (tmp_path / "doomed.txt").exists()

    listing = run_ketch(["rewind", sid, "--output-format", "json"], tmp_path)
    assert listing.code == 0, listing.stderr
    [prompt] = json.loads(listing.stdout)["prompts"]
    assert prompt["prompt"] == "change things"
    assert set(prompt["files"]) == {"edited.py", "created.txt", "doomed.txt"}  # build.log is ignored
    assert prompt["files"]["edited.py"] == {"added": 1, "removed": 1}

    undo = run_ketch(["rewind", sid, "--to", "1", "--code", "--yes", "--output-format", "json"], tmp_path)
    assert undo.code == 0, undo.stderr
    report = json.loads(undo.stdout)
    assert sorted(report["restored"]) == ["doomed.txt", "edited.py"]
    assert report["deleted"] == ["created.txt"]
    assert report["left"] == [] and report["conversation"] is None
    assert (tmp_path / "edited.py").read_text() == "value = 1\n"
    assert (tmp_path / "doomed.txt").read_text() == "keep me\n"
    assert not (tmp_path / "created.txt").exists()
    assert (tmp_path / "build.log").read_text() == "old log\nnew\n"  # ignored: not ketch's to put back
    assert repo_state(tmp_path) == before


def test_a_file_the_user_changed_after_the_turn_is_left_alone_unless_confirmed(tmp_path: Path) -> None:
    make_repo(tmp_path)
    with FakeProvider(the_turn()) as fake:
        run = run_ketch(["-p", "change things", "--yolo", "--output-format", "json", *adhoc(fake, "openai-chat")], tmp_path)
    sid = session_id(run.stdout)
    (tmp_path / "edited.py").write_text("value = 'mine'\n")  # the user's own edit

    first = run_ketch(["rewind", sid, "--to", "1", "--code", "--yes", "--output-format", "json"], tmp_path)
    report = json.loads(first.stdout)
    assert report["left"] == ["edited.py"]
    assert (tmp_path / "edited.py").read_text() == "value = 'mine'\n"
    assert (tmp_path / "doomed.txt").exists() and not (tmp_path / "created.txt").exists()

    text = run_ketch(["rewind", sid, "--to", "1", "--code", "--yes"], tmp_path)
    assert "edited.py" in text.stdout and "left alone" in text.stdout

    forced = run_ketch(["rewind", sid, "--to", "1", "--code", "--yes", "--include-changed", "--output-format", "json"], tmp_path)
    assert json.loads(forced.stdout)["restored"] == ["edited.py"]
    assert (tmp_path / "edited.py").read_text() == "value = 1\n"


def test_a_rewind_can_itself_be_undone(tmp_path: Path) -> None:
    make_repo(tmp_path)
    with FakeProvider(the_turn()) as fake:
        run = run_ketch(["-p", "change things", "--yolo", "--output-format", "json", *adhoc(fake, "openai-chat")], tmp_path)
    sid = session_id(run.stdout)
    run_ketch(["rewind", sid, "--to", "1", "--code", "--yes"], tmp_path)
    assert (tmp_path / "edited.py").read_text() == "value = 1\n"
    redo = run_ketch(["rewind", sid, "--undo", "--yes", "--output-format", "json"], tmp_path)
    assert redo.code == 0, redo.stderr
    assert (tmp_path / "edited.py").read_text() == "value = 2\n"
    assert (tmp_path / "created.txt").exists() and not (tmp_path / "doomed.txt").exists()


def test_rewind_without_yes_and_without_a_terminal_refuses_and_changes_nothing(
    tmp_path: Path, preloaded_ketch: Preloaded
) -> None:
    """Real ketch processes whose stdin is /dev/null (forked from the preloaded interpreter)."""
    make_repo(tmp_path)
    with FakeProvider(the_turn()) as fake:
        run = run_ketch(["-p", "change things", "--yolo", "--output-format", "json", *adhoc(fake, "openai-chat")], tmp_path)
    sid = session_id(run.stdout)
    refused = run_ketch(["rewind", sid, "--to", "1"], tmp_path, subprocess_=True, forked_from=preloaded_ketch)
    assert refused.code == 2 and "--yes" in refused.stderr and "Traceback" not in refused.stderr
    assert (tmp_path / "edited.py").read_text() == "value = 2\n"
    bad = run_ketch(["rewind", sid, "--to", "7", "--yes"], tmp_path, subprocess_=True, forked_from=preloaded_ketch)
    assert bad.code == 2 and "prompt 7" in bad.stderr


def test_a_hostile_gitattributes_filter_does_not_run_and_bytes_round_trip(tmp_path: Path) -> None:
    make_repo(tmp_path)
    marker = tmp_path.parent / f"{tmp_path.name}-filter-ran"
    git(tmp_path, "config", "filter.evil.clean", f"touch {marker}; cat")
    git(tmp_path, "config", "core.fsmonitor", f"touch {marker}; false")
    (tmp_path / ".gitattributes").write_text("* filter=evil text eol=crlf\n")
    (tmp_path / "edited.py").write_bytes(b"value = 1\r\nother\n")
    with FakeProvider(the_turn()) as fake:
        run = run_ketch(["-p", "change things", "--yolo", "--output-format", "json", *adhoc(fake, "openai-chat")], tmp_path)
    sid = session_id(run.stdout)
    marker.unlink(missing_ok=True)  # the test's own git calls above may have run it
    run_ketch(["rewind", sid, "--to", "1", "--code", "--yes"], tmp_path)
    assert (tmp_path / "edited.py").read_bytes() == b"value = 1\r\nother\n"
    assert not marker.exists()


@pytest.mark.parametrize("wire", WIRES)
def test_conversation_rewind_to_prompt_2_of_4_sends_exactly_the_history_before_it(tmp_path: Path, wire: str) -> None:
    (tmp_path / "notes.txt").write_text("n\n")
    prompts = ["first", "second", "third", "fourth"]
    sid = ""
    for i, prompt in enumerate(prompts):
        script = [Turn(tool_calls=[ToolCall("read_file", {"path": "notes.txt"}, id=f"r{i}")]), Turn(text=f"answer {i + 1}")]
        with FakeProvider(script) as fake:
            args = ["-p", prompt, "--output-format", "json", *adhoc(fake, wire)]
            run = run_ketch(args if i == 0 else ["--continue", *args], tmp_path)
        assert run.code == 0, run.stderr
        sid = session_id(run.stdout)
    cut = run_ketch(["rewind", sid, "--to", "2", "--chat", "--yes", "--output-format", "json"], tmp_path)
    assert cut.code == 0, cut.stderr
    assert json.loads(cut.stdout)["conversation"]["prompt"] == "second"

    with FakeProvider([Turn(text="again")]) as fake:
        run = run_ketch(["--resume", sid, "-p", "second, reworded", *adhoc(fake, wire)], tmp_path)
    assert run.code == 0, run.stderr
    [request] = fake.model_requests
    assert user_texts(request) == ["first", "second, reworded"]
    assert not fake.rejections
    assert_strict_history(request)
    listing = json.loads(run_ketch(["rewind", sid, "--output-format", "json"], tmp_path).stdout)
    assert [p["prompt"] for p in listing["prompts"]] == ["first", "second, reworded"]


def test_checkpoints_cost_nothing_to_the_users_git_and_skip_the_home_folder(tmp_path: Path) -> None:
    from ketch.checkpoints.rewind import checkpointer_for

    cp, why = checkpointer_for(Path.home(), enabled=True)
    assert cp is None and "not a project folder" in why
    cp, why = checkpointer_for(tmp_path, enabled=False)
    assert cp is None and why == ""


def test_past_the_size_cap_the_oldest_checkpoints_go_with_a_notice(tmp_path: Path, isolated_home: Path) -> None:
    make_repo(tmp_path)
    (isolated_home / "config" / "config.toml").write_text("titles = false\ncheckpoints = true\ncheckpoint_cap_mb = 1\n")
    for i in range(4):  # ~2 MB stored, even compressed (each file under the 1 MiB large-file limit)
        (tmp_path / f"data{i}.txt").write_text(os.urandom(450_000).hex())
    with FakeProvider(the_turn()) as fake:
        run = run_ketch(["-p", "change things", "--yolo", "--output-format", "stream-json", *adhoc(fake, "openai-chat")], tmp_path)
    assert run.code == 0, run.stderr
    notices = [json.loads(line)["text"] for line in run.stdout.splitlines() if json.loads(line)["type"] == "notice"]
    assert any("oldest were dropped" in n for n in notices), notices


def test_checkpoints_prune_removes_those_of_sessions_that_are_gone(tmp_path: Path, isolated_home: Path) -> None:
    from ketch.checkpoints.rewind import Checkpointer

    make_repo(tmp_path)
    with FakeProvider(the_turn()) as fake:
        run = run_ketch(["-p", "change things", "--yolo", "--output-format", "json", *adhoc(fake, "openai-chat")], tmp_path)
    sid = session_id(run.stdout)
    orphan = Checkpointer(tmp_path, isolated_home / "data")
    orphan.take("gone-session", 1, "before", prompt="x")
    orphan.close()
    listed = run_ketch(["checkpoints", "list"], tmp_path)
    assert str(tmp_path) in listed.stdout and "4 checkpoints" in listed.stdout
    pruned = run_ketch(["checkpoints", "prune"], tmp_path)
    assert "1 checkpoints removed" in pruned.stdout
    kept = json.loads(run_ketch(["rewind", sid, "--output-format", "json"], tmp_path).stdout)["prompts"]
    assert [p["prompt"] for p in kept] == ["change things"]


def test_a_rewind_never_writes_through_a_directory_the_turn_turned_into_a_link(tmp_path: Path) -> None:
    root = tmp_path / "proj"
    outside = tmp_path / "outside"
    root.mkdir()
    outside.mkdir()
    make_repo(root)
    (root / "src").mkdir()
    (root / "src" / "code.py").write_text("original\n")
    turn = [
        Turn(tool_calls=[ToolCall("shell", {"command": f"rm -rf src && ln -s {outside} src"}, id="c1")]),
        Turn(text="Done."),
    ]
    with FakeProvider(turn) as fake:
        run = run_ketch(["-p", "swap", "--yolo", "--output-format", "json", *adhoc(fake, "openai-chat")], root)
    sid = session_id(run.stdout)
    undo = run_ketch(["rewind", sid, "--to", "1", "--code", "--yes", "--output-format", "json"], root)
    assert undo.code == 0, undo.stderr
    report = json.loads(undo.stdout)
    assert list(outside.iterdir()) == []  # nothing was written where the link points
    assert "src/code.py" in report["left"] or (root / "src").is_dir()


def test_a_file_the_turn_replaced_with_a_directory_comes_back(tmp_path: Path) -> None:
    make_repo(tmp_path)
    turn = [Turn(tool_calls=[ToolCall("shell", {"command": "rm edited.py && mkdir -p edited.py/deep && echo x > edited.py/deep/y"}, id="c1")]),
            Turn(text="Done.")]
    with FakeProvider(turn) as fake:
        run = run_ketch(["-p", "swap", "--yolo", "--output-format", "json", *adhoc(fake, "openai-chat")], tmp_path)
    sid = session_id(run.stdout)
    undo = run_ketch(["rewind", sid, "--to", "1", "--code", "--yes", "--output-format", "json"], tmp_path)
    assert undo.code == 0, undo.stderr
    assert (tmp_path / "edited.py").read_text() == "value = 1\n"


def test_two_processes_snapshotting_one_workspace_wait_for_each_other(tmp_path: Path, isolated_home: Path) -> None:
    import threading

    from ketch.checkpoints.rewind import Checkpointer

    make_repo(tmp_path)
    for i in range(300):
        (tmp_path / f"f{i}.txt").write_text(f"{i}\n")
    errors: list[BaseException] = []

    def snap(name: str) -> None:
        cp = Checkpointer(tmp_path, isolated_home / "data")
        try:
            for turn in range(1, 6):
                (tmp_path / f"{name}.txt").write_text(f"{turn}\n")
                cp.take(name, turn, "before", prompt="p")
        except BaseException as exc:  # noqa: BLE001
            errors.append(exc)
        finally:
            cp.close()

    threads = [threading.Thread(target=snap, args=(n,)) for n in ("one", "two")]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []


def test_the_checkpoint_stores_git_gets_no_key_of_the_user(tmp_path: Path, isolated_home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from ketch.tools.gitsafe import own_store_env

    monkeypatch.setenv("OPENAI_API_KEY", "sk-should-never-reach-git")
    env = own_store_env(isolated_home / "data" / "git", tmp_path)
    assert "OPENAI_API_KEY" not in env and not any("sk-should" in v for v in env.values())
    assert env["GIT_CONFIG_GLOBAL"] == os.devnull and env["GIT_DIR"].endswith("git")
