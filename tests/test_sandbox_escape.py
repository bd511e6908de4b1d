"""Escapes from the OS sandbox, each a real command through a real headless session.

Every escape runs twice on each mechanism: sandboxed (it must fail) and with
``--sandbox full-access`` (it must succeed, which proves the sandbox is what stopped it).
The shell is allowed by a rule in the user's config, so only the sandbox differs between
the two runs. What is asserted is what crossed a boundary: the file on disk, the bytes a
listener received, the process left running, the tool result the provider received.

Mechanisms: bubblewrap (the default here), Landlock (forced by ``sandbox.mechanism``), and
none (a detector that finds nothing: the fail-closed path denies every headless command).
"""

from __future__ import annotations

import os
import random
import shutil
import socket
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import psutil
import pytest
from fakeprovider import FakeProvider, ToolCall, Turn, tool_results
from isolation import own_processes_running
from kettle import adhoc, run_ketch

from ketch.sandbox import detect

WIRE = "openai-chat"
pytestmark = pytest.mark.usefixtures("subreaper")


@dataclass
class Place:
    """The workspace, a directory outside it (not under /tmp, which the sandbox makes private) and a HOME."""

    ws: Path
    outside: Path
    home: Path


@pytest.fixture
def place(tmp_path: Path) -> Iterator[Place]:
    ws = tmp_path / "ws"
    (ws / ".git" / "hooks").mkdir(parents=True)
    (ws / "src").mkdir()
    outside = Path(tempfile.mkdtemp(prefix="ketch-escape-", dir="/var/tmp"))
    home = outside / "home"
    home.mkdir()
    try:
        yield Place(ws, outside, home)
    finally:
        shutil.rmtree(outside, ignore_errors=True)


@pytest.fixture
def no_mechanism(monkeypatch: pytest.MonkeyPatch) -> None:
    """Nothing can confine: no bwrap binary, no Landlock (a code seam; no variable does this)."""
    monkeypatch.setattr(detect, "_DEFAULT", detect.Detector(bwrap_candidates=lambda: [], landlock_abi=lambda: 0))
    monkeypatch.setattr(detect, "_CACHE", {})


def _user_config(extra: str = "") -> None:
    path = Path(os.environ["KETCH_CONFIG_DIR"]) / "config.toml"
    path.write_text(f'titles = false\n{extra}\n[permissions]\nshell = "allow"\n', encoding="utf-8")


def _run(place: Place, command: str, *flags: str) -> str:
    """Run one shell command through a headless session; the tool result the provider got."""
    with FakeProvider([Turn(tool_calls=[ToolCall("shell", {"command": command})]), Turn(text="done")]) as fake:
        run = run_ketch(["-p", "go", *flags, *adhoc(fake, WIRE)], place.ws, env={"HOME": str(place.home)})
    assert run.code == 0, run.stderr
    [(_, content)] = tool_results(fake.model_requests[1])
    return content


# ---------------------------------------------------------------- the escapes
# Each: (command for the place, check that the escape happened → bool, cleanup)
Escape = Callable[[Place], tuple[str, Callable[[str], bool]]]


def write_outside(p: Place) -> tuple[str, Callable[[str], bool]]:
    target = p.outside / "written.txt"
    return f"echo pwned > {target}", lambda _out: target.exists()


def write_git_hook(p: Place) -> tuple[str, Callable[[str], bool]]:
    hook = p.ws / ".git" / "hooks" / "pre-commit"
    return f"printf '#!/bin/sh\\ntouch {p.outside}/hook-ran\\n' > .git/hooks/pre-commit", lambda _out: hook.exists()


def write_ssh(p: Place) -> tuple[str, Callable[[str], bool]]:
    keys = p.home / ".ssh" / "authorized_keys"
    return "mkdir -p ~/.ssh && echo 'ssh-ed25519 AAAA attacker' >> ~/.ssh/authorized_keys", lambda _out: keys.exists()


