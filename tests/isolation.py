"""What keeps one test apart from the tests running beside it (pytest-xdist workers, other suites).

- ``reserved_port()``: a loopback port held for the test (bound, never listening) until a server
  bound with SO_REUSEPORT has it, or, left unserved, a port that refuses every connection.
  Binding port 0 and closing the socket before use lets another process take the port.
- ``own_processes()``: the processes of this test's own tree. Under conftest's ``subreaper``
  fixture the worker is a child subreaper (``become_subreaper``), so a process orphaned by the
  test (``(sleep 9 &)``) is re-parented to the worker instead of init and is still found here;
  a scan of every process on the machine could find, and kill, another suite's processes.
- ``reap(proc)``: collects an orphan the worker inherited once it has exited.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import socket
import sys
from collections.abc import Iterator

import psutil

_PR_SET_CHILD_SUBREAPER = 36


def become_subreaper() -> None:
    """Make this process the reaper of its orphaned descendants (Linux; elsewhere a no-op)."""
    if sys.platform != "linux":
        return
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_CHILD_SUBREAPER) failed")


def stop_subreaping() -> None:
    """Undo ``become_subreaper``."""
    if sys.platform != "linux":
        return
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(_PR_SET_CHILD_SUBREAPER, 0, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_CHILD_SUBREAPER, 0) failed")


@contextlib.contextmanager
def reserved_port(*, reuse_address: bool = False) -> Iterator[int]:
    """A port on 127.0.0.1 that no other process can bind while the block runs.

    The socket is bound with SO_REUSEPORT and never listens: a server of the same user that
    binds the port with SO_REUSEPORT too (``FakeProvider.start(port)``) shares it; a connection
    while nobody listens is refused. ``reuse_address`` sets SO_REUSEADDR too, so that a server
    that sets only that (``python3 -m http.server``) may listen on it."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
        if reuse_address:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(("127.0.0.1", 0))
        yield sock.getsockname()[1]


@contextlib.contextmanager
def refused_port() -> Iterator[int]:
    """A port on 127.0.0.1 where every connection is refused while the block runs (bound, not
    listening, without SO_REUSEPORT: nothing else can bind it)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        yield sock.getsockname()[1]


def own_processes() -> list[psutil.Process]:
    """Every live descendant of this process (the test's own tree, orphans included)."""
    found = []
    for proc in psutil.Process().children(recursive=True):
        try:
            if proc.status() != psutil.STATUS_ZOMBIE:
                found.append(proc)
        except psutil.NoSuchProcess:
            continue
    return found


def own_processes_running(cmdline: list[str]) -> list[psutil.Process]:
    """The live processes of this test's tree whose command line is exactly ``cmdline``."""
    found = []
    for proc in own_processes():
        try:
            if proc.cmdline() == cmdline:
                found.append(proc)
        except psutil.NoSuchProcess:
            continue
    return found


def reap(proc: psutil.Process) -> None:
    """Kill ``proc`` if it still runs, and collect its exit if it is this process's child."""
    with contextlib.suppress(psutil.NoSuchProcess):
        proc.kill()
    with contextlib.suppress(ChildProcessError, psutil.NoSuchProcess, psutil.TimeoutExpired):
        if proc.ppid() == os.getpid():
            os.waitpid(proc.pid, 0)
