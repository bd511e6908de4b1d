"""``ketch acp`` as an editor runs it: a subprocess on real pipes, driven by the official
SDK's client side, against the fake provider. Assertions are on the JSON-RPC the client
received (updates, permission requests, file writes) and on the files on disk."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import tempfile
from pathlib import Path
from typing import Any

import pytest

acp = pytest.importorskip("acp")
from acp import PROTOCOL_VERSION, text_block  # noqa: E402
from acp.client.connection import ClientSideConnection  # noqa: E402
from acp.schema import (  # noqa: E402
    AllowedOutcome,
    ClientCapabilities,
    FileSystemCapabilities,
    ReadTextFileResponse,
    RequestPermissionResponse,
    WriteTextFileResponse,
)
from fakeprovider import FakeProvider, ToolCall, Turn, user_texts  # noqa: E402
from kettle import adhoc, ketch_env, run_ketch  # noqa: E402


class EditorClient:
    """What an editor does: records every update, answers permissions from a script, and
    keeps the files (writing them to disk as an editor saving its buffer would)."""

    def __init__(self, answers: list[str]) -> None:
        self.updates: list[Any] = []
        self.permissions: list[Any] = []
        self.writes: list[tuple[str, str]] = []
        self.reads: list[str] = []
        self.answers = answers
        self.buffers: dict[str, str] = {}
        self.hold_permission = asyncio.Event()
        self.hold_permission.set()

    async def request_permission(self, session_id: str, tool_call: Any, options: list[Any], **_: Any) -> Any:
        self.permissions.append((tool_call, [o.option_id for o in options]))
        await self.hold_permission.wait()
        return RequestPermissionResponse(outcome=AllowedOutcome(outcome="selected", option_id=self.answers.pop(0)))

    async def session_update(self, session_id: str, update: Any, **_: Any) -> None:
        self.updates.append(update)

    async def write_text_file(self, session_id: str, path: str, content: str, **_: Any) -> Any:
        self.writes.append((path, content))
        Path(path).write_text(content)
        return WriteTextFileResponse()

    async def read_text_file(self, session_id: str, path: str, line: int | None = None, limit: int | None = None, **_: Any) -> Any:
        self.reads.append((path, line, limit))
        text = self.buffers[path] if path in self.buffers else Path(path).read_text()
        lines = text.splitlines(keepends=True)[(line or 1) - 1:]
        return ReadTextFileResponse(content="".join(lines[:limit] if limit else lines))

    def on_connect(self, conn: Any) -> None:
        pass

    def kinds(self) -> list[str]:
        return [u.session_update for u in self.updates]

    def text(self, kind: str = "agent_message_chunk") -> str:
        return "".join(u.content.text for u in self.updates if u.session_update == kind)


async def until(predicate: Any, timeout: float = 120.0) -> None:
    """Notifications are handled as they arrive, not before the response: wait for them (a
    liveness limit: a session is built after session/new answers, slowly on a loaded machine)."""
    for _ in range(int(timeout / 0.02)):
        if predicate():
            return
        await asyncio.sleep(0.02)
    raise AssertionError("timed out")


@contextlib.asynccontextmanager
async def _start(preloaded: Any, client: EditorClient, fake: FakeProvider, cwd: Path, *extra: str) -> Any:
    """``ketch acp`` on real pipes, its own process, forked from the interpreter that has already
    imported ketch (``ketch_processes.Preloaded``: the imports are paid once per worker, not per
    test; tests/test_acp_editor.py drives the binary itself). Ends as the SDK's spawn does: the
    connection closed, then stdin, then the process waited for."""
    with tempfile.TemporaryDirectory(prefix="ketch-acp-") as out:
        process, to_agent, from_agent = preloaded.start_on_pipes(["acp", *adhoc(fake, "openai-chat"), *extra],
                                                                 cwd, ketch_env(), Path(out))
        loop = asyncio.get_running_loop()
        reader = asyncio.StreamReader(limit=2**20)
        await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), os.fdopen(from_agent, "rb", 0))
        transport, protocol = await loop.connect_write_pipe(asyncio.streams.FlowControlMixin, os.fdopen(to_agent, "wb", 0))
        writer = asyncio.StreamWriter(transport, protocol, None, loop)
        conn = ClientSideConnection(client, writer, reader)
        try:
            yield conn, process
        finally:
            await conn.close()
            writer.close()  # (the pipe closes on the loop's next turn: the wait runs in a thread)
            try:  # stdin at EOF: ketch acp ends (a liveness limit, then SIGKILL)
                await asyncio.to_thread(process.wait, 60)
            finally:
                reader_transport = getattr(reader, "_transport", None)
                if reader_transport is not None:
                    reader_transport.close()


async def _initialize(conn: Any) -> Any:
    return await conn.initialize(
        protocol_version=PROTOCOL_VERSION,
        client_capabilities=ClientCapabilities(fs=FileSystemCapabilities(read_text_file=True, write_text_file=True)),
    )


async def test_a_session_streams_asks_writes_through_the_editor_plans_and_cancels(tmp_path: Path, preloaded_ketch: Any) -> None:
    (tmp_path / "notes.txt").write_text("on disk\n")
    script = [
        Turn(text="Writing the notes.", tool_calls=[ToolCall("write_file", {"path": "notes.txt", "content": "from the model\n"}, id="w1")]),
        Turn(tool_calls=[ToolCall("todo_write", {"todos": [{"content": "write notes", "status": "completed"},
                                                           {"content": "run check", "status": "pending"}]}, id="t1")]),
        Turn(text="Notes written."),
        Turn(tool_calls=[ToolCall("shell", {"command": f"touch {tmp_path / 'ran-marker'}"}, id="s1")]),
        Turn(text="Understood, not running it."),
        Turn(text=" ".join(f"word{i}" for i in range(400)), chunk_delay=0.05),
    ]
    client = EditorClient([ "allow_once", "reject_once"])
    with FakeProvider(script) as fake:
        async with _start(preloaded_ketch, client, fake, tmp_path) as (conn, process):
            init = await _initialize(conn)
            assert init.agent_capabilities.load_session is True
            new = await conn.new_session(cwd=str(tmp_path), mcp_servers=[])
            sid = new.session_id
            assert {m.id for m in new.modes.available_modes} >= {"build", "plan"}

            first = await conn.prompt(session_id=sid, prompt=[text_block("write the notes")])
            assert first.stop_reason == "end_turn"
            assert "Writing the notes." in client.text() and "Notes written." in client.text()
            assert client.writes == [(str(tmp_path / "notes.txt"), "from the model\n")]  # through fs/write_text_file
            assert (tmp_path / "notes.txt").read_text() == "from the model\n"
            [(call, options)] = client.permissions
            assert call.tool_call_id == "w1" and options == ["allow_once", "allow_always", "reject_once"]
            plans = [u for u in client.updates if u.session_update == "plan"]
            assert [(e.content, e.status) for e in plans[-1].entries] == [("write notes", "completed"), ("run check", "pending")]
            starts = [u for u in client.updates if u.session_update == "tool_call"]
            assert starts[0].tool_call_id == "w1" and starts[0].kind == "edit"
            done = [u for u in client.updates if u.session_update == "tool_call_update" and u.tool_call_id == "w1"]
            assert done[-1].status == "completed" and any(c.type == "diff" for c in done[-1].content)

            second = await conn.prompt(session_id=sid, prompt=[text_block("run the check")])
            assert second.stop_reason == "end_turn"
            assert not (tmp_path / "ran-marker").exists()  # rejected in the editor: never ran
            rejected = [u for u in client.updates if u.session_update == "tool_call_update" and u.tool_call_id == "s1"]
            assert rejected[-1].status == "failed"

            streaming = asyncio.ensure_future(conn.prompt(session_id=sid, prompt=[text_block("write a lot")]))
            await until(lambda: "word5" in client.text())
            await conn.cancel(session_id=sid)
            third = await asyncio.wait_for(streaming, 30)
            assert third.stop_reason == "cancelled"
            assert "word399" not in client.text()
    assert user_texts(fake.model_requests[3]) == ["write the notes", "run the check"]


async def test_a_cancel_withdraws_a_pending_permission_request(tmp_path: Path, preloaded_ketch: Any) -> None:
    script = [Turn(tool_calls=[ToolCall("shell", {"command": f"touch {tmp_path / 'ran-marker'}"}, id="s1")]), Turn(text="ok")]
    client = EditorClient(["allow_once"])
    client.hold_permission.clear()  # the editor never answers
    with FakeProvider(script) as fake:
        async with _start(preloaded_ketch, client, fake, tmp_path) as (conn, _process):
            await _initialize(conn)
            sid = (await conn.new_session(cwd=str(tmp_path), mcp_servers=[])).session_id
            pending = asyncio.ensure_future(conn.prompt(session_id=sid, prompt=[text_block("run it")]))
            await until(lambda: client.permissions)
            await conn.cancel(session_id=sid)
            result = await asyncio.wait_for(pending, 30)
            assert result.stop_reason == "cancelled"
            client.hold_permission.set()
            await asyncio.sleep(0.3)
    assert not (tmp_path / "ran-marker").exists()


async def test_session_load_replays_a_headless_session_and_the_next_prompt_continues_it(tmp_path: Path, preloaded_ketch: Any) -> None:
    (tmp_path / "a.txt").write_text("alpha\n")
    with FakeProvider([Turn(tool_calls=[ToolCall("read_file", {"path": "a.txt"}, id="r1")]), Turn(text="It says alpha.")]) as fake:
        run = run_ketch(["-p", "what is in a.txt", "--output-format", "json", *adhoc(fake, "openai-chat")], tmp_path,
                        forked_from=preloaded_ketch)  # (this test's event loop is running: a ketch process of its own)
    sid = json.loads(run.stdout)["session_id"]
    assert run.code == 0 and sid, run.stderr
    client = EditorClient([])
    with FakeProvider([Turn(text="Still alpha.")]) as fake:
        async with _start(preloaded_ketch, client, fake, tmp_path) as (conn, _process):
            await _initialize(conn)
            await conn.load_session(cwd=str(tmp_path), session_id=sid, mcp_servers=[])
            await until(lambda: "It says alpha." in client.text())
            assert client.text("user_message_chunk") == "what is in a.txt"
            assert "It says alpha." in client.text()
            assert any(u.session_update == "tool_call" and u.tool_call_id == "r1" for u in client.updates)
            reply = await conn.prompt(session_id=sid, prompt=[text_block("and now?")])
            assert reply.stop_reason == "end_turn"
    [request] = fake.model_requests
    assert user_texts(request) == ["what is in a.txt", "and now?"]
    assert not fake.rejections


async def test_guards_still_refuse_and_rules_still_decide_without_asking(tmp_path: Path, preloaded_ketch: Any) -> None:
    (tmp_path / ".ketch").mkdir()
    user_config = Path(ketch_env()["KETCH_CONFIG_DIR"]) / "config.toml"
    user_config.write_text(user_config.read_text() + '\n[permissions]\nshell = { "echo *" = "allow" }\n\n'
                           '[[guards]]\nkind = "command_prefix"\nprefix = "git push"\nreason = "pushing is done by hand"\n')
    script = [
        Turn(tool_calls=[ToolCall("shell", {"command": "echo allowed"}, id="s1"),
                         ToolCall("shell", {"command": "git push origin main"}, id="s2")]),
        Turn(text="done"),
    ]
    client = EditorClient([])
    with FakeProvider(script) as fake:
        async with _start(preloaded_ketch, client, fake, tmp_path) as (conn, _process):
            await _initialize(conn)
            sid = (await conn.new_session(cwd=str(tmp_path), mcp_servers=[])).session_id
            await conn.prompt(session_id=sid, prompt=[text_block("go")])
    assert client.permissions == []  # neither asked: the rule allowed one, the guard refused the other
    results = {u.tool_call_id: u.status for u in client.updates if u.session_update == "tool_call_update" and u.status}
    assert results["s1"] == "completed" and results["s2"] == "failed"


async def test_loading_a_session_that_is_not_there_is_an_error_not_a_new_session(tmp_path: Path, preloaded_ketch: Any) -> None:
    client = EditorClient([])
    with FakeProvider([]) as fake:
        async with _start(preloaded_ketch, client, fake, tmp_path) as (conn, _process):
            await _initialize(conn)
            for missing in ("", "nope-not-a-session"):
                with pytest.raises(acp.RequestError):
                    await conn.load_session(cwd=str(tmp_path), session_id=missing, mcp_servers=[])
            with pytest.raises(acp.RequestError):
                await conn.prompt(session_id="nope", prompt=[text_block("hi")])
    assert fake.model_requests == []


async def test_plan_mode_narrows_the_tools_the_model_is_offered(tmp_path: Path, preloaded_ketch: Any) -> None:
    from fakeprovider import tool_names

    client = EditorClient([])
    with FakeProvider([Turn(text="planned"), Turn(text="built")]) as fake:
        async with _start(preloaded_ketch, client, fake, tmp_path) as (conn, _process):
            await _initialize(conn)
            sid = (await conn.new_session(cwd=str(tmp_path), mcp_servers=[])).session_id
            await conn.set_session_mode(session_id=sid, mode_id="plan")
            await conn.prompt(session_id=sid, prompt=[text_block("plan it")])
            await conn.set_session_mode(session_id=sid, mode_id="build")
            await conn.prompt(session_id=sid, prompt=[text_block("build it")])
            with pytest.raises(acp.RequestError):
                await conn.set_session_mode(session_id=sid, mode_id="no-such-agent")
            await until(lambda: any(u.session_update == "current_mode_update" for u in client.updates))
    planned, built = (set(tool_names(r)) for r in fake.model_requests)
    assert "write_file" not in planned and "shell" not in planned and "read_file" in planned
    assert {"write_file", "shell"} <= built


async def test_the_slash_commands_are_advertised(tmp_path: Path, preloaded_ketch: Any) -> None:
    client = EditorClient([])
    with FakeProvider([]) as fake:
        async with _start(preloaded_ketch, client, fake, tmp_path) as (conn, _process):
            await _initialize(conn)
            await conn.new_session(cwd=str(tmp_path), mcp_servers=[])
            await until(lambda: any(u.session_update == "available_commands_update" for u in client.updates))
    [update] = [u for u in client.updates if u.session_update == "available_commands_update"]
    names = {c.name for c in update.available_commands}
    assert {"compact", "commit", "memory"} <= names and "quit" not in names


async def test_the_model_and_thinking_level_are_session_config_options(tmp_path: Path, preloaded_ketch: Any) -> None:
    client = EditorClient([])
    with FakeProvider([Turn(text="one"), Turn(text="two")]) as fake:
        async with _start(preloaded_ketch, client, fake, tmp_path) as (conn, _process):
            await _initialize(conn)
            new = await conn.new_session(cwd=str(tmp_path), mcp_servers=[])
            options = {o.id: o for o in new.config_options}
            assert options["model"].current_value == "adhoc:fake-model" and options["model"].category == "model"
            assert {o.value for o in options["think"].options} >= {"off", "high"}
            changed = await conn.set_config_option(config_id="think", session_id=new.session_id, value="high")
            assert {o.id: o.current_value for o in changed.config_options}["think"] == "high"
            with pytest.raises(acp.RequestError):
                await conn.set_config_option(config_id="think", session_id=new.session_id, value="extreme")
            with pytest.raises(acp.RequestError):
                await conn.set_config_option(config_id="model", session_id=new.session_id, value="nosuchconnection:x")
            await conn.prompt(session_id=new.session_id, prompt=[text_block("hi")])
    assert fake.model_requests  # the session still answers after a refused switch


async def test_reads_see_the_editors_unsaved_buffer_and_ask_only_for_the_lines_wanted(tmp_path: Path, preloaded_ketch: Any) -> None:
    from fakeprovider import tool_results

    (tmp_path / "big.py").write_text("".join(f"disk {i}\n" for i in range(1, 5001)))
    client = EditorClient([])
    client.buffers[str(tmp_path / "big.py")] = "".join(f"buffer {i}\n" for i in range(1, 5001))
    script = [Turn(tool_calls=[ToolCall("read_file", {"path": "big.py", "offset": 4000, "limit": 3}, id="r1"),
                               ToolCall("read_file", {"path": "big.py", "offset": 999999999, "limit": 1}, id="r2")]),
              Turn(text="ok")]
    with FakeProvider(script) as fake:
        async with _start(preloaded_ketch, client, fake, tmp_path) as (conn, _process):
            await _initialize(conn)
            sid = (await conn.new_session(cwd=str(tmp_path), mcp_servers=[])).session_id
            await conn.prompt(session_id=sid, prompt=[text_block("read")])
    results = dict(tool_results(fake.model_requests[1]))
    assert "buffer 4000" in results["r1"] and "buffer 4002" in results["r1"] and "buffer 4003" not in results["r1"]
    assert "disk" not in results["r1"] and "offset=4003" in results["r1"]
    assert "past the end" in results["r2"]
    assert (str(tmp_path / "big.py"), 4000, 4) in client.reads  # only the range, never the whole file


async def test_a_permission_request_says_why_the_allow_rule_did_not_cover_it(tmp_path: Path, preloaded_ketch: Any) -> None:
    user_config = Path(ketch_env()["KETCH_CONFIG_DIR"]) / "config.toml"
    user_config.write_text(user_config.read_text() + '\n[permissions]\nshell = { "echo *" = "allow" }\n')
    script = [Turn(tool_calls=[ToolCall("shell", {"command": "echo hi > out.txt"}, id="s1")]), Turn(text="done")]
    client = EditorClient(["reject_once"])
    with FakeProvider(script) as fake:
        async with _start(preloaded_ketch, client, fake, tmp_path) as (conn, _process):
            await _initialize(conn)
            sid = (await conn.new_session(cwd=str(tmp_path), mcp_servers=[])).session_id
            await conn.prompt(session_id=sid, prompt=[text_block("go")])
    [(call, _options)] = client.permissions
    [why] = [c.content.text for c in call.content]
    assert why.startswith("Why it asks: ") and "out.txt" in why, why
    assert not (tmp_path / "out.txt").exists()
