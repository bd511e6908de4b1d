"""Real ``ketch`` processes a test can watch and signal: ``python -m ketch`` itself, or a child
forked from an interpreter that has already imported ketch and pydantic-ai.

A headless run spends about 1.5 s of CPU importing ketch and pydantic-ai before it does
anything; a matrix that stops one process per boundary per wire cannot pay that each time. The forked
child is a process of its own (own pid, own session and process group, its own stdout and
stderr; stdin /dev/null, or stdin and stdout on pipes to the test, ``start_on_pipes``) that
runs ``ketch/__main__.py`` from its first line with the given arguments, environment and cwd, and exits as ``python -m ketch`` would (a ``SystemExit`` code,
or death by the signal a ``KeyboardInterrupt`` stands for), after what an interpreter does at its
end (its threads that are not daemons waited for, its atexit functions run; tests/test_ketch_processes.py). Only the imports (all of ketch)
and two builds a run keeps for its process (the messages' pydantic schema, the shared TLS
context) happened before: the server does nothing else (no thread, no event loop, no file left
open), and refuses to fork if a thread exists.

Both kinds lead their own process group, so ``interrupt()`` sends SIGINT to the group, as a
terminal's Ctrl-C does (the commands ketch runs lead groups of their own).

The same server also runs ``python -c CODE`` for a check that needs an interpreter with no
provider SDK loaded (it has none), and forks for processes the test started itself over a Unix
socket of its own (``fork_over_socket``: the ACP tap an editor starts as its agent). It is started
once per xdist worker, by the first test that asks for the ``preloaded_ketch`` fixture (about
1.5 CPU-s), and never in a worker whose tests do not.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

_SERVER = r"""
import atexit, json, os, runpy, signal, sys, threading
import ketch.frontends.cli, ketch.frontends.headless, ketch.frontends.assemble, ketch.frontends.acp_server  # noqa: F401
import ketch.core.session, pydantic_ai  # noqa: F401  (what a run imports; ketch's own wires load no provider SDK)
# and the rest of ketch, which a run imports as it goes (the wire, the tools, the store, the
# hooks: about 0.1 CPU-s per forked child); not __main__ (it runs ketch) nor the Harbor agent
# (Harbor's own Python)
import importlib, pkgutil, tempfile, ketch
for module in pkgutil.walk_packages(ketch.__path__, "ketch."):
    if module.name != "ketch.__main__" and not module.name.startswith("ketch.harbor."):
        importlib.import_module(module.name)
# What a run builds on first use and then keeps for the process, built once here: the messages'
# pydantic schema (the first store write) and the shared certificate-checking context (the first
# client; one per value of SSL_CERT_FILE/SSL_CERT_DIR, so a child with other values builds its
# own). About 0.1 CPU-s per child together.
from pydantic_ai.messages import ModelMessagesTypeAdapter
from ketch.wire.tls import verifying_context
ModelMessagesTypeAdapter.rebuild()
verifying_context()
if threading.active_count() != 1:
    raise SystemExit(f"the preloaded interpreter has {threading.active_count()} threads: no fork")
control_in, control_out = os.fdopen(0, "r", closefd=False), os.fdopen(1, "w", closefd=False)
control_out.write("ready\n")
control_out.flush()

def child(order, opened):
    os.setsid()
    os.chdir(order["cwd"])
    os.environ.clear()
    os.environ.update(order["env"])
    for fd, fd_opened in enumerate(opened):
        os.dup2(fd_opened, fd)
        os.close(fd_opened)
    sys.stdin = open(0, "r", closefd=False)
    sys.stdout = open(1, "w", closefd=False)
    sys.stderr = open(2, "w", closefd=False, errors="backslashreplace")
    tempfile.tempdir = None  # (None here too; a child reads its own TMPDIR)
    code, interrupted = 0, False
    try:
        if "code" in order:  # python -c CODE ARGV, in a __main__ of its own
            sys.argv = ["-c", *order["argv"]]
            main = type(sys)("__main__")
            sys.modules["__main__"] = main
            exec(compile(order["code"], "<string>", "exec"), main.__dict__)
        else:
            sys.argv = ["-m", *order["argv"]]  # as python -m sets it before run_module fills in the path
            runpy.run_module("ketch", run_name="__main__", alter_sys=True)
    except SystemExit as end:
        if end.code is None:
            code = 0
        elif isinstance(end.code, int):
            code = end.code
        else:
            print(end.code, file=sys.stderr)
            code = 1
    except KeyboardInterrupt:
        interrupted = True
    except BaseException:
        import traceback
        traceback.print_exc()
        code = 1
    # What an interpreter does at its end before it goes: wait for the threads that are not
    # daemons, then run the atexit functions (ketch's own remove its private files)
    try:
        threading._shutdown()
    except BaseException:
        pass
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except Exception:
            pass
    if interrupted:  # as an interpreter ends on an uncaught KeyboardInterrupt: by the signal
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGINT)
    os._exit(code)

