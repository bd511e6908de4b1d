"""An editor built on the official ACP Python SDK's client, for tests/test_acp_editor.py: the
twin of ``acp_node/editor.mjs`` (the TypeScript SDK's), taking the same JSON plan (argv[1])
and printing, as the same JSON, everything it received.

It keeps files as an editor does (its unsaved buffers first, saving to disk on a write), runs
commands in terminals of its own when it offers them, and answers permissions from the plan.
The SDK's client has a typed method for every step but ``session/delete``, which it knows as a
type and does not send: that one goes through its connection's own request call."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import urllib.request
from pathlib import Path
from typing import Any

from acp import RequestError, spawn_agent_process
from acp.schema import (
    AllowedOutcome,
    ClientCapabilities,
    CreateTerminalResponse,
    DeleteSessionRequest,
    DeleteSessionResponse,
    FileSystemCapabilities,
    Implementation,
    KillTerminalResponse,
    ReadTextFileResponse,
    ReleaseTerminalResponse,
    RequestPermissionResponse,
    TerminalExitStatus,
    TerminalOutputResponse,
    WaitForTerminalExitResponse,
    WriteTextFileResponse,
)


def dump(value: Any) -> Any:
    """A received or returned model as the JSON on the wire (camelCase, no nulls)."""
    if value is None:
        return None
    if isinstance(value, list):
        return [dump(v) for v in value]
    return value.model_dump(by_alias=True, exclude_none=True, mode="json")


class Terminal:
    def __init__(self, tid: str, params: dict[str, Any], process: asyncio.subprocess.Process) -> None:
        self.tid, self.params, self.process = tid, params, process
        self.output = ""
        self.exit: dict[str, Any] | None = None
        self.killed = self.released = False
        self.polled = 0
        self.done = asyncio.get_running_loop().create_task(self._pump())

    async def _pump(self) -> None:
        assert self.process.stdout is not None
        while chunk := await self.process.stdout.read(4096):
            self.output += chunk.decode(errors="replace")
        code = await self.process.wait()
        self.exit = {"exitCode": code, "signal": None} if code >= 0 else {"exitCode": None,
                                                                          "signal": signal.Signals(-code).name}

    def seen(self) -> dict[str, Any]:
        return {"id": self.tid, "params": self.params, "output": self.output, "exit": self.exit, "killed": self.killed,
                "released": self.released, "polled": self.polled}


class Editor:
    """The client side: what the SDK calls when the agent asks or tells something."""

    def __init__(self, plan: dict[str, Any]) -> None:
        self.plan = plan
        self.seen: dict[str, Any] = {"updates": [], "responses": [], "errors": [], "writes": [], "reads": [],
                                     "permissions": [], "terminals": [], "timings": {}}
        self.buffers: dict[str, str] = dict(plan.get("buffers") or {})
        self.answers = list(plan.get("answers") or [])
        self.terminals: dict[str, Terminal] = {}

    def on_connect(self, conn: Any) -> None:
        pass

    async def session_update(self, session_id: str, update: Any, **_: Any) -> None:
        self.seen["updates"].append({"sessionId": session_id, "update": dump(update)})

    async def request_permission(self, session_id: str, tool_call: Any, options: list[Any], **_: Any) -> Any:
        self.seen["permissions"].append({"sessionId": session_id, "toolCall": dump(tool_call), "options": dump(options)})
        option = self.answers.pop(0) if self.answers else "reject_once"
        return RequestPermissionResponse(outcome=AllowedOutcome(outcome="selected", option_id=option))

    async def read_text_file(self, session_id: str, path: str, line: int | None = None, limit: int | None = None,
                             **_: Any) -> Any:
        self.seen["reads"].append({k: v for k, v in {"sessionId": session_id, "path": path, "line": line,
                                                     "limit": limit}.items() if v is not None})
        text = self.buffers[path] if path in self.buffers else Path(path).read_text()
        lines = text.splitlines(keepends=True)[(line or 1) - 1:]
        return ReadTextFileResponse(content="".join(lines[:limit] if limit else lines))

    async def write_text_file(self, session_id: str, path: str, content: str, **_: Any) -> Any:
        self.seen["writes"].append({"sessionId": session_id, "path": path, "content": content})
        self.buffers[path] = content
        Path(path).write_text(content)
        return WriteTextFileResponse()

    async def create_terminal(self, session_id: str, command: str, args: list[str] | None = None, env: Any = None,
                              cwd: str | None = None, output_byte_limit: int | None = None, **_: Any) -> Any:
        params = {"sessionId": session_id, "command": command, "args": list(args or []), "env": dump(env or []), "cwd": cwd}
        tid = f"term-{len(self.terminals) + 1}"
        environ = dict(os.environ) | {v.name: v.value for v in env or []}
        process = await asyncio.create_subprocess_exec(command, *(args or []), cwd=cwd or self.plan["cwd"], env=environ,
                                                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        self.terminals[tid] = Terminal(tid, params, process)
        return CreateTerminalResponse(terminal_id=tid)

    async def terminal_output(self, session_id: str, terminal_id: str, **_: Any) -> Any:
        term = self.terminals[terminal_id]
        term.polled += 1
        status = TerminalExitStatus(exit_code=term.exit["exitCode"], signal=term.exit["signal"]) if term.exit else None
        return TerminalOutputResponse(output=term.output, truncated=False, exit_status=status)

    async def wait_for_terminal_exit(self, session_id: str, terminal_id: str, **_: Any) -> Any:
        term = self.terminals[terminal_id]
        await term.done
        assert term.exit is not None
        return WaitForTerminalExitResponse(exit_code=term.exit["exitCode"], signal=term.exit["signal"])

    async def kill_terminal(self, session_id: str, terminal_id: str, **_: Any) -> Any:
        term = self.terminals[terminal_id]
        term.killed = True
        if term.process.returncode is None:
            term.process.kill()
        return KillTerminalResponse()

    async def release_terminal(self, session_id: str, terminal_id: str, **_: Any) -> Any:
        term = self.terminals[terminal_id]
        term.released = True
        if term.process.returncode is None:
            term.process.kill()
        return ReleaseTerminalResponse()


async def until(predicate: Any, seconds: float = 120.0) -> None:
    for _ in range(int(seconds / 0.02)):
        if predicate():
            return
        await asyncio.sleep(0.02)
    raise TimeoutError("timed out waiting")


async def run(plan: dict[str, Any], editor: Editor) -> None:
    seen, cwd = editor.seen, plan["cwd"]
    names: dict[str, str] = {}

    def sub(value: Any) -> Any:
        return names.get(value[1:]) if isinstance(value, str) and value.startswith("$") else value

    def updated(kind: str, contains: str | None) -> bool:
        return any(u["update"]["sessionUpdate"] == kind and (not contains or contains in json.dumps(u["update"],
                                                                                                    separators=(",", ":")))
                   for u in seen["updates"])

    loop = asyncio.get_running_loop()
    async with spawn_agent_process(editor, plan["command"][0], *plan["command"][1:], cwd=cwd,
                                   env=dict(os.environ)) as (conn, _process):
        for index, step in enumerate(plan["steps"]):
            op = step["op"]
            result: Any = None
            try:
                if op == "initialize":
                    result = await conn.initialize(
                        protocol_version=plan.get("protocolVersion") or 1, client_info=Implementation(name="ketch-e2e-editor", version="1"),
                        client_capabilities=ClientCapabilities(fs=FileSystemCapabilities(read_text_file=True, write_text_file=True),
                                                               terminal=bool(plan.get("terminal"))))
                    seen["timings"]["initialized"] = loop.time()
                elif op == "new":
                    result = await conn.new_session(cwd=cwd, mcp_servers=[])
                    seen["timings"]["newAfterInitializeMs"] = (loop.time() - seen["timings"]["initialized"]) * 1000
                    names[step.get("as", "sid")] = result.session_id
                elif op == "prompt":
                    result = await prompt(conn, step, sub(step.get("session", "$sid")), lambda text: updated_text(seen, text))
                elif op == "load":
                    result = await conn.load_session(cwd=cwd, session_id=sub(step["id"]), mcp_servers=[])
                elif op == "resume":
                    result = await conn.resume_session(cwd=cwd, session_id=sub(step["id"]), mcp_servers=[])
                elif op == "fork":
                    result = await conn.fork_session(cwd=cwd, session_id=sub(step["id"]), mcp_servers=[])
                    if step.get("as"):
                        names[step["as"]] = result.session_id
                elif op == "list":
                    result = await conn.list_sessions(cwd=cwd)
                elif op == "close":
                    result = await conn.close_session(session_id=sub(step["id"]))
                elif op == "delete":  # the SDK's client has no delete_session: its own connection sends it
                    request = DeleteSessionRequest(session_id=sub(step["id"]))
                    raw = await conn._conn.send_request("session/delete", dump(request))  # noqa: SLF001
                    result = DeleteSessionResponse.model_validate(raw or {})
                elif op == "setMode":
                    result = await conn.set_session_mode(session_id=sub("$sid"), mode_id=step["mode"])
                elif op == "setOption":
                    result = await conn.set_config_option(config_id=step["id"], session_id=sub("$sid"), value=step["value"])
                elif op == "authenticate":
                    result = await conn.authenticate(method_id=step["method"])
                elif op == "waitUpdate":
                    await until(lambda step=step: updated(step["kind"], step.get("contains")))
                elif op == "fetch":
                    await asyncio.to_thread(lambda url=step["url"]: urllib.request.urlopen(url, timeout=60).read())  # noqa: S310
                elif op == "run":
                    ran = await asyncio.to_thread(subprocess.run, step["argv"], cwd=cwd, input=(step.get("input") or "").encode(),
                                                  capture_output=True, check=False)
                    result = {"status": ran.returncode}
                elif op == "sleep":
                    await asyncio.sleep(step["ms"] / 1000)
                else:
                    raise ValueError(f"no step {op}")
                seen["responses"].append({"index": index, "op": op, "result": result if isinstance(result, dict) or result is None
                                          else dump(result)})
            except RequestError as error:
                seen["errors"].append({"index": index, "op": op, "code": error.code, "message": str(error), "data": error.data})
                if not step.get("mayFail"):
                    raise


def updated_text(seen: dict[str, Any], text: str) -> bool:
    return any(text in json.dumps(u["update"], separators=(",", ":"), ensure_ascii=False) for u in seen["updates"])


async def prompt(conn: Any, step: dict[str, Any], session_id: str, seen_text: Any) -> Any:
    from acp.schema import PromptRequest

    blocks = PromptRequest.model_validate({"sessionId": session_id, "prompt": step.get("blocks") or
                                           [{"type": "text", "text": step["text"]}]}).prompt
    pending = asyncio.ensure_future(conn.prompt(session_id=session_id, prompt=blocks))
    if step.get("touchWhen"):  # the user does something while the turn runs: a file appears
        await until(lambda: seen_text(step["touchWhen"]))
        Path(step["touch"]).touch()
    if step.get("cancelWhen"):
        await until(lambda: seen_text(step["cancelWhen"]))
        await conn.cancel(session_id=session_id)
    return await pending


def main() -> int:
    plan = json.loads(sys.argv[1])
    editor = Editor(plan)
    try:
        asyncio.run(run(plan, editor))
        return 0
    finally:
        editor.seen["terminals"] = [t.seen() for t in editor.terminals.values()]
        sys.stdout.write(json.dumps(editor.seen))


if __name__ == "__main__":
    sys.exit(main())