def symlink_out(p: Place) -> tuple[str, Callable[[str], bool]]:
    target = p.outside / "through-link.txt"
    return f"ln -s {p.outside} src/out && echo pwned > src/out/through-link.txt", lambda _out: target.exists()


def ptrace_parent(p: Place) -> tuple[str, Callable[[str], bool]]:
    code = (
        "import ctypes, os; libc = ctypes.CDLL(None, use_errno=True); "
        "r = libc.ptrace(0x4206, os.getppid(), 0, 0); "  # PTRACE_SEIZE: attaches without stopping it
        "print('ATTACHED' if r == 0 else 'REFUSED ' + os.strerror(ctypes.get_errno()))"
    )
    return f'python3 -c "{code}"', lambda out: "ATTACHED" in out


def background_left(p: Place) -> tuple[str, Callable[[str], bool]]:
    seconds = f"{random.randint(900, 999)}.{random.randint(100, 999)}"

    def survivors() -> list[psutil.Process]:
        # the test's own tree: the worker adopts what escapes (conftest's subreaper fixture)
        return own_processes_running(["sleep", seconds])

    def escaped(_out: str) -> bool:
        time.sleep(0.3)
        alive = survivors()
        for proc in alive:
            proc.kill()
        return bool(alive)

    return f"setsid nohup sleep {seconds} >/dev/null 2>&1 < /dev/null & echo started", escaped


ESCAPES: list[Escape] = [write_outside, write_git_hook, write_ssh, symlink_out, ptrace_parent, background_left]


class Listener:
    """A TCP listener on 127.0.0.1 that records what any connection sends."""

    def __init__(self) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(5)
        self.sock.settimeout(0.2)
        self.port = self.sock.getsockname()[1]
        self.received: list[bytes] = []
        self._stop = False
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        while not self._stop:
            try:
                conn, _ = self.sock.accept()
            except (TimeoutError, OSError):
                continue
            with conn:
                conn.settimeout(2)
                try:
                    self.received.append(conn.recv(100) or b"(connected)")
                except OSError:
                    self.received.append(b"(connected)")

    def close(self) -> None:
        self._stop = True
        self._thread.join(2)
        self.sock.close()


def _connect_command(port: int) -> str:
    return f"python3 -c \"import socket; s = socket.create_connection(('127.0.0.1', {port}), 3); s.sendall(b'hello'); print('SENT')\""


MECHANISMS = ["bubblewrap", "landlock"]


@pytest.mark.parametrize("mechanism", MECHANISMS)
@pytest.mark.parametrize("escape", ESCAPES, ids=lambda e: e.__name__)
def test_the_escape_fails_in_the_sandbox_and_works_with_full_access(place: Place, escape: Escape, mechanism: str) -> None:
    _user_config(f'[sandbox]\nmechanism = "{mechanism}"\n')
    command, escaped = escape(place)
    out = _run(place, command)
    assert not escaped(out), f"escaped the {mechanism} sandbox: {out}"
    assert "sandbox refused" in out or "REFUSED" in out or escape is background_left, out

    command, escaped = escape(place)
    out = _run(place, command, "--sandbox", "full-access")
    assert escaped(out), f"did not happen without the sandbox, so the test proves nothing: {out}"


@pytest.mark.parametrize("mechanism", MECHANISMS)
def test_connecting_to_a_local_listener_fails_with_the_network_off(place: Place, mechanism: str) -> None:
    _user_config(f'[sandbox]\nmechanism = "{mechanism}"\n')
    listener = Listener()
    try:
        out = _run(place, _connect_command(listener.port))
        time.sleep(0.2)
        assert listener.received == [], out
        assert "SENT" not in out and "sandbox refused" in out
        out = _run(place, _connect_command(listener.port), "--sandbox", "full-access")
        deadline = time.monotonic() + 2
        while not listener.received and time.monotonic() < deadline:
            time.sleep(0.05)
        assert listener.received == [b"hello"], out
    finally:
        listener.close()