def fork(order, opened):
    if threading.active_count() != 1:
        raise SystemExit("a thread appeared in the preloaded interpreter: no fork")
    pid = os.fork()
    if pid == 0:
        if listener is not None:  # the child holds none of the server's sockets
            listener.close()
            for conn in list(clients):
                conn.close()
        child(order, opened)
    for fd_opened in opened:
        os.close(fd_opened)
    return pid

# With a socket path (sys.argv[1]), a process the test started (tests/acp_wire.py, the tap an
# editor starts as its agent) can ask for a fork too: one JSON line (argv, env, cwd) with its
# stdin, stdout and stderr passed along (SCM_RIGHTS); then {"wait": pid} once that child ended.
listener, clients, unwaited = None, {}, set()
if len(sys.argv) > 1:
    import select, socket
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(sys.argv[1])
    listener.listen(16)

def wait_order(pid):
    _, status = os.waitpid(pid, 0)
    return json.dumps({"code": os.waitstatus_to_exitcode(status)}) + "\n"

def from_client(conn):
    data, fds = b"", []
    while not data.endswith(b"\n"):
        chunk, got, _, _ = socket.recv_fds(conn, 1 << 20, 3)
        fds += got
        if not chunk:  # the client is gone; a child it did not wait for is reaped once it ends
            for fd in fds:
                os.close(fd)
            pid = clients.pop(conn)
            if pid is not None:
                unwaited.add(pid)
            conn.close()
            return
        data += chunk
    order = json.loads(data)
    if "wait" in order:
        clients[conn] = None
        conn.sendall(wait_order(order["wait"]).encode())
        return
    assert len(fds) == 3, fds
    pid = fork(order, fds)
    clients[conn] = pid
    conn.sendall((json.dumps({"pid": pid}) + "\n").encode())

