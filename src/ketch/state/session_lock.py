"""One writer per session: a process that stores a session holds its lock file until it ends.

The lock is an ``flock`` on ``locks/<session id>.lock`` next to the store, so the kernel drops it
the moment its holder dies (``kill -9`` included) and the next ketch takes it over. The file
also records the holder (pid, host, start time) for the refusal's message. A lock whose file
says its holder is a process of this host that no longer runs is stale (a descendant kept the
descriptor, or locking is not supported on that file system): it is broken and taken over.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import socket
import time
from pathlib import Path
from typing import Any

from ketch.protocol import strict_json
from ketch.state.store_errors import StoreError

try:
    import fcntl
except ImportError:  # pragma: no cover - Windows: the record alone decides
    fcntl = None  # type: ignore[assignment]


class SessionBusy(StoreError):
    """The session is open for writing in another ketch (the message offers ``--fork``)."""


class SessionLock:
    """The held lock of one session; ``release`` (or the process ending) frees it."""

    def __init__(self, path: Path, fd: int, session_id: str) -> None:
        self.path = path
        self.session_id = session_id
        self._fd: int | None = fd

    def release(self) -> None:
        if self._fd is None:
            return
        with contextlib.suppress(OSError):
            if _same_file(self._fd, self.path):
                self.path.unlink()
        with contextlib.suppress(OSError):
            os.close(self._fd)
        self._fd = None
        with contextlib.suppress(OSError):  # the data dir keeps no empty folder (another lock: not empty)
            self.path.parent.rmdir()

    def __del__(self) -> None:  # a session that was never closed (a failed start-up) lets go too
        self.release()

    @property
    def held(self) -> bool:
        return self._fd is not None


def lock_path(data_dir: Path, session_id: str) -> Path:
    return data_dir / "locks" / f"{session_id}.lock"


def acquire(data_dir: Path, session_id: str) -> SessionLock:
    """Take the lock of ``session_id``, or raise ``SessionBusy`` naming its holder."""
    path = lock_path(data_dir, session_id)
    for _ in range(5):  # the file (or its folder) may go (released, broken) between open and lock
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise StoreError(f"cannot create the lock folder {path.parent}: {exc}; check the data dir's permissions") from exc
        fd = _open(path)
        if fd < 0:
            continue
        holder = _read(fd)
        if not _try_lock(fd, holder):
            os.close(fd)
            if _stale(holder):
                with contextlib.suppress(FileNotFoundError):
                    path.unlink()
                continue
            raise _busy(session_id, holder)
        if not _same_file(fd, path):  # released and unlinked by its holder meanwhile: lock the new file
            os.close(fd)
            continue
        _write(fd)
        return SessionLock(path, fd, session_id)
    raise SessionBusy(f"could not lock session {session_id} ({path} keeps changing); try again")


def _open(path: Path) -> int:
    """The lock file's descriptor, or -1 when its folder was removed meanwhile."""
    try:
        return os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    except FileNotFoundError:
        return -1
    except OSError as exc:
        raise StoreError(f"cannot open the session lock {path}: {exc}; check the data dir's permissions") from exc


def _try_lock(fd: int, holder: dict[str, Any]) -> bool:
    if fcntl is not None:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return True
        except OSError as exc:
            if exc.errno in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
                return False
            # ENOLCK, EOPNOTSUPP (some network file systems): fall back on the record
    return not holder or not _alive(holder)


def _same_file(fd: int, path: Path) -> bool:
    try:
        return os.fstat(fd).st_ino == path.stat().st_ino
    except OSError:
        return False


def _read(fd: int) -> dict[str, Any]:
    try:
        data = json.loads(os.pread(fd, 4096, 0) or b"{}")
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def _write(fd: int) -> None:
    record = strict_json.dumps({"pid": os.getpid(), "host": socket.gethostname(), "since": time.time()}).encode()
    with contextlib.suppress(OSError):  # the record only words the message; the flock is the lock
        os.ftruncate(fd, 0)
        os.pwrite(fd, record, 0)


def _alive(holder: dict[str, Any]) -> bool:
    """Whether the recorded holder may still run (another host's process cannot be checked)."""
    pid = holder.get("pid")
    if not isinstance(pid, int) or pid <= 0:
        return False
    if holder.get("host") != socket.gethostname():
        return True
    try:
        import psutil

        process = psutil.Process(pid)
        since = holder.get("since")
        if isinstance(since, (int, float)) and process.create_time() > since + 1:
            return False  # the pid was reused by a process started after the lock was taken
        return process.status() != psutil.STATUS_ZOMBIE
    except Exception:  # noqa: BLE001 - psutil.NoSuchProcess and friends: nobody holds it
        return False


def _stale(holder: dict[str, Any]) -> bool:
    return bool(holder) and holder.get("pid") != os.getpid() and not _alive(holder)


def _busy(session_id: str, holder: dict[str, Any]) -> SessionBusy:
    pid = holder.get("pid")
    who = f"another ketch (pid {pid})" if isinstance(pid, int) else "another ketch"
    return SessionBusy(
        f"session {session_id} is open for writing in {who}; let that one finish, "
        "or add --fork to continue a copy of it"
    )


class SessionLocks:
    """The lock of the one session a process writes now; ``claim`` moves it to another."""

    def __init__(self, data_dir: Path) -> None:
        self.data_dir = data_dir
        self._held: SessionLock | None = None

    def claim(self, session_id: str) -> None:
        """Hold ``session_id``'s lock (then let go of the previous one); ``SessionBusy`` if taken."""
        if self._held is not None and self._held.session_id == session_id and self._held.held:
            return
        lock = acquire(self.data_dir, session_id)
        previous, self._held = self._held, lock
        if previous is not None:
            previous.release()

    def release(self) -> None:
        if self._held is not None:
            self._held.release()
            self._held = None
