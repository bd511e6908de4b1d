"""The background-command launcher, run as its own small program:
``python -I -S reaper_exec.py PARENT_PID GRACE_S -- ARGV``.

It imports nothing but the standard library (so it starts without ``site``). It makes sure
nothing a background command starts outlives it, or outlives ketch:

- it becomes a child subreaper, so every process the command leaves behind, also one that
  double-forks and calls ``setsid`` to look like a daemon, is re-parented to it, not to init;
- it asks the kernel for SIGTERM when the thread of ketch that started it dies (``kill -9``
  of ketch included), and exits at once when ketch (``PARENT_PID``) is already gone;
- it runs ARGV in a child and waits. When the child exits, or the launcher gets SIGTERM,
  SIGHUP or SIGINT, every process below it gets SIGTERM, then after ``GRACE_S`` SIGKILL, until
  none is left; then it exits with the command's status (a command killed by a signal makes
  the launcher die of the same signal, so ketch reads the same status).
"""

from __future__ import annotations

import ctypes
import os
import signal
import sys
import time

PR_SET_PDEATHSIG, PR_SET_CHILD_SUBREAPER = 1, 36
_STOP_SIGNALS = (signal.SIGTERM, signal.SIGHUP, signal.SIGINT)


def _children(me: int) -> list[int]:
    """The pids whose parent is ``me`` (read from /proc; a process gone meanwhile is skipped)."""
    out: list[int] = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as fh:
                stat = fh.read()
        except OSError:
            continue
        fields = stat[stat.rfind(b")") + 2 :].split()
        if len(fields) > 1 and int(fields[1]) == me:
            out.append(int(name))
    return out


_exited: dict[int, int] = {}
"""Wait statuses of the children collected so far, by pid."""


class _Stop(Exception):
    """SIGTERM, SIGHUP or SIGINT arrived: stop the command."""


def _reap() -> None:
    """Collect every child that has exited (none blocks)."""
    while True:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        _exited[pid] = status


def _signal_all(me: int, sig: int) -> bool:
    """Send ``sig`` to every process below ``me`` (each child, its group and its descendants,
    which the kernel hands to this subreaper as their parents die). True when any was left."""
    _reap()
    found = False
    frontier = _children(me)
    seen: set[int] = set()
    while frontier:
        pid = frontier.pop()
        if pid in seen:
            continue
        seen.add(pid)
        found = True
        for target in (lambda: os.kill(pid, sig), lambda: os.killpg(pid, sig)):
            try:
                target()
            except OSError:
                pass
        frontier.extend(_children(pid))
    return found


def stop_tree(me: int, grace_s: float) -> None:
    """SIGTERM to everything below ``me``, SIGKILL after ``grace_s``, until nothing is left."""
    if not _signal_all(me, signal.SIGTERM):
        return
    deadline = time.monotonic() + grace_s
    while time.monotonic() < deadline:
        time.sleep(0.02)
        _reap()
        if not _children(me):
            return
    while _signal_all(me, signal.SIGKILL):
        time.sleep(0.01)
        _reap()


def main(argv: list[str]) -> int:
    if len(argv) < 4 or argv[2] != "--":
        raise SystemExit("usage: reaper_exec.py PARENT_PID GRACE_S -- ARGV")
    parent, grace_s, command = int(argv[0]), float(argv[1]), argv[3:]
    libc = ctypes.CDLL(None, use_errno=True)

    def asked(signum: int, _frame: object) -> None:
        raise _Stop

    signal.pthread_sigmask(signal.SIG_BLOCK, _STOP_SIGNALS)  # delivered inside the wait below
    for sig in _STOP_SIGNALS:
        signal.signal(sig, asked)
    libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
    libc.prctl(PR_SET_PDEATHSIG, int(signal.SIGTERM), 0, 0, 0)
    if os.getppid() != parent:  # ketch died before the death signal was armed
        return 1
    child = os.fork()
    if child == 0:
        try:
            for sig in _STOP_SIGNALS:
                signal.signal(sig, signal.SIG_DFL)
            signal.pthread_sigmask(signal.SIG_UNBLOCK, _STOP_SIGNALS)
            os.execvp(command[0], command)
        except OSError as exc:
            os.write(2, f"ketch: cannot run {command[0]}: {exc.strerror}\n".encode())
        os._exit(127)
    me = os.getpid()
    try:
        signal.pthread_sigmask(signal.SIG_UNBLOCK, _STOP_SIGNALS)
        while child not in _exited:
            try:
                pid, raw = os.waitpid(-1, 0)  # any child: orphans handed to us are collected too
            except ChildProcessError:
                break
            _exited[pid] = raw
    except _Stop:
        pass
    for sig in _STOP_SIGNALS:  # from here on a second request changes nothing
        signal.signal(sig, signal.SIG_IGN)
    stop_tree(me, grace_s)
    if child not in _exited:
        try:
            _exited[child] = os.waitpid(child, 0)[1]
        except ChildProcessError:
            pass
    status = _exited.get(child, signal.SIGKILL)  # a raw status: killed by SIGKILL when unknown
    if os.WIFSIGNALED(status):
        sig = os.WTERMSIG(status)
        signal.signal(sig, signal.SIG_DFL)
        os.kill(me, sig)
        return 128 + sig
    return os.WEXITSTATUS(status) if os.WIFEXITED(status) else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
