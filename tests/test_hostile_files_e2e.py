"""Hostile file-tool calls through a headless session against the fake provider, each judged
by what crossed a boundary: a file written or not (outside the workspace, in the user's
config), bytes sent or not to the provider, a marker a command would have made, the rows and
lines ketch stored and printed.

Classes: bad bytes in any argument of any tool (a clear tool error, the turn goes on),
process and kernel state (``/proc``, ``/sys``, devices, FIFOs, sockets) never read, writes that
would follow a symlink into the user's global config, and a held key in a view derived from a
call (its arguments as shown, the diff, the summary, the export).
"""

from __future__ import annotations

import json
import os
import socket
import sqlite3
from pathlib import Path

import pytest
from fakeprovider import FakeProvider, ToolCall, Turn, tool_results
from kettle import adhoc, run_ketch

WIRE = "openai-chat"
HELD = "held-key-9f8e7d6c5b4a39281706"
"""A key ketch holds (the connection's own, through --api-key-env) that the model writes into files."""


def _user_config(home: Path, extra: str = "") -> None:
    (home / "config" / "config.toml").write_text(f"titles = false\ncheckpoints = false\n{extra}")


def _go(ws: Path, calls: list[ToolCall], *flags: str, env: dict[str, str] | None = None, **kw: object) -> tuple[object, FakeProvider]:
    with FakeProvider([Turn(tool_calls=calls), Turn(text="done")]) as fake:
        run = run_ketch(["-p", "go", "--yolo", *flags, *adhoc(fake, WIRE)], ws, env=env, **kw)  # type: ignore[arg-type]
    return run, fake


def _results(fake: FakeProvider) -> list[str]:
    assert len(fake.model_requests) == 2, "the turn did not go on to the next request"
    return [text for _, text in tool_results(fake.model_requests[1])]


# ---------------------------------------------------------------- bad bytes in any argument

BAD = {
    "nul": "\x00",
    "esc": "\x1b[2J",
    "bel": "\x07",
    "del": "\x7f",
    "c1": "\x9b",
    "surrogate": "\ud800",
}
"""In names (paths, globs, URLs, refs): any of these, and a newline too."""

# (tool, arguments with {bad} where the bad text goes, the marker path the call would create if it ran)
CALLS: list[tuple[str, dict[str, object], str]] = [
    ("read_file", {"path": "a{bad}.txt"}, ""),
    ("write_file", {"path": "made{bad}.txt", "content": "x"}, "made"),
    ("write_file", {"path": "made.txt", "content": "x{bad}y"}, "made.txt"),
    ("edit_file", {"path": "a.txt", "old_string": "hello", "new_string": "bye{bad}"}, ""),
    ("edit_file", {"path": "a{bad}.txt", "old_string": "hello", "new_string": "bye"}, ""),
    ("edit_file", {"path": "a.txt", "edits": [{"old_string": "hello", "new_string": "b{bad}"}]}, ""),
    ("list_dir", {"path": ".{bad}"}, ""),
    ("glob", {"pattern": "*{bad}.txt"}, ""),
    ("glob", {"pattern": "*.txt", "path": ".{bad}"}, ""),
    ("grep", {"pattern": "hel{bad}lo"}, ""),
    ("grep", {"pattern": "hello", "glob": "*{bad}"}, ""),
    ("grep", {"pattern": "hello", "path": "a{bad}.txt"}, ""),
    ("shell", {"command": "touch shell-ran{bad}"}, "shell-ran"),
    ("shell", {"command": "touch shell-ran; echo '{bad}'"}, "shell-ran"),
    ("web_fetch", {"url": "http://127.0.0.1:9/{bad}"}, ""),
    ("git_diff", {"path": "a{bad}.txt"}, ""),
    ("git_log", {"ref": "HEAD{bad}"}, ""),
    ("git_show", {"ref": "HEAD{bad}"}, ""),
    ("git_blame", {"path": "a{bad}.txt"}, ""),
    ("memory", {"action": "add", "text": "note{bad}"}, ""),
    ("skill", {"name": "x{bad}"}, ""),
]

# text arguments keep printable control characters (a file may hold a tab or an escape); only
# NUL and a lone surrogate are refused there
TEXT_ARGS_KEEP = {("write_file", "content"), ("edit_file", "new_string"), ("edit_file", "edits"), ("memory", "text")}