while True:
    if listener is not None:
        for pid in list(unwaited):
            if os.waitpid(pid, os.WNOHANG)[0]:
                unwaited.discard(pid)
        ready, _, _ = select.select([0, listener, *clients], [], [], 1 if unwaited else None)
        if listener in ready:
            conn, _ = listener.accept()
            clients[conn] = None  # (then the pid of its child until it asked to wait for it)
        for conn in [c for c in ready if c in clients]:
            from_client(conn)
        if 0 not in ready:
            continue
    line = control_in.readline()  # (one order at a time: the test waits for each answer)
    if not line:
        break
    order = json.loads(line)
    if "wait" in order:
        control_out.write(wait_order(order["wait"]))
        control_out.flush()
        continue
    # Opened here, before the fork: a path may be /proc/<test>/fd/N, a pipe end the test closes
    # as soon as it has the pid.
    opened = [os.open(path, flags, 0o600) for path, flags in (
        (order.get("stdin", os.devnull), os.O_RDONLY),
        (order["stdout"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC),
        (order["stderr"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC))]
    control_out.write(json.dumps({"pid": fork(order, opened)}) + "\n")
    control_out.flush()
"""


class KetchProcess:
    """One running ketch: its stdout lines as they come, SIGINT to its group, its exit code."""

    def __init__(self, pid: int, stdout: Path, stderr: Path, wait: Any) -> None:
        self.pid = pid
        self._stdout, self._stderr = stdout, stderr
        self._wait = wait
        self.code: int | None = None

    def events(self) -> list[dict[str, Any]]:
        """The stream-json events written so far (whole lines only)."""
        text = self._stdout.read_text(encoding="utf-8") if self._stdout.exists() else ""
        return [json.loads(line) for line in text.splitlines(keepends=True) if line.endswith("\n") and line.strip()]

    def stderr(self) -> str:
        return self._stderr.read_text(encoding="utf-8", errors="replace") if self._stderr.exists() else ""

    def interrupt(self) -> None:
        """SIGINT to the process group, as Ctrl-C in a terminal sends it."""
        os.killpg(self.pid, signal.SIGINT)

    def wait(self, timeout: float = 30) -> int:
        if self.code is None:
            self.code = self._wait(timeout)
        return self.code

    def wait_for(self, condition: Any, what: str, timeout: float = 30) -> None:
        deadline = time.monotonic() + timeout
        while not condition():
            assert self.code is None and _alive(self.pid), (what, self.events(), self.stderr())
            assert time.monotonic() < deadline, (f"never: {what}", self.events(), self.stderr())
            time.sleep(0.01)


def _alive(pid: int) -> bool:
    try:
        waited, _ = os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:  # not our child (a forked one): ask the kernel
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        return not _zombie(pid)
    return waited == 0


def _zombie(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0] == "Z"
    except OSError:
        return False


def start_exec(argv: list[str], cwd: Path, env: dict[str, str], out_dir: Path) -> KetchProcess:
    """``python -m ketch ARGV``, the binary itself."""
    stdout, stderr = out_dir / "stdout", out_dir / "stderr"
    with stdout.open("wb") as out, stderr.open("wb") as err:
        proc = subprocess.Popen([sys.executable, "-m", "ketch", *argv], cwd=cwd, env=env, stdin=subprocess.DEVNULL,
                                stdout=out, stderr=err, start_new_session=True)

    def wait(timeout: float) -> int:
        return proc.wait(timeout)

    return KetchProcess(proc.pid, stdout, stderr, wait)


class Preloaded:
    """The interpreter that has imported ketch and pydantic-ai and forks one ketch per ``start``."""

    def __init__(self) -> None:
        self._dir = tempfile.mkdtemp(prefix="ketch-preloaded-")  # 0700: only this user reaches the socket
        self.socket_path = os.path.join(self._dir, "fork.sock")
        """Where a process the test started asks for a fork of its own (``fork_over_socket``)."""
        self._proc = subprocess.Popen([sys.executable, "-c", _SERVER, self.socket_path], stdin=subprocess.PIPE,
                                      stdout=subprocess.PIPE, text=True, env={**os.environ, "PYDANTIC_AI_NO_BANNER": "1"})
        self._lock = threading.Lock()
        assert self._read() == "ready\n"

    def _read(self) -> str:
        assert self._proc.stdout is not None
        line = self._proc.stdout.readline()
        assert line, f"the preloaded interpreter ended ({self._proc.wait()})"
        return line

    def _ask(self, order: dict[str, Any]) -> dict[str, Any]:
        assert self._proc.stdin is not None
        with self._lock:
            self._proc.stdin.write(json.dumps(order) + "\n")
            self._proc.stdin.flush()
            return json.loads(self._read())

    def start(self, argv: list[str], cwd: Path, env: dict[str, str], out_dir: Path, stdin: Path | None = None,
              code: str | None = None) -> KetchProcess:
        """Fork one ketch with ARGV, ENV and CWD; its stdout and stderr are files in OUT_DIR, its
        stdin the file STDIN (/dev/null without one). With CODE, ``python -c CODE ARGV`` instead:
        an interpreter that has imported all of ketch (and no provider SDK) before the code runs."""
        stdout, stderr = out_dir / "stdout", out_dir / "stderr"
        stdout.touch()
        order = {"argv": argv, "cwd": str(cwd), "env": env, "stdout": str(stdout), "stderr": str(stderr)}
        if stdin is not None:
            order["stdin"] = str(stdin)
        if code is not None:
            order["code"] = code
        reply = self._ask(order)
        pid = reply["pid"]

        def wait(timeout: float) -> int:
            deadline = time.monotonic() + timeout
            while _alive(pid) and not _zombie(pid):
                if time.monotonic() > deadline:
                    os.killpg(pid, signal.SIGKILL)
                    raise subprocess.TimeoutExpired(f"ketch {argv}", timeout)
                time.sleep(0.01)
            return self._ask({"wait": pid})["code"]

        return KetchProcess(pid, stdout, stderr, wait)

    def start_on_pipes(self, argv: list[str], cwd: Path, env: dict[str, str], out_dir: Path) -> tuple[KetchProcess, int, int]:
        """Start one ketch whose stdin and stdout are pipes to this process, as an editor runs
        ``ketch acp``: the process, the fd to write its stdin and the fd to read its stdout
        (both this process's to close; the stdout file of the process stays empty). The
        server opens the child's ends through ``/proc/<this pid>/fd``; they are closed here
        once the child has them, so its exit is seen as EOF."""
        to_child_r, to_child_w = os.pipe()
        from_child_r, from_child_w = os.pipe()
        stdout, stderr = out_dir / "stdout", out_dir / "stderr"
        stdout.touch()
        try:
            reply = self._ask({"argv": argv, "cwd": str(cwd), "env": env, "stdin": f"/proc/{os.getpid()}/fd/{to_child_r}",
                               "stdout": f"/proc/{os.getpid()}/fd/{from_child_w}", "stderr": str(stderr)})
        except BaseException:
            for fd in (to_child_w, from_child_r):
                os.close(fd)
            raise
        finally:
            os.close(to_child_r)
            os.close(from_child_w)
        pid = reply["pid"]

        def wait(timeout: float) -> int:
            deadline = time.monotonic() + timeout
            while _alive(pid) and not _zombie(pid):
                if time.monotonic() > deadline:
                    os.killpg(pid, signal.SIGKILL)
                    self._ask({"wait": pid})
                    raise subprocess.TimeoutExpired(f"ketch {argv}", timeout)
                time.sleep(0.01)
            return self._ask({"wait": pid})["code"]

        return KetchProcess(pid, stdout, stderr, wait), to_child_w, from_child_r

    def run(self, argv: list[str], cwd: Path, env: dict[str, str], timeout: float = 180,
            input: str | None = None, code: str | None = None) -> tuple[int, str, str]:
        """Start one ketch with ARGV and wait for its end: its exit code (negative: the signal
        that ended it), stdout and stderr, as ``subprocess.run`` of the binary would give them
        (INPUT, if given, is its whole stdin, read from a file: a pipe at EOF reads the same)."""
        with tempfile.TemporaryDirectory(prefix="ketch-run-") as out:
            stdin = None
            if input is not None:
                stdin = Path(out) / "stdin"
                stdin.write_text(input, encoding="utf-8")
            proc = self.start(argv, cwd, env, Path(out), stdin, code)
            code = proc.wait(timeout)
            return code, (Path(out) / "stdout").read_text(encoding="utf-8"), (Path(out) / "stderr").read_text(encoding="utf-8")

    def close(self) -> None:
        """End the interpreter (its children were waited for; it holds nothing worth a clean exit)."""
        self._proc.kill()
        self._proc.wait()
        for stream in (self._proc.stdin, self._proc.stdout):
            if stream is not None:
                stream.close()
        shutil.rmtree(self._dir, ignore_errors=True)


def fork_over_socket(socket_path: str, argv: list[str], stdin: int, stdout: int, stderr: int) -> tuple[int, Any]:
    """From a process the test started (not the test's own): ask the preloaded interpreter at
    ``socket_path`` for a ketch with ARGV, this process's environment and cwd, and the given
    descriptors as its stdin, stdout and stderr. Its pid, and a function that waits for its end
    and gives its exit code (negative: the signal), as ``Popen.wait`` does. The child is not
    this process's: it leads a session of its own, as every preloaded fork does."""
    import socket

    conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    conn.connect(socket_path)
    reader = conn.makefile("rb")
    order = {"argv": argv, "cwd": os.getcwd(), "env": dict(os.environ)}
    socket.send_fds(conn, [json.dumps(order).encode() + b"\n"], [stdin, stdout, stderr])
    pid = json.loads(reader.readline())["pid"]

    def wait() -> int:
        while _alive(pid) and not _zombie(pid):
            time.sleep(0.02)
        conn.sendall(json.dumps({"wait": pid}).encode() + b"\n")
        code = json.loads(reader.readline())["code"]
        reader.close()
        conn.close()
        return code

    return pid, wait
