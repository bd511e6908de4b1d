"""Background commands end to end, with the real ``ketch`` binary and the fake provider: a
``python3 -m http.server`` on a free loopback port is started in the background, read twice,
reached by a foreground ``curl`` and killed (by ``shell_kill``, and another by ``/bashes kill ID``);
and nothing of a background command survives ``/quit``, Esc (the turn ends, the command stays the
session's, and ``/quit`` then stops it) or
``kill -9`` of ketch, also when the command left a ``setsid`` grandchild behind and also inside
the bubblewrap sandbox."""

from __future__ import annotations

import os
import re
import signal
import socket
import time
from collections import deque
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import psutil
import pytest
from fakeprovider import FakeProvider, Hold, ToolCall, Turn, tool_results
from isolation import own_processes, reserved_port
from ketch_processes import Preloaded
from kettle import adhoc, ketch_env
from tmux_pane import tmux_pane

pytestmark = pytest.mark.usefixtures("subreaper")

JOB_ID = re.compile(r"Started in the background as (bg-[0-9a-f]{6})\.")


class Script:
    """The scripted model: the session-title request (it offers no tools) is answered on the
    side; every other request gets the next step (a Turn, or a function of the request)."""

    def __init__(self, *steps: Any) -> None:
        self.steps = deque(steps)

    def __call__(self, req: Any) -> Turn:
        if not (req.body or {}).get("tools"):
            return Turn(text="A background server")
        if not self.steps:
            return Turn(text="(script exhausted)")
        step = self.steps.popleft()
        return step(req) if callable(step) else step

    def entries(self, count: int = 60) -> list[Any]:
        return [self] * count


def job_id(req: Any) -> str:
    """The id of the newest background command the request's tool results report."""
    found = [m.group(1) for _, text in tool_results(req) for m in [JOB_ID.search(text)] if m]
    assert found, f"no background id in {tool_results(req)}"
    return found[-1]


def call(name: str, **args: Any) -> Turn:
    return Turn(tool_calls=[ToolCall(name, args)])


def on_last(name: str) -> Any:
    """A step calling ``name`` on the newest background command."""
    return lambda req: call(name, id=job_id(req))


def refused(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=2):
            return False
    except ConnectionRefusedError:
        return True