def _fill(value: object, bad: str) -> object:
    if isinstance(value, str):
        return value.replace("{bad}", bad)
    if isinstance(value, list):
        return [_fill(v, bad) for v in value]
    if isinstance(value, dict):
        return {k: _fill(v, bad) for k, v in value.items()}
    return value


def _free_text(tool: str, args: dict[str, object]) -> bool:
    return any((tool, key) in TEXT_ARGS_KEEP and "{bad}" in json.dumps(value) for key, value in args.items())


BAD_CASES = [(tool, args, marker, bad) for tool, args, marker in CALLS for bad in BAD
             if bad in ("nul", "surrogate") or not _free_text(tool, args)]
"""Every call with every bad text, but for free text only NUL and a lone surrogate (free text may
hold a tab or an escape)."""


@pytest.mark.parametrize(("tool", "args", "marker", "bad"), BAD_CASES,
                         ids=[f"{t}-{'-'.join(a)}-{b}" for t, a, _, b in BAD_CASES])
def test_a_bad_byte_in_any_argument_is_a_tool_error_and_the_turn_goes_on(
    tmp_path: Path, tool: str, args: dict[str, object], marker: str, bad: str
) -> None:
    text = BAD[bad]
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "a.txt").write_text("hello\n")
    run, fake = _go(ws, [ToolCall(tool, _fill(args, text))])
    assert run.code == 0, run.stderr  # type: ignore[attr-defined]
    [result] = _results(fake)
    if bad == "surrogate":  # the strict-JSON reading of the arguments refuses it first
        assert "lone surrogate" in result and "Nothing ran" in result, result
    else:
        assert "holds" in result and "nothing was run" in result, result
    assert (ws / "a.txt").read_text() == "hello\n"
    if marker:
        assert not [p for p in ws.iterdir() if p.name.startswith(marker)], list(ws.iterdir())


