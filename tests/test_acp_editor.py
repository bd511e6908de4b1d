"""``ketch acp`` against editors' clients (the official Python SDK here, the official TypeScript
SDK through node in ``tests/acp_node``), on real pipes through a tap that keeps every message:
each one is validated against the JSON schema of the protocol version negotiated, and the
assertions are on what the editor received and what its file system holds."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

acp = pytest.importorskip("acp")
from acp import PROTOCOL_VERSION, spawn_agent_process, text_block  # noqa: E402
from acp.schema import ClientCapabilities, FileSystemCapabilities  # noqa: E402
from acp_schema import SDK, read_log, sdk_installed, validate  # noqa: E402
from fakeprovider import FakeProvider, ToolCall, Turn, tool_results, user_texts  # noqa: E402
from kettle import adhoc, ketch_env  # noqa: E402
from test_acp import EditorClient, until  # noqa: E402

TAP = Path(__file__).parent / "acp_wire.py"

REAL_EXEC = {
    "test_session_new_answers_before_the_model_list_and_the_list_follows_as_an_update",
    "test_editor_gets_session_new_before_any_model_list_then_the_list_and_the_slash_updates[typescript]",
    "test_editor_gets_session_new_before_any_model_list_then_the_list_and_the_slash_updates[python]",
}
"""The tests whose agent is ``python -m ketch acp`` itself; in the others the tap has the agent
forked from the preloaded interpreter (``ketch_processes``: the same ``__main__`` and pipes, a
process of its own, without paying the imports again)."""

_preloaded: Any = None
"""This test's ``preloaded_ketch``, or None when its agent is the binary (``_agent_process``)."""


@pytest.fixture(autouse=True)
def _agent_process(request: pytest.FixtureRequest, preloaded_ketch: Any) -> Any:
    global _preloaded
    _preloaded = None if request.node.name in REAL_EXEC else preloaded_ketch
    yield
    _preloaded = None