@pytest.mark.parametrize("escape", ESCAPES, ids=lambda e: e.__name__)
def test_with_no_mechanism_headless_denies_every_command_and_full_access_runs_it(
    place: Place, escape: Escape, no_mechanism: None
) -> None:
    _user_config()
    command, escaped = escape(place)
    out = _run(place, command)
    assert not escaped(out)
    assert "No sandbox mechanism works here" in out and "--sandbox full-access" in out

    command, escaped = escape(place)
    out = _run(place, command, "--sandbox", "full-access")
    assert escaped(out), out


def test_with_no_mechanism_the_network_escape_is_denied_too(place: Place, no_mechanism: None) -> None:
    _user_config()
    listener = Listener()
    try:
        out = _run(place, _connect_command(listener.port))
        time.sleep(0.2)
        assert listener.received == [] and "No sandbox mechanism works here" in out
    finally:
        listener.close()


def test_no_mechanism_says_so_once_at_start(place: Place, no_mechanism: None) -> None:
    _user_config()
    with FakeProvider([Turn(text="hi")]) as fake:
        run = run_ketch(["-p", "hi", *adhoc(fake, WIRE)], place.ws)
    assert run.code == 0
    assert run.stderr.count("no sandbox works here") == 1, run.stderr


async def test_with_no_mechanism_the_ui_asks_even_under_an_allow_rule(place: Place, no_mechanism: None) -> None:
    import argparse

    from ketch.protocol import events as ev
    from ketch.frontends.assemble import build_session

    _user_config()
    command = "echo hi >> made.txt"
    script = [Turn(tool_calls=[ToolCall("shell", {"command": command})]), Turn(text="one")] * 2
    with FakeProvider(script) as fake:
        args = argparse.Namespace(cwd=str(place.ws), base_url=fake.base_url, wire=WIRE, model="fake-model", yolo=False, sandbox=None, approval="auto")
        session = await build_session(args, interactive=True)
        requests, notices = [], []
        try:
            for _ in range(2):
                async for event in session.run_turn("go"):
                    if isinstance(event, ev.Notice):
                        notices.append(event.text)
                    if isinstance(event, ev.ApprovalRequested):
                        requests.append(event)
                        session.decide(event.request_id, "allow_session", "")
        finally:
            await session.aclose()
    [request] = requests  # the second run of the same command: the user's answer holds
    assert request.name == "shell"
    assert (place.ws / "made.txt").read_text() == "hi\nhi\n"  # the user allowed it: it ran, unconfined
    assert sum("no sandbox works here" in n for n in notices) == 1, notices


def test_sandbox_check_says_why_nothing_works(place: Place, no_mechanism: None) -> None:
    run = run_ketch(["sandbox", "check"], place.ws)
    assert run.code == 1
    first = run.stdout.splitlines()[0]
    assert first.startswith("mechanism: none (") and "no bwrap binary" in first and "no Landlock" in first
    assert "every shell command asks" in run.stdout
    run = run_ketch(["sandbox", "check", "--sandbox", "full-access"], place.ws)
    assert run.code == 0 and "commands run unconfined" in run.stdout


def test_the_real_binary_is_sandboxed_too(place: Place) -> None:
    _user_config()
    target = place.outside / "binary.txt"
    for flags, written in (((), False), (("--sandbox", "full-access"), True)):
        with FakeProvider([Turn(tool_calls=[ToolCall("shell", {"command": f"echo x > {target}"})]), Turn(text="done")]) as fake:
            run = run_ketch(["-p", "go", *flags, *adhoc(fake, WIRE)], place.ws, env={"HOME": str(place.home)}, subprocess_=True)
        assert run.code == 0, run.stderr
        assert target.exists() is written
        assert ("Read-only file system" in tool_results(fake.model_requests[1])[-1][1]) is not written