def test_a_newline_in_a_path_is_refused_but_kept_in_a_command(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    run, fake = _go(ws, [ToolCall("write_file", {"path": "two\nlines.txt", "content": "x"}, id="w"),
                         ToolCall("shell", {"command": "touch one\ntouch three"}, id="s")])
    assert run.code == 0
    write, shell = _results(fake)
    assert "U+000A" in write and not list(ws.glob("two*"))
    assert (ws / "one").exists() and (ws / "three").exists(), shell


# ---------------------------------------------------------------- process and kernel state


@pytest.mark.parametrize("path", [
    "/proc/self/environ", "/proc/self/cmdline", "/proc/self/mem", "/proc/1/environ", "/proc/self/root/etc/hostname",
    "/proc/self/fd/0", "/proc/thread-self/environ", "/sys/kernel/mm/transparent_hugepage/enabled",
    "/dev/zero", "/dev/stdin", "/dev/urandom", "/dev/fd/0",
])
@pytest.mark.parametrize("tool", ["read_file", "edit_file", "write_file", "grep", "list_dir"])
def test_process_and_kernel_state_is_never_read_even_in_an_added_directory(tmp_path: Path, path: str, tool: str) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    args: dict[str, object] = {"path": path}
    if tool == "edit_file":
        args.update(old_string="a", new_string="b")
    elif tool == "write_file":
        args["content"] = "overwritten"
    elif tool == "grep":
        args["pattern"] = "."
    top = "/" + path.split("/")[1]
    run, fake = _go(ws, [ToolCall(tool, args)], "--add-dir", top, "--api-key-env", "HELD_ENV",
                    env={"HELD_ENV": HELD, "OTHER_SECRET_TOKEN": HELD + "-2"})
    assert run.code == 0, run.stderr  # type: ignore[attr-defined]
    [result] = _results(fake)
    # refused as kernel state, or (a magic link such as /proc/self/root) as leading outside
    assert "process or kernel state" in result or "outside the workspace" in result, result
    assert HELD not in json.dumps(fake.model_requests[1].body)


@pytest.mark.parametrize("tool", ["read_file", "edit_file", "grep"])
@pytest.mark.parametrize("kind", ["fifo", "socket", "symlink-to-environ", "symlink-to-dev"])
def test_a_special_file_inside_the_workspace_is_refused_without_blocking(tmp_path: Path, tool: str, kind: str) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    special = ws / "special"
    keep: socket.socket | None = None
    if kind == "fifo":
        os.mkfifo(special)
    elif kind == "socket":
        keep = socket.socket(socket.AF_UNIX)
        keep.bind(str(special))
    elif kind == "symlink-to-environ":
        special.symlink_to("/proc/self/environ")
    else:
        special.symlink_to("/dev/zero")
    args: dict[str, object] = {"path": "special"}
    if tool == "edit_file":
        args.update(old_string="a", new_string="b")
    elif tool == "grep":
        args["pattern"] = "."
    try:
        run, fake = _go(ws, [ToolCall(tool, args)], "--api-key-env", "HELD_ENV", env={"HELD_ENV": HELD})
    finally:
        if keep is not None:
            keep.close()
    assert run.code == 0, run.stderr  # type: ignore[attr-defined]
    [result] = _results(fake)
    assert HELD not in json.dumps(fake.model_requests[1].body)
    if tool == "grep":
        assert "not a regular file" in result or "outside" in result, result
    else:
        assert "not a regular file" in result or "outside" in result or "kernel state" in result, result


# ---------------------------------------------------------------- writes into the user's config


def _config_targets(home: Path) -> dict[str, Path]:
    cfg = Path(os.environ["KETCH_CONFIG_DIR"])
    (home / ".bashrc").write_text("# bashrc\n")
    (home / ".ssh").mkdir(exist_ok=True)
    (home / ".ssh" / "authorized_keys").write_text("ssh-ed25519 AAAA user\n")
    (home / ".gitconfig").write_text("[user]\n\tname = me\n")
    return {"config": cfg / "config.toml", "bashrc": home / ".bashrc", "keys": home / ".ssh" / "authorized_keys",
            "gitconfig": home / ".gitconfig"}


@pytest.mark.parametrize("target", ["config", "bashrc", "keys", "gitconfig"])
@pytest.mark.parametrize("how", ["file-link", "dir-link", "dangling-link", "relative-link", "link-chain"])
@pytest.mark.parametrize("tool", ["write_file", "edit_file"])
def test_a_write_never_follows_a_symlink_into_the_users_config(
    tmp_path: Path, isolated_home: Path, target: str, how: str, tool: str
) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    targets = _config_targets(isolated_home)
    real = targets[target]
    before = {p: p.read_bytes() for p in targets.values()}
    if how == "file-link":
        (ws / "f").symlink_to(real)
        path = "f"
    elif how == "dir-link":
        (ws / "d").symlink_to(real.parent)
        path = f"d/{real.name}"
    elif how == "dangling-link":
        (ws / "f").symlink_to(real.parent / "new-file.toml")
        path = "f"
    elif how == "relative-link":
        (ws / "f").symlink_to(os.path.relpath(real, ws))
        path = "f"
    else:
        (ws / "b").symlink_to(real)
        (ws / "f").symlink_to("b")
        path = "f"
    args: dict[str, object] = {"path": path}
    args.update({"content": "pwned\n"} if tool == "write_file" else {"old_string": real.read_text().splitlines()[0], "new_string": "pwned"})
    run, fake = _go(ws, [ToolCall(tool, args)])
    assert run.code == 0, run.stderr  # type: ignore[attr-defined]
    [result] = _results(fake)
    assert "outside" in result, result
    assert {p: p.read_bytes() for p in targets.values()} == before
    assert not (real.parent / "new-file.toml").exists()


# ---------------------------------------------------------------- a held key in a derived view


def _stored_events(home: Path) -> str:
    """Every stored event row (what a front end replays), as text."""
    [db] = list((home / "data").rglob("ketch.db"))
    with sqlite3.connect(db) as conn:
        return "\n".join(str(row) for row in conn.execute("select * from events"))


@pytest.mark.parametrize("case", ["write-new", "write-over", "edit-adds", "edit-near", "shell-arg", "multi-edit"])
def test_a_held_key_never_shows_in_a_diff_summary_or_export(tmp_path: Path, isolated_home: Path, case: str) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "env.txt").write_text(f"A=1\nTOKEN={HELD}\nB=2\n")
    (ws / "plain.txt").write_text("one\ntwo\n")
    call = {
        "write-new": ToolCall("write_file", {"path": "new.txt", "content": f"key = {HELD}\n"}),
        "write-over": ToolCall("write_file", {"path": "env.txt", "content": "A=1\nB=3\n"}),
        "edit-adds": ToolCall("edit_file", {"path": "plain.txt", "old_string": "two", "new_string": f"two {HELD}"}),
        "edit-near": ToolCall("edit_file", {"path": "env.txt", "old_string": "B=2", "new_string": "B=3"}),
        "shell-arg": ToolCall("shell", {"command": f"echo {HELD} > out.txt"}),
        "multi-edit": ToolCall("edit_file", {"path": "plain.txt", "edits": [{"old_string": "one", "new_string": HELD},
                                                                          {"old_string": "two", "new_string": "2"}]}),
    }[case]
    env = {"HELD_ENV": HELD}
    run, fake = _go(ws, [call], "--output-format", "stream-json", "--api-key-env", "HELD_ENV", env=env)
    assert run.code == 0, run.stderr  # type: ignore[attr-defined]
    events = [json.loads(line) for line in run.stdout.splitlines() if line.startswith("{")]  # type: ignore[attr-defined]
    finished = [e for e in events if e.get("type") == "tool_call_finished"]
    assert finished and not finished[0].get("is_error"), finished
    assert HELD not in run.stdout, "the key is in the printed events"  # type: ignore[attr-defined]
    stored = _stored_events(isolated_home)
    assert "tool_call_finished" in stored and HELD not in stored, "the key is in the stored events"
    if case != "shell-arg":
        assert "[key removed by ketch]" in finished[0].get("diff", ""), finished[0]
    session = next(e["session_id"] for e in events if e.get("session_id"))
    for fmt in ("md", "json"):
        out = run_ketch(["export", session, "--format", fmt], ws, env={"HELD_TOKEN": HELD})  # held by its name
        assert out.code == 0, out.stderr
        assert HELD not in out.stdout, f"the key is in the {fmt} export"