def closed_within(port: int, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while not refused(port):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


def serving(port: int, seconds: float = 30.0) -> bool:
    deadline = time.monotonic() + seconds
    while refused(port):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


def servers_of(port: int, *, own: bool = False) -> list[psutil.Process]:
    """Live processes running ``http.server`` on ``port`` (this test's own tree, or anywhere)."""
    procs = own_processes() if own else list(psutil.process_iter())
    out = []
    for proc in procs:
        try:
            cmd = proc.cmdline()
            if "http.server" in cmd and str(port) in cmd and proc.status() != psutil.STATUS_ZOMBIE:
                out.append(proc)
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            continue
    return out


def gone_within(procs: list[psutil.Process], seconds: float) -> list[psutil.Process]:
    """Wait until every process in ``procs`` is gone; returns those still alive."""
    deadline = time.monotonic() + seconds
    alive = procs
    while alive and time.monotonic() < deadline:
        time.sleep(0.05)
        alive = [p for p in alive if _alive(p)]
    return alive


def _alive(proc: psutil.Process) -> bool:
    try:
        return proc.status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def server_command(port: int) -> str:
    return f"python3 -u -m http.server {port} --bind 127.0.0.1"


def orphaned_server(port: int) -> str:
    """A server whose parent exits at once, in a session of its own (``setsid``): it looks like a
    daemon; only a subreaper or a PID namespace still holds it."""
    return f"(setsid {server_command(port)} &); sleep 600"


def curl(port: int, path: str) -> str:
    return (f"for i in $(seq 100); do curl -s -o /dev/null -w 'status=%{{http_code}}\\n' "
            f"http://127.0.0.1:{port}/{path} && break; sleep 0.1; done")


# ------------------------------------------------------------------ the UI in tmux


@pytest.fixture
def pane(tmp_path: Path) -> Iterator[SimpleNamespace]:
    with tmux_pane(tmp_path, "bg", columns=160, rows=50) as opened:
        yield opened


def test_a_server_in_the_background_is_read_reached_and_killed_and_quit_or_esc_leaves_nothing(
    tmp_path: Path, pane: SimpleNamespace
) -> None:
    (tmp_path / ".git").mkdir()
    for name in ("first.txt", "second.txt"):
        (tmp_path / name).write_text(name)
    hold = Hold("after the second server started")
    with (reserved_port(reuse_address=True) as first, reserved_port(reuse_address=True) as second,
          reserved_port(reuse_address=True) as third):
        script = Script(
            Turn(text="Starting the server.", tool_calls=[ToolCall("shell", {"command": server_command(first), "background": True})]),
            call("shell", command=curl(first, "first.txt")),
            on_last("shell_output"),
            call("shell", command=curl(first, "second.txt")),
            on_last("shell_output"),
            on_last("shell_kill"),
            Turn(text="The server is stopped."),
            Turn(text="Again, and left running.", tool_calls=[ToolCall("shell", {"command": orphaned_server(second), "background": True}),
                                                               ToolCall("shell", {"command": server_command(third), "background": True})]),
            Turn(text="never shown", hold=hold),
            Turn(text="Esc stopped the turn, the server still runs."),
        )
        with FakeProvider(script.entries()) as fake:
            pane.keys(f"ketch --yolo --base-url {fake.base_url} --wire openai-chat --model fake-model", "Enter")
            pane.wait("adhoc:fake-model")
            pane.keys("serve the folder, check it, stop it", "Enter")
            shown = pane.wait("The server is stopped.")
            assert refused(first), "shell_kill left the server listening"
            assert servers_of(first) == []
            assert re.search(r"background bg-[0-9a-f]{6}\s+python3 -u -m http.server", shown), shown
            assert "stopped by shell_kill" in shown
            assert re.search(r"running in the background as bg-[0-9a-f]{6}", shown), shown

            pane.keys("serve it again and leave it", "Enter")
            assert hold.wait_reached(30)
            assert serving(second)
            running = servers_of(second)
            assert running, "the second server is not running"
            pane.keys("Escape")
            pane.wait("stopped by the user")
            hold.release()
            time.sleep(0.5)
            assert not refused(second), "Esc (the end of the turn) stopped the background command"
            assert serving(third)
            pane.wait("⚙ 2 background")
            held = fake.model_requests[-1]
            third_id = _id_of(held, -1)  # (the results come in the order of the calls)
            pane.keys(f"/bashes kill {third_id}", "Enter")
            pane.wait(f"stopped {third_id} and every process it started")
            assert closed_within(third, 10), "/bashes kill left the server listening"
            assert servers_of(third) == []
            pane.wait("⚙ 1 background")
            pane.keys("/bashes", "Enter")
            pane.wait("❯ bg-")  # the picker of running commands
            time.sleep(0.5)  # (keys in its first 0.3 s are ignored)
            pane.keys("Escape")  # close it without stopping anything
            pane.keys("/bashes kill", "Enter")
            listed = pane.wait("Background commands (/bashes kill ID stops one):")
            assert "(setsid python3 -u -m http.server" in listed
            pane.keys("/quit", "Enter")
            pane.wait("Resume with:")
            assert closed_within(second, 10), "a background server survived /quit"
            assert gone_within(running, 10) == [], "a process of the background command survived /quit"

        requests = [r for r in fake.model_requests if (r.body or {}).get("tools")]
        results = [(call_id, text) for r in requests for call_id, text in tool_results(r)]

    started, reached_first, read_one, reached_second, read_two, killed = _distinct(results)[:6]
    assert JOB_ID.search(started)
    assert "status=200" in reached_first and "status=200" in reached_second
    # the first read: the server's banner (stdout) and the first request's log line (stderr, marked)
    assert "running for" in read_one and f"Serving HTTP on 127.0.0.1 port {first}" in read_one
    assert re.search(r'^\[stderr\] 127\.0\.0\.1 - - \[.*\] "GET /first\.txt HTTP/1\.1" 200', read_one, re.M), read_one
    # the second read: only what came since the first
    assert '"GET /second.txt HTTP/1.1" 200' in read_two and "GET /first" not in read_two and "Serving HTTP" not in read_two
    assert "Stopped bg-" in killed and "stopped by shell_kill" in killed


def _id_of(req: Any, index: int) -> str:
    """The id of the ``index``-th background command the request's tool results report."""
    return [m.group(1) for _, text in tool_results(req) for m in [JOB_ID.search(text)] if m][index]


def _distinct(results: list[tuple[str, str]]) -> list[str]:
    """Each tool result once (by its call id: two curls print the same text), in the order they
    were first sent (every request repeats the earlier ones)."""
    seen: dict[str, str] = {}
    for call_id, text in results:
        seen.setdefault(call_id, text)
    return list(seen.values())


# ------------------------------------------------------------------ kill -9 of ketch


@pytest.mark.parametrize("sandbox", ["full-access", "workspace-write"])
def test_kill_9_of_ketch_stops_the_background_command_and_its_setsid_grandchild(
    tmp_path: Path, tmp_path_factory: pytest.TempPathFactory, sandbox: str, preloaded_ketch: Preloaded
) -> None:
    """ketch is a process forked from the preloaded interpreter (its own session, as a terminal's
    job; kill -9 of the binary itself: tests/test_durable_processes.py)."""
    (tmp_path / ".git").mkdir()
    out = tmp_path_factory.mktemp("out")
    hold = Hold("the request after the start")
    # processes this worker already had (a preloaded interpreter other tests fork from) are not ketch's
    earlier = set(own_processes())
    with reserved_port(reuse_address=True) as port:
        script = Script(
            Turn(text="Starting.", tool_calls=[ToolCall("shell", {"command": orphaned_server(port), "background": True})]),
            Turn(text="never", hold=hold),
        )
        with FakeProvider(script.entries(4)) as fake:
            argv = ["-p", "serve it", "--yolo", "--sandbox", sandbox, *adhoc(fake, "openai-chat")]
            ketch = preloaded_ketch.start(argv, tmp_path, ketch_env(), out)
            try:
                assert hold.wait_reached(60), ketch.stderr() or "no second request"
                assert "Started in the background as bg-" in tool_results(fake.model_requests[-1])[-1][1]
                deadline = time.monotonic() + 30
                while not (server := servers_of(port, own=True)) and time.monotonic() < deadline:
                    time.sleep(0.05)
                assert server, "the background server never started"
                tree = [p for p in psutil.Process(ketch.pid).children(recursive=True)]
                leftovers = [p for p in own_processes() if p.pid != ketch.pid and p not in tree and p not in earlier]
            finally:
                os.kill(ketch.pid, signal.SIGKILL)
                ketch.wait(10)
                hold.release()
            survivors = gone_within([*tree, *server, *leftovers], 10)
            assert survivors == [], [(p.pid, _cmdline(p)) for p in survivors]
            assert servers_of(port, own=True) == []
            if sandbox == "full-access":  # (in the sandbox the server had a network namespace of its own)
                assert refused(port)


def _cmdline(proc: psutil.Process) -> str:
    try:
        return " ".join(proc.cmdline())
    except psutil.Error:
        return "?"