class GatedModels:
    """A provider whose model list waits behind a gate (never opened: a provider that never
    answers); anything else is answered 503."""

    def __init__(self, listed: str = "listed-model") -> None:
        self.gate = threading.Event()
        self.asked = threading.Event()
        gate, asked = self.gate, self.asked
        body = json.dumps({"object": "list", "data": [{"id": listed, "object": "model"}]}).encode()

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802 - the http.server name
                if self.path == "/open-gate":  # the editor opens it once session/new has answered
                    gate.set()
                    self.send_response(204)
                    self.end_headers()
                    return
                asked.set()
                if not gate.wait(60):
                    return
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def do_POST(self) -> None:  # noqa: N802
                self.send_response(503)
                self.end_headers()

            def log_message(self, *_: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.base_url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"

    def close(self) -> None:
        self.gate.set()
        self.server.shutdown()
        self.server.server_close()


def _agent_command(log: Path, base_url: str | None, *extra: str) -> list[str]:
    """``ketch acp`` behind the tap: on the fake as an ad-hoc endpoint, or (no ``base_url``) as ``extra`` says."""
    model = ["--base-url", base_url, "--wire", "openai-chat", "--model", "fake-model"] if base_url else []
    preloaded = ["--preloaded", _preloaded.socket_path] if _preloaded is not None else []
    return [sys.executable, str(TAP), str(log), *preloaded, "--", sys.executable, "-m", "ketch", "acp", *model, *extra]


async def _spawn(client: Any, log: Path, base_url: str, cwd: Path) -> Any:
    command = _agent_command(log, base_url)
    return spawn_agent_process(client, command[0], *command[1:], env=ketch_env(), cwd=str(cwd))


async def _initialize(conn: Any) -> Any:
    return await conn.initialize(
        protocol_version=PROTOCOL_VERSION,
        client_capabilities=ClientCapabilities(fs=FileSystemCapabilities(read_text_file=True, write_text_file=True)),
    )


def _schema_clean(log: Path, unstable: frozenset[str] = frozenset()) -> int:
    """Every message on the wire valid for the negotiated version (``unstable``: the methods
    checked against its unstable schema); how many there were."""
    count, problems = validate(read_log(log), unstable)
    assert not problems, problems[:10]
    return count


EDITORS = {
    "typescript": ["node", str(SDK.parent.parent.parent / "editor.mjs")],
    "python": [sys.executable, str(Path(__file__).parent / "acp_py_editor.py")],
}
"""The two official clients, each behind an editor that takes the same plan and prints the same JSON."""


@pytest.fixture(params=sorted(EDITORS))
def editor(request: pytest.FixtureRequest) -> str:
    return request.param


def run_editor(plan: dict[str, Any], log: Path, base_url: str | None, cwd: Path, *extra: str,
               env: dict[str, str] | None = None, editor: str = "typescript",
               unstable: frozenset[str] = frozenset()) -> dict[str, Any]:
    """Drive ``ketch acp`` with an official SDK's client (``acp_node/editor.mjs`` for the
    TypeScript one, ``acp_py_editor.py`` for the Python one) through ``plan``; what the editor
    received, after checking every message on the wire."""
    plan = {"cwd": str(cwd), "command": _agent_command(log, base_url, *extra), "unstable": bool(unstable), **plan}
    run = subprocess.run([*EDITORS[editor], json.dumps(plan)], cwd=cwd,
                         env=ketch_env(env), capture_output=True, text=True, timeout=240)
    assert run.returncode == 0, run.stderr[-3000:] + "\nwhat the editor saw: " + run.stdout[-3000:]
    seen = json.loads(run.stdout)
    seen["messages"] = _schema_clean(log, unstable)
    return seen


def kinds(seen: dict[str, Any]) -> list[str]:
    return [u["update"]["sessionUpdate"] for u in seen["updates"]]


def _options(update_or_response: Any) -> dict[str, Any]:
    return {o.id: o for o in update_or_response.config_options}


@pytest.fixture(autouse=True)
def _schema_available() -> None:
    if not sdk_installed():
        pytest.skip(f"the ACP TypeScript SDK (its schema) is not installed in {SDK.parent.parent}: .ci/run installs it")


async def test_session_new_answers_before_the_model_list_and_the_list_follows_as_an_update(tmp_path: Path) -> None:
    provider = GatedModels()
    client = EditorClient([])
    log = tmp_path / "wire.log"
    try:
        async with await _spawn(client, log, provider.base_url, tmp_path) as (conn, _process):
            await _initialize(conn)
            new = await conn.new_session(cwd=str(tmp_path), mcp_servers=[])  # the gate is shut: nothing listed yet
            assert not provider.gate.is_set()
            models = [o.value for o in _options(new)["model"].options]
            assert "adhoc:fake-model" in models and "adhoc:listed-model" not in models
            assert not [u for u in client.updates if u.session_update == "config_option_update"]
            provider.gate.set()
            await until(lambda: any(u.session_update == "config_option_update" for u in client.updates))
            [update] = [u for u in client.updates if u.session_update == "config_option_update"]
            listed = [o.value for o in _options(update)["model"].options]
            assert "adhoc:listed-model" in listed and _options(update)["model"].current_value == "adhoc:fake-model"
    finally:
        provider.close()
    assert provider.asked.is_set()
    assert _schema_clean(log) >= 5


def _replies(client: EditorClient, start: int) -> str:
    return "".join(u.content.text for u in client.updates[start:] if u.session_update == "agent_message_chunk")


async def test_slash_commands_keep_the_editors_session_id_and_tell_its_pickers(tmp_path: Path) -> None:
    script = [Turn(text="answer one"), Turn(text="answer two")]
    client = EditorClient([])
    log = tmp_path / "wire.log"
    with FakeProvider(script) as fake:
        async with await _spawn(client, log, fake.base_url, tmp_path) as (conn, _process):
            await _initialize(conn)
            sid = (await conn.new_session(cwd=str(tmp_path), mcp_servers=[])).session_id
            await until(lambda: any(u.session_update == "available_commands_update" for u in client.updates))
            [commands] = [u for u in client.updates if u.session_update == "available_commands_update"]
            names = {c.name for c in commands.available_commands}
            assert {"clear", "fork", "model", "agent", "think"} <= names and "resume" not in names
            await conn.prompt(session_id=sid, prompt=[text_block("first question")])

            async def slash(text: str) -> str:
                mark = len(client.updates)
                reply = await conn.prompt(session_id=sid, prompt=[text_block(text)])
                assert reply.stop_reason == "end_turn"
                return _replies(client, mark)

            def latest_options() -> dict[str, Any]:
                return _options([u for u in client.updates if u.session_update == "config_option_update"][-1])

            await slash("/model adhoc:other-model")
            assert latest_options()["model"].current_value == "adhoc:other-model"
            await slash("/think high")
            assert latest_options()["think"].current_value == "high"
            await slash("/agent plan")
            assert [u.current_mode_id for u in client.updates if u.session_update == "current_mode_update"][-1] == "plan"
            await slash("/agent build")
            assert "not available in an editor" in await slash("/resume " + sid)

            forked = await slash("/fork")
            cleared = await slash("/clear")
            await conn.prompt(session_id=sid, prompt=[text_block("second question")])
    fork_id = forked.split("kept as session ")[1].split(";")[0]
    old_id = cleared.split("kept as session ")[1].rstrip(".")
    assert user_texts(fake.model_requests[-1]) == ["second question"]  # /clear emptied the conversation the model sees
    assert fake.model_requests[-1].body["model"] == "other-model"

    # A later editor loads each id and sees what it holds: the editor's id has the conversation after /clear.
    shown: dict[str, str] = {}
    for wanted in (sid, old_id, fork_id):
        loader = EditorClient([])
        with FakeProvider([]) as idle:
            async with await _spawn(loader, tmp_path / f"load-{wanted}.log", idle.base_url, tmp_path) as (conn, _p):
                await _initialize(conn)
                await conn.load_session(cwd=str(tmp_path), session_id=wanted, mcp_servers=[])
                await until(lambda: any(u.session_update == "user_message_chunk" for u in loader.updates))
        shown[wanted] = loader.text("user_message_chunk")
        _schema_clean(tmp_path / f"load-{wanted}.log")
    assert shown[sid] == "second question"
    assert shown[old_id] == "first question" and shown[fork_id] == "first question"
    assert len({sid, old_id, fork_id}) == 3
    assert _schema_clean(log) > 10


def test_editor_gets_session_new_before_any_model_list_then_the_list_and_the_slash_updates(tmp_path: Path, editor: str) -> None:
    provider = GatedModels()
    try:
        seen = run_editor({"steps": [
            {"op": "initialize"},
            {"op": "new"},
            {"op": "fetch", "url": provider.base_url.removesuffix("/v1") + "/open-gate"},
            {"op": "waitUpdate", "kind": "config_option_update"},
            {"op": "prompt", "text": "/model adhoc:other-model"},
            {"op": "prompt", "text": "/agent plan"},
            {"op": "setOption", "id": "think", "value": "high"},
            {"op": "prompt", "text": "/clear"},
        ]}, tmp_path / "wire.log", provider.base_url, tmp_path, editor=editor)
    finally:
        provider.close()
    new = seen["responses"][1]["result"]
    [model] = [o for o in new["configOptions"] if o["id"] == "model"]
    assert "adhoc:listed-model" not in [o["value"] for o in model["options"]]  # answered with the gate shut
    updates = [u["update"] for u in seen["updates"] if u["sessionId"] == new["sessionId"]]
    pickers = [u for u in updates if u["sessionUpdate"] == "config_option_update"]
    first = {o["id"]: o for o in pickers[0]["configOptions"]}
    assert "adhoc:listed-model" in [o["value"] for o in first["model"]["options"]]
    assert {o["id"]: o["currentValue"] for o in pickers[-1]["configOptions"]}["model"] == "adhoc:other-model"
    assert [u["currentModeId"] for u in updates if u["sessionUpdate"] == "current_mode_update"] == ["plan"]
    [think] = [o for o in seen["responses"][6]["result"]["configOptions"] if o["id"] == "think"]
    assert think["currentValue"] == "high"
    said = "".join(u["content"]["text"] for u in updates if u["sessionUpdate"] == "agent_message_chunk")
    assert "New conversation." in said and not seen["errors"]
    assert seen["messages"] > 10


def test_editor_lists_loads_resumes_and_closes_sessions_with_their_settings_and_titles(tmp_path: Path, editor: str) -> None:
    user_config = Path(ketch_env()["KETCH_CONFIG_DIR"]) / "config.toml"
    user_config.write_text(user_config.read_text().replace("titles = false", "titles = true"))
    script = [Turn(text="answer one"), Turn(text="Parser fix"), Turn(text="answer two")]
    with FakeProvider(script) as fake:
        first = run_editor({"steps": [
            {"op": "initialize"},
            {"op": "new"},
            {"op": "setMode", "mode": "plan"},
            {"op": "setOption", "id": "think", "value": "high"},
            {"op": "setOption", "id": "model", "value": "adhoc:other-model"},
            {"op": "prompt", "text": "fix the parser"},
            {"op": "waitUpdate", "kind": "session_info_update", "contains": "Parser fix"},
            {"op": "list"},
            {"op": "new", "as": "empty"},
            {"op": "prompt", "session": "$empty", "text": "/agent build"},  # built, never prompted the model
            {"op": "close", "id": "$empty"},
            {"op": "prompt", "session": "$empty", "text": "hello", "mayFail": True},
        ]}, tmp_path / "first.log", fake.base_url, tmp_path, editor=editor)
        by_op = {r["index"]: r["result"] for r in first["responses"]}
        sid = by_op[1]["sessionId"]
        empty = by_op[8]["sessionId"]
        [listed] = [s for s in by_op[7]["sessions"] if s["sessionId"] == sid]
        assert listed["title"] == "Parser fix" and listed["cwd"] == str(tmp_path)
        assert empty not in [s["sessionId"] for s in by_op[7]["sessions"]]
        [closed_error] = first["errors"]
        assert closed_error["index"] == 11 and "no session" in json.dumps(closed_error)

        second = run_editor({"steps": [
            {"op": "initialize"},
            {"op": "load", "id": empty},  # a session made in another process, before its first prompt
            {"op": "load", "id": sid},
            {"op": "resume", "id": sid},
            {"op": "prompt", "session": sid, "text": "and the lexer?"},
        ]}, tmp_path / "second.log", fake.base_url, tmp_path, editor=editor)
    assert not second["errors"], second["errors"]
    by_op = {r["index"]: r["result"] for r in second["responses"]}
    loaded = by_op[2]
    assert loaded["modes"]["currentModeId"] == "plan"
    assert {o["id"]: o["currentValue"] for o in loaded["configOptions"]} == {"model": "adhoc:other-model", "think": "high"}
    replay = [u["update"] for u in second["updates"] if u["sessionId"] == sid]
    said = "".join(u["content"]["text"] for u in replay if u["sessionUpdate"] == "user_message_chunk")
    assert said.startswith("fix the parser")
    assert any(u["sessionUpdate"] == "session_info_update" and u.get("title") == "Parser fix" for u in replay)
    last = fake.model_requests[-1]
    assert user_texts(last) == ["fix the parser", "and the lexer?"] and last.body["model"] == "other-model"


def test_editor_reviews_edits_against_its_unsaved_buffer_and_gets_whole_file_diffs(tmp_path: Path, editor: str) -> None:
    notes = tmp_path / "notes.py"
    notes.write_text("disk line 1\ndisk line 2\n")
    buffer = "buffer line 1\nbuffer line 2\nbuffer line 3\n"
    edited = "buffer line 1\nchanged line 2\nbuffer line 3\n"
    script = [
        Turn(tool_calls=[ToolCall("edit_file", {"path": "notes.py", "old_string": "buffer line 2", "new_string": "changed line 2"},
                                  id="e1")]),
        Turn(tool_calls=[ToolCall("write_file", {"path": "fresh.txt", "content": "brand new\n"}, id="w1")]),
        Turn(text="done"),
    ]
    with FakeProvider(script) as fake:
        seen = run_editor({"buffers": {str(notes): buffer}, "answers": ["allow_once", "allow_once"], "steps": [
            {"op": "initialize"}, {"op": "new"}, {"op": "prompt", "text": "edit the notes"},
        ]}, tmp_path / "wire.log", fake.base_url, tmp_path, editor=editor)
    assert not seen["errors"], seen["errors"]
    first, second = seen["permissions"]
    [diff] = [c for c in first["toolCall"]["content"] if c["type"] == "diff"]
    assert (diff["path"], diff["oldText"], diff["newText"]) == (str(notes), buffer, edited)  # the buffer, not the disk
    assert first["toolCall"]["locations"] == [{"path": str(notes)}]
    [diff] = [c for c in second["toolCall"]["content"] if c["type"] == "diff"]
    assert diff.get("oldText") is None and diff["newText"] == "brand new\n"
    results = {u["update"]["toolCallId"]: u["update"] for u in seen["updates"]
               if u["update"]["sessionUpdate"] == "tool_call_update" and u["update"].get("status") == "completed"}
    [after] = [c for c in results["e1"]["content"] if c["type"] == "diff"]
    assert (after["oldText"], after["newText"]) == (buffer, edited)  # the whole file, before and after
    assert results["e1"]["locations"] == [{"path": str(notes)}]
    assert notes.read_text() == edited and (tmp_path / "fresh.txt").read_text() == "brand new\n"  # saved by the editor
    assert [w["path"] for w in seen["writes"]] == [str(notes), str(tmp_path / "fresh.txt")]


def test_editor_continues_a_headless_session_and_the_terminal_goes_on_with_one_history(tmp_path: Path, editor: str) -> None:
    from kettle import run_ketch

    from ketch.state.store import Store

    with FakeProvider([Turn(text="one"), Turn(text="two"), Turn(text="three")]) as fake:
        made = run_ketch(["-p", "first prompt", "--output-format", "json", *adhoc(fake, "openai-chat")], tmp_path,
                         subprocess_=True, forked_from=_preloaded)
        assert made.code == 0, made.stderr
        sid = json.loads(made.stdout)["session_id"]
        seen = run_editor({"steps": [
            {"op": "initialize"},
            {"op": "load", "id": sid},
            {"op": "prompt", "session": sid, "text": "second prompt"},
        ]}, tmp_path / "wire.log", fake.base_url, tmp_path, editor=editor)
        back = run_ketch(["-p", "third prompt", "--resume", sid, "--output-format", "json", *adhoc(fake, "openai-chat")],
                         tmp_path, subprocess_=True, forked_from=_preloaded)
        assert back.code == 0, back.stderr
    assert not seen["errors"], seen["errors"]
    replayed = [u["update"]["content"]["text"] for u in seen["updates"] if u["update"]["sessionUpdate"] == "user_message_chunk"]
    assert replayed == ["first prompt"]
    assert [user_texts(r) for r in fake.model_requests] == [
        ["first prompt"], ["first prompt", "second prompt"], ["first prompt", "second prompt", "third prompt"]]
    with Store.open() as store:
        prompts = [p.content for m in store.load_messages(sid) for p in getattr(m, "parts", ())
                   if type(p).__name__ == "UserPromptPart" and isinstance(p.content, str)]
    assert [p for p in prompts if p.endswith("prompt")] == ["first prompt", "second prompt", "third prompt"]


LATE_WRITER = ("(exec 9>late.lock; flock 9; : > late.started; until [ -e gate ]; do sleep 0.05; done; touch late.txt) & "
               "sleep 60")
"""A command that leaves a child in the background, holding late.lock while it lives: it writes
late.txt once the gate is open. (A lock, not a pid: the sandbox may run it in a pid namespace.)"""


def _open_the_gate_and_wait_for_the_late_writer(cwd: Path) -> None:
    """Open the gate, then wait until the background child (if it got as far as its lock) has let
    go of it: one the cancel missed writes late.txt first, one it killed let go as it died. No
    clock decides."""
    import fcntl
    import time

    (cwd / "gate").touch()
    if not (cwd / "late.started").exists():
        return  # cancelled before the child took its lock
    with (cwd / "late.lock").open("a") as lock:
        for _ in range(6000):  # a liveness limit (60 s): a missed child ends within its next 0.05 s sleep
            try:
                fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
                return
            except BlockingIOError:
                time.sleep(0.01)
    raise AssertionError("the background child still holds late.lock after the gate opened")


def test_editor_runs_commands_in_its_own_terminal_kills_a_cancelled_one_and_scrubs_keys(tmp_path: Path, editor: str) -> None:
    command = "echo started; env; echo finished > out.txt"
    script = [Turn(tool_calls=[ToolCall("shell", {"command": command}, id="s1")]), Turn(text="ran it"),
              Turn(tool_calls=[ToolCall("shell", {"command": LATE_WRITER}, id="s2")]),
              Turn(text="never")]
    with FakeProvider(script) as fake:
        seen = run_editor({"terminal": True, "answers": ["allow_once", "allow_once"], "steps": [
            {"op": "initialize"}, {"op": "new"},
            {"op": "prompt", "text": "run it"},
            {"op": "prompt", "text": "run the slow one", "cancelWhen": '"terminalId":"term-2"'},
        ]}, tmp_path / "wire.log", fake.base_url, tmp_path, env={"EDITOR_ONLY_API_KEY": "sk-editor-secret"}, editor=editor)
    assert not seen["errors"], seen["errors"]
    first, second = seen["terminals"]
    assert first["params"]["command"] == "env" and first["params"]["args"][0] == "-i"
    assert first["params"]["args"][-3:] == ["bash", "-c", command]  # after the sandbox's wrap, if any
    assert first["exit"] == {"exitCode": 0, "signal": None} and first["released"] and first["polled"] >= 1
    assert "started" in first["output"] and "sk-editor-secret" not in first["output"]  # the editor's env stays out
    assert (tmp_path / "out.txt").read_text() == "finished\n"  # run by the editor's process
    updates = [u["update"] for u in seen["updates"] if u["update"]["sessionUpdate"] == "tool_call_update"]
    s1 = [u for u in updates if u["toolCallId"] == "s1"]
    assert {"type": "terminal", "terminalId": "term-1"} in s1[-1]["content"] and s1[-1]["status"] == "completed"
    assert "started" in dict(tool_results(fake.model_requests[1]))["s1"]
    assert [r["result"]["stopReason"] for r in seen["responses"] if r["op"] == "prompt"] == ["end_turn", "cancelled"]
    assert second["killed"] and second["released"]
    _open_the_gate_and_wait_for_the_late_writer(tmp_path)
    assert not (tmp_path / "late.txt").exists()
    s2 = [u for u in updates if u["toolCallId"] == "s2"]
    assert s2[-1]["status"] == "failed"
    assert {"type": "content", "content": {"type": "text", "text": "Cancelled by the user."}} in s2[-1]["content"]


async def test_without_an_editor_terminal_output_arrives_live_in_the_tool_call(tmp_path: Path) -> None:
    marker = tmp_path / "go"
    command = f"echo first-chunk; while [ ! -e {marker} ]; do sleep 0.1; done; echo second-chunk"
    script = [Turn(tool_calls=[ToolCall("shell", {"command": command}, id="s1")]), Turn(text="ok")]
    client = EditorClient(["allow_once"])
    log = tmp_path / "wire.log"

    def live() -> list[str]:
        return [c.content.text for u in client.updates if u.session_update == "tool_call_update"
                and u.status == "in_progress" for c in (u.content or []) if c.type == "content"]

    with FakeProvider(script) as fake:
        async with await _spawn(client, log, fake.base_url, tmp_path) as (conn, _process):
            await _initialize(conn)
            sid = (await conn.new_session(cwd=str(tmp_path), mcp_servers=[])).session_id
            turn = asyncio.ensure_future(conn.prompt(session_id=sid, prompt=[text_block("run")]))
            await until(lambda: any("first-chunk" in t for t in live()))
            assert not any("second-chunk" in t for t in live())  # still running: this output is live
            marker.touch()
            assert (await turn).stop_reason == "end_turn"
    assert _schema_clean(log) > 5


def test_editor_is_asked_to_authenticate_and_a_stored_login_lets_the_session_start(tmp_path: Path, editor: str) -> None:
    from kettle import write_project_config

    with FakeProvider([Turn(text="hello from the keyed model")]) as fake:
        write_project_config(tmp_path, f'model = "openrouter:fake/fake-model"\n[connections.openrouter]\npreset = "openrouter"\n'
                                       f'base_url = "{fake.base_url}"\n')
        seen = run_editor({"steps": [
            {"op": "initialize"},
            {"op": "new", "mayFail": True},
            {"op": "authenticate", "method": "login:openrouter", "mayFail": True},
            {"op": "run", "argv": [sys.executable, "-m", "ketch", "auth", "login", "openrouter"], "input": "sk-or-v1-stored\n"},
            {"op": "authenticate", "method": "login:openrouter"},
            {"op": "new"},
            {"op": "prompt", "text": "hi"},
        ]}, tmp_path / "wire.log", None, tmp_path, editor=editor)
    init = seen["responses"][0]["result"]
    ids = {m["id"] for m in init["authMethods"]}
    assert {"env:openrouter", "login:openrouter"} <= ids
    no_key, still_none = seen["errors"]
    assert (no_key["op"], no_key["code"]) == ("new", -32000) and "OPENROUTER_API_KEY" in json.dumps(no_key["data"])
    assert (still_none["op"], still_none["code"]) == ("authenticate", -32000)
    assert [r["op"] for r in seen["responses"]][-3:] == ["authenticate", "new", "prompt"]
    said = "".join(u["update"]["content"]["text"] for u in seen["updates"] if u["update"]["sessionUpdate"] == "agent_message_chunk")
    assert "hello from the keyed model" in said
    assert fake.model_requests[0].headers.get("authorization") == "Bearer sk-or-v1-stored"


async def test_images_and_linked_files_reach_a_model_that_takes_them_and_a_clear_no_where_it_does_not(tmp_path: Path) -> None:
    import base64

    from acp.schema import ImageContentBlock, ResourceContentBlock
    from kettle import write_project_config
    from test_images import png

    picture = base64.b64encode(png(3, 2)).decode()
    notes = tmp_path / "notes.txt"
    notes.write_text("on disk\n")
    client = EditorClient([])
    client.buffers[str(notes)] = "the editor's unsaved notes\n"
    log = tmp_path / "wire.log"
    with FakeProvider([Turn(text="a small picture")]) as fake:
        async with await _spawn(client, log, fake.base_url, tmp_path) as (conn, _process):
            init = await _initialize(conn)
            assert init.agent_capabilities.prompt_capabilities.image is True
            sid = (await conn.new_session(cwd=str(tmp_path), mcp_servers=[])).session_id
            await conn.prompt(session_id=sid, prompt=[
                text_block("what is this?"),
                ImageContentBlock(type="image", data=picture, mime_type="image/png"),
                ResourceContentBlock(type="resource_link", uri=notes.as_uri(), name="notes.txt"),
            ])
            write_project_config(tmp_path, '[models."adhoc:fake-model"]\ncapabilities = { image_input = false }\n')
            blind = (await conn.new_session(cwd=str(tmp_path), mcp_servers=[])).session_id
            mark = len(client.updates)
            reply = await conn.prompt(session_id=blind, prompt=[
                text_block("and this?"), ImageContentBlock(type="image", data=picture, mime_type="image/png")])
            assert reply.stop_reason == "end_turn"
            await until(lambda: "does not take images" in _replies(client, mark) + "".join(
                u.content.text for u in client.updates[mark:] if u.session_update == "agent_thought_chunk"))
    [request] = fake.model_requests  # the second session made no request
    body = json.dumps(request.body)
    assert "data:image/png;base64," + picture in body
    assert "the editor's unsaved notes" in body and "on disk" not in body
    assert (str(notes), None, None) in client.reads
    assert _schema_clean(log) > 5


def test_editor_forks_and_deletes_sessions_as_the_schemas_say(tmp_path: Path, editor: str) -> None:
    """``session/delete`` is in protocol version 1's stable schema, ``session/fork`` only in its
    unstable one: both are announced in ``sessionCapabilities``, and the fork exchange is checked
    against the unstable schema (everything else against the stable one)."""
    from acp_schema import schema_methods

    from ketch.state.session_lock import acquire
    from ketch.state.store import Store

    assert "session/delete" in schema_methods(1) and "session/fork" not in schema_methods(1)
    assert "session/fork" in schema_methods(1, unstable=True)
    script = [Turn(text="answer one"), Turn(text="answer in the fork")]
    with FakeProvider(script) as fake:
        first = run_editor({"steps": [
            {"op": "initialize"},
            {"op": "new"},
            {"op": "prompt", "text": "first question"},
            {"op": "fork", "id": "$sid", "as": "forked"},
            {"op": "prompt", "session": "$forked", "text": "question in the fork"},
            {"op": "list"},
            {"op": "delete", "id": "$forked"},  # open here, just used: closed, then deleted
            {"op": "list"},
            {"op": "prompt", "session": "$forked", "text": "still there?", "mayFail": True},
            {"op": "load", "id": "$forked", "mayFail": True},
        ]}, tmp_path / "first.log", fake.base_url, tmp_path, editor=editor, unstable=frozenset({"session/fork"}))
        by_op = {r["index"]: r["result"] for r in first["responses"]}
        caps = by_op[0]["agentCapabilities"]["sessionCapabilities"]
        assert caps["delete"] == {} and caps["fork"] == {}
        sid, forked = by_op[1]["sessionId"], by_op[3]["sessionId"]
        assert forked != sid and by_op[3]["modes"]["currentModeId"] == "build"
        assert {o["id"] for o in by_op[3]["configOptions"]} == {"model", "think"}
        assert {s["sessionId"] for s in by_op[5]["sessions"]} == {sid, forked}
        assert [s["sessionId"] for s in by_op[7]["sessions"]] == [sid]
        assert [(e["index"], e["op"]) for e in first["errors"]] == [(8, "prompt"), (9, "load")]
        assert user_texts(fake.model_requests[1]) == ["first question", "question in the fork"]  # the fork's history

        data_dir = Store.open().path.parent
        held = acquire(data_dir, sid)  # the session open in another ketch (the terminal, say)
        try:
            busy = run_editor({"steps": [{"op": "initialize"}, {"op": "delete", "id": sid, "mayFail": True}, {"op": "list"}]},
                              tmp_path / "busy.log", fake.base_url, tmp_path, editor=editor)
        finally:
            held.release()
        [refused] = busy["errors"]
        assert refused["op"] == "delete" and "open for writing" in json.dumps(refused["data"])
        assert [s["sessionId"] for s in busy["responses"][-1]["result"]["sessions"]] == [sid]

        last = run_editor({"steps": [
            {"op": "initialize"},
            {"op": "delete", "id": sid[:6], "mayFail": True},  # a prefix is not an id: nothing is deleted
            {"op": "delete", "id": sid},
            {"op": "list"},
            {"op": "load", "id": sid, "mayFail": True},
        ]}, tmp_path / "last.log", fake.base_url, tmp_path, editor=editor)
    assert [(e["index"], e["op"]) for e in last["errors"]] == [(1, "delete"), (4, "load")]
    by_op = {r["index"]: r["result"] for r in last["responses"]}
    assert by_op[2] == {} and by_op[3]["sessions"] == []
    with Store.open() as store:
        assert store.get_session(sid) is None and store.get_session(forked) is None
        for table in ("messages", "events"):
            assert store.connection.execute(f"SELECT COUNT(*) FROM {table} WHERE session_id IN (?, ?)",  # noqa: S608
                                            (sid, forked)).fetchone() == (0,)


def test_editor_sees_cancelled_calls_end_as_failed_saying_so_because_v1_has_no_cancelled_status(
        tmp_path: Path, editor: str) -> None:
    """The stable protocol (version 1) has no "cancelled" tool call status; the SDK's version 2
    has one but is an experimental draft (its own entrypoint), and ketch answers a client asking
    for 2 with 1. So a call the editor cancels ends ``failed`` with "Cancelled by the user.", the
    only end state valid for the version negotiated."""
    from acp_schema import _schema

    def statuses(version: int) -> set[str]:
        body = _schema(version)["$defs"]["ToolCallStatus"]
        return {v["const"] for v in body.get("oneOf", body.get("anyOf", [])) if "const" in v}

    exports = json.loads((SDK / "package.json").read_text())["exports"]
    assert statuses(1) == {"pending", "in_progress", "completed", "failed"}
    assert "cancelled" in statuses(2) and "./experimental/v2" in exports and "v1/stable" in exports["."]["import"]

    command = "echo $((6 * 6))-started; sleep 60; echo $((6 * 7))-printed"  # (output the command's text does not hold)
    script = [Turn(tool_calls=[ToolCall("shell", {"command": command}, id="s1")]), Turn(text="not reached"),
              Turn(tool_calls=[ToolCall("shell", {"command": "touch asked.txt"}, id="s2")]), Turn(text="not reached")]
    with FakeProvider(script) as fake:
        seen = run_editor({"protocolVersion": 2, "answers": ["allow_once"], "steps": [
            {"op": "initialize"}, {"op": "new"},
            {"op": "prompt", "text": "run the slow one", "cancelWhen": "36-started"},
        ]}, tmp_path / "wire.log", fake.base_url, tmp_path, editor=editor)
    assert not seen["errors"], seen["errors"]
    assert seen["responses"][0]["result"]["protocolVersion"] == 1
    assert seen["responses"][-1]["result"]["stopReason"] == "cancelled"
    ends = [u["update"] for u in seen["updates"] if u["update"]["sessionUpdate"] == "tool_call_update"
            and u["update"]["toolCallId"] == "s1" and u["update"].get("status") not in (None, "pending", "in_progress")]
    [end] = ends
    assert end["status"] == "failed"
    assert end["content"][0] == {"type": "content", "content": {"type": "text", "text": "Cancelled by the user."}}
    assert "42-printed" not in json.dumps(seen["updates"])


def test_editor_without_a_terminal_sees_live_output_in_the_tool_call(tmp_path: Path, editor: str) -> None:
    marker = tmp_path / "go"
    command = f"echo $((6 * 6))-first-chunk; while [ ! -e {marker} ]; do sleep 0.1; done; echo second-chunk"
    script = [Turn(tool_calls=[ToolCall("shell", {"command": command}, id="s1")]), Turn(text="ok")]
    with FakeProvider(script) as fake:
        seen = run_editor({"answers": ["allow_once"], "steps": [
            {"op": "initialize"}, {"op": "new"},
            {"op": "prompt", "text": "run", "touchWhen": "36-first-chunk", "touch": str(marker)},  # output, not the command
        ]}, tmp_path / "wire.log", fake.base_url, tmp_path, editor=editor)
    assert not seen["errors"], seen["errors"]
    s1 = [u["update"] for u in seen["updates"] if u["update"]["sessionUpdate"] == "tool_call_update"
          and u["update"]["toolCallId"] == "s1"]
    live = [c["content"]["text"] for u in s1 if u.get("status") == "in_progress" for c in u.get("content", [])]
    first = next(i for i, text in enumerate(live) if "36-first-chunk" in text)
    assert "second-chunk" not in live[first]  # shown while the command still ran (it waited for the file)
    assert any("second-chunk" in text for text in live[first:]) and s1[-1]["status"] == "completed"
    assert not seen["terminals"]


def test_editor_sends_images_and_linked_files_and_gets_a_clear_no_where_the_model_takes_none(
        tmp_path: Path, editor: str) -> None:
    import base64

    from kettle import write_project_config
    from test_images import png

    picture = base64.b64encode(png(3, 2)).decode()
    notes = tmp_path / "notes.txt"
    notes.write_text("on disk\n")
    blocks = [{"type": "text", "text": "what is this?"}, {"type": "image", "data": picture, "mimeType": "image/png"},
              {"type": "resource_link", "uri": notes.as_uri(), "name": "notes.txt"}]
    with FakeProvider([Turn(text="a small picture")]) as fake:
        seen = run_editor({"buffers": {str(notes): "the editor's unsaved notes\n"}, "steps": [
            {"op": "initialize"}, {"op": "new"}, {"op": "prompt", "blocks": blocks},
        ]}, tmp_path / "wire.log", fake.base_url, tmp_path, editor=editor)
        write_project_config(tmp_path, '[models."adhoc:fake-model"]\ncapabilities = { image_input = false }\n')
        blind = run_editor({"steps": [
            {"op": "initialize"}, {"op": "new"}, {"op": "prompt", "blocks": blocks[:2]},
            {"op": "waitUpdate", "kind": "agent_thought_chunk", "contains": "does not take images"},  # as ketch's errors are
        ]}, tmp_path / "blind.log", fake.base_url, tmp_path, editor=editor)
    assert seen["responses"][0]["result"]["agentCapabilities"]["promptCapabilities"]["image"] is True
    [request] = fake.model_requests  # the blind session made no request
    body = json.dumps(request.body)
    assert "data:image/png;base64," + picture in body
    assert "the editor's unsaved notes" in body and "on disk" not in body
    assert [r["path"] for r in seen["reads"]] == [str(notes)]
    assert blind["responses"][2]["result"]["stopReason"] == "end_turn"