@pytest.mark.parametrize("kind", ["fifo", "dev-zero", "grown"])
def test_an_image_swapped_after_it_was_found_is_read_once_without_blocking(tmp_path: Path, kind: str) -> None:
    """``find_images`` saw a small PNG; by the time it is read the path is a FIFO, a device or a
    file over the cap. The read checks the descriptor it reads, so it refuses without blocking."""
    from ketch.core.attachments import MAX_IMAGE_BYTES, AttachmentError, find_images, read_image

    shot = tmp_path / "shot.png"
    shot.write_bytes(b"\x89PNG\r\n\x1a\n" + b"\0" * 16 + b"\0\0\0\x01\0\0\0\x01")
    [ref] = find_images("look at @shot.png", tmp_path)
    shot.unlink()
    if kind == "fifo":
        os.mkfifo(shot)
    elif kind == "dev-zero":
        shot.symlink_to("/dev/zero")
    else:
        shot.write_bytes(b"\x89PNG\r\n\x1a\n" + b"\0" * (MAX_IMAGE_BYTES + 1))
    with pytest.raises(AttachmentError):
        read_image(ref)


async def test_the_approval_preview_of_a_write_holds_no_key(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The interactive gate asks for a write whose diff would show a held key (the file holds
    it on a context line, and the new text adds it again): the preview it shows is redacted."""
    import argparse

    from ketch.protocol import events as ev
    from ketch.frontends.assemble import build_session

    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "env.txt").write_text(f"A=1\nTOKEN={HELD}\nB=2\n")
    monkeypatch.setenv("HELD_ENV", HELD)
    calls = [ToolCall("edit_file", {"path": "env.txt", "old_string": "B=2", "new_string": f"B={HELD}"})]
    with FakeProvider([Turn(tool_calls=calls), Turn(text="done")]) as fake:
        args = argparse.Namespace(cwd=str(ws), base_url=fake.base_url, wire=WIRE, model="fake-model", yolo=False,
                                  sandbox=None, approval="ask", api_key_env="HELD_ENV")
        session = await build_session(args, interactive=True)
        seen: list[object] = []
        try:
            async for event in session.run_turn("go"):
                seen.append(event)
                if isinstance(event, ev.ApprovalRequested):
                    session.decide(event.request_id, "allow", "")
        finally:
            await session.aclose()
    [request] = [e for e in seen if isinstance(e, ev.ApprovalRequested)]
    assert "[key removed by ketch]" in request.preview and HELD not in request.preview, request.preview
    assert HELD not in repr(request.args)
    assert all(HELD not in repr(e) for e in seen if isinstance(e, (ev.ToolCallStarted, ev.ToolCallFinished)))
    assert (ws / "env.txt").read_text() == f"A=1\nTOKEN={HELD}\nB={HELD}\n"  # the write itself happened
