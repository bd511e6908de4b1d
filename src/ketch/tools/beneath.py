"""Opening a path beneath a workspace directory in one step, so that what was checked is what
gets opened even while a command running at the same time swaps a directory for a symlink.

The jail (``workspace.py``) decides which file a tool means and gives a path with no symlink
left in it; every open, create, rename and unlink then goes through here, relative to a
descriptor of the workspace directory, and refuses any symlink on the way:

* ``openat2(2)`` with ``RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS`` where the kernel has
  it (Linux 5.6+), on the whole absolute path (the workspace's own path has no symlink, the
  jail's relative path no ``..``): the kernel resolves it in one step and fails rather than
  follow a link anywhere on it, which is ``RESOLVE_BENEATH`` from a descriptor of the
  workspace without opening one per call (one system call instead of three);
* elsewhere, a walk one component at a time with ``O_NOFOLLOW | O_DIRECTORY`` and ``dir_fd``.

The last component is always handled relative to its directory's descriptor with
``O_NOFOLLOW`` (open, create) or by name (``renameat``/``unlinkat``), which never follow a
link. A swap that lands between the jail's check and the open makes the open fail
(:class:`PathChanged`); it cannot redirect it. Writes go to a temporary file created in the
directory's descriptor and renamed over the name there.
"""

from __future__ import annotations

import ctypes
import errno
import os
import secrets
import stat
import sys
from collections.abc import Iterator
from contextlib import contextmanager

from pydantic_ai.exceptions import ToolFailed

RESOLVE_NO_MAGICLINKS = 0x02
RESOLVE_NO_SYMLINKS = 0x04
RESOLVE_BENEATH = 0x08
_RESOLVE_ABSOLUTE = RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS
_OPENAT2 = {"x86_64": 437, "aarch64": 437, "arm64": 437, "riscv64": 437, "ppc64le": 437, "s390x": 437}
_O_PATH = getattr(os, "O_PATH", 0)
_O_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
_DIR_FLAGS = (_O_PATH or os.O_RDONLY) | os.O_DIRECTORY | _O_CLOEXEC
_EAGAIN_TRIES = 8

PSEUDO_FS_MAGIC = frozenset({
    0x9FA0,  # proc
    0x62656572,  # sysfs
    0x1CD1,  # devpts
    0x64626720,  # debugfs
    0x74726163,  # tracefs
    0x73636673,  # securityfs
    0x27E0EB,  # cgroup
    0x63677270,  # cgroup2
    0xCAFE4A11,  # bpf
    0xDE5E81E4,  # efivarfs
    0x62656570,  # configfs
    0x6E736673,  # nsfs
})  # fmt: skip
"""File systems of process and kernel state: their files can hold keys (``/proc/*/environ``)
or block a read, and are never a project's files."""


class PathChanged(ToolFailed):
    """A path that changed between the jail's check and the open (a symlink appeared on the way)."""


class _OpenHow(ctypes.Structure):
    _fields_ = [("flags", ctypes.c_uint64), ("mode", ctypes.c_uint64), ("resolve", ctypes.c_uint64)]


class _Statfs(ctypes.Structure):
    _fields_ = [("f_type", ctypes.c_long), ("rest", ctypes.c_byte * 120)]


_libc: ctypes.CDLL | None = None
_openat2_nr: int | None = None
_have_openat2: bool | None = None


def _load() -> None:
    global _libc, _openat2_nr, _have_openat2
    if _have_openat2 is not None:
        return
    _have_openat2 = False
    if not sys.platform.startswith("linux"):
        return
    try:
        _libc = ctypes.CDLL(None, use_errno=True)
        _libc.syscall.restype = ctypes.c_long
    except OSError:
        return
    _openat2_nr = _OPENAT2.get(os.uname().machine)
    if _openat2_nr is None:
        return
    probe = _openat2(-100, "/", _DIR_FLAGS, 0, 0)  # AT_FDCWD
    if isinstance(probe, int):
        os.close(probe)
        _have_openat2 = True


def _openat2(dirfd: int, path: str, flags: int, mode: int, resolve: int) -> int | OSError:
    assert _libc is not None and _openat2_nr is not None
    how = _OpenHow(flags | _O_CLOEXEC, mode if flags & os.O_CREAT else 0, resolve)
    encoded = os.fsencode(path)
    for _ in range(_EAGAIN_TRIES):
        fd = _libc.syscall(_openat2_nr, ctypes.c_int(dirfd), ctypes.c_char_p(encoded), ctypes.byref(how), ctypes.c_size_t(ctypes.sizeof(how)))
        if fd >= 0:
            return int(fd)
        code = ctypes.get_errno()
        if code not in (errno.EAGAIN, errno.EINTR):
            return OSError(code, os.strerror(code), path)
    return OSError(errno.EAGAIN, os.strerror(errno.EAGAIN), path)


def uses_openat2() -> bool:
    """Whether this kernel resolves beneath a directory itself (else the fd walk is used)."""
    _load()
    return bool(_have_openat2)


def _changed(shown: str, exc: OSError) -> PathChanged:
    return PathChanged(
        f"{shown} changed while it was being opened (a symlink or a moved directory on the way); "
        f"nothing was read or written ({exc.strerror or exc})."
    )


def _join(root: str, parts: list[str]) -> str:
    return "/".join([root.rstrip("/"), *parts]) if parts else root


def _parts(rel: str) -> list[str]:
    parts = [p for p in rel.split("/") if p not in ("", ".")]
    if ".." in parts:
        raise ValueError(f"{rel!r} is not a resolved path")
    return parts


def _open_root(root: str) -> int:
    """A descriptor of the workspace directory itself (its path holds no symlink)."""
    if uses_openat2():
        fd = _openat2(-100, root, _DIR_FLAGS, 0, RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS)
        if isinstance(fd, OSError):
            raise fd
        return fd
    return _walk(os.open("/", os.O_RDONLY | os.O_DIRECTORY | _O_CLOEXEC), _parts(root), create=False)


def _walk(fd: int, parts: list[str], *, create: bool) -> int:
    """Descend from ``fd`` (consumed) through directories, never through a symlink."""
    try:
        for part in parts:
            try:
                nxt = os.open(part, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | _O_CLOEXEC, dir_fd=fd)
            except FileNotFoundError:
                if not create:
                    raise
                try:
                    os.mkdir(part, 0o777, dir_fd=fd)
                except FileExistsError:
                    pass
                nxt = os.open(part, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | _O_CLOEXEC, dir_fd=fd)
            os.close(fd)
            fd = nxt
        return fd
    except BaseException:
        os.close(fd)
        raise


def open_dir(root: str, rel: str, *, create: bool = False, readable: bool = False, shown: str = "") -> int:
    """A descriptor of directory ``rel`` beneath ``root`` (made, with its parents, when
    ``create``; open for reading its entries when ``readable``). The caller closes it."""
    parts = _parts(rel)
    shown = shown or rel or "."
    flags = (os.O_RDONLY | os.O_DIRECTORY | _O_CLOEXEC) if readable else _DIR_FLAGS
    try:
        if uses_openat2():
            fd = _openat2(-100, _join(root, parts), flags, 0, _RESOLVE_ABSOLUTE)
            if not isinstance(fd, OSError):
                return fd
            if fd.errno != errno.ENOENT or not create:
                raise fd
            return _walk(_open_root(root), parts, create=create)
        fd = _walk(os.open("/", os.O_RDONLY | os.O_DIRECTORY | _O_CLOEXEC), [*_parts(root), *parts], create=False) if not create \
            else _walk(_open_root(root), parts, create=True)
        return fd
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.EXDEV, errno.ENOTDIR):
            raise _changed(shown, exc) from None
        raise


def open_file(root: str, rel: str, flags: int, mode: int = 0o666, *, shown: str = "") -> int:
    """Open file ``rel`` beneath ``root`` with ``flags``, following no symlink anywhere."""
    parts = _parts(rel)
    if not parts:
        raise IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR), root)
    shown = shown or rel
    try:
        if uses_openat2():
            # one call: the absolute path with no symlink anywhere on it (and ``_parts``
            # refused ``..``), so it cannot leave the root (see the module's docstring)
            fd = _openat2(-100, _join(root, parts), flags, mode, _RESOLVE_ABSOLUTE)
            if isinstance(fd, OSError):
                raise fd
            return fd
        dirfd = open_dir(root, "/".join(parts[:-1]), shown=shown)
        try:
            return os.open(parts[-1], flags | os.O_NOFOLLOW | _O_CLOEXEC, mode, dir_fd=dirfd)
        finally:
            os.close(dirfd)
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.EXDEV, errno.ENOTDIR):
            raise _changed(shown, exc) from None
        raise


def is_pseudo_fs(fd: int) -> bool:
    """Whether ``fd`` lies on procfs, sysfs or another file system of kernel state (Linux)."""
    _load()
    if _libc is None:
        return False
    buf = _Statfs()
    if _libc.fstatfs(ctypes.c_int(fd), ctypes.byref(buf)) != 0:
        return False
    return (buf.f_type & 0xFFFFFFFF) in PSEUDO_FS_MAGIC


def open_regular_fd(root: str, rel: str, shown: str) -> int:
    """A descriptor for reading an existing regular file beneath ``root``. Refuses FIFOs,
    devices and sockets (opened without blocking) and files of kernel state."""
    try:
        fd = open_file(root, rel, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY, shown=shown)
    except OSError as exc:
        if exc.errno in (errno.ENXIO, errno.EOPNOTSUPP):  # a socket, a device with no driver
            raise ToolFailed(f"{shown} is not a regular file (a device, pipe or socket); it cannot be read.") from None
        raise
    try:
        mode = os.fstat(fd).st_mode
        if stat.S_ISDIR(mode):
            raise IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR), shown)
        if not stat.S_ISREG(mode):
            raise ToolFailed(f"{shown} is not a regular file (a device, pipe or socket); it cannot be read.")
        if is_pseudo_fs(fd):
            raise ToolFailed(f"{shown} is process or kernel state (procfs, sysfs), which can hold keys; the file tools do not read it.")
    except BaseException:
        os.close(fd)
        raise
    return fd


def lstat(root: str, rel: str) -> os.stat_result | None:
    """What ``rel`` is beneath ``root`` without following a final symlink (None: nothing there)."""
    parts = _parts(rel)
    if not parts:
        return os.stat(root)
    try:
        dirfd = open_dir(root, "/".join(parts[:-1]))
    except (FileNotFoundError, NotADirectoryError, PathChanged):
        return None
    try:
        return os.stat(parts[-1], dir_fd=dirfd, follow_symlinks=False)
    except (FileNotFoundError, NotADirectoryError):
        return None
    finally:
        os.close(dirfd)


@contextmanager
def parent_of(root: str, rel: str, *, create: bool = False, shown: str = "") -> Iterator[tuple[int, str]]:
    """(descriptor of the directory holding ``rel``, its last component), made when ``create``."""
    parts = _parts(rel)
    if not parts:
        raise IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR), root)
    dirfd = open_dir(root, "/".join(parts[:-1]), create=create, shown=shown or rel)
    try:
        yield dirfd, parts[-1]
    finally:
        os.close(dirfd)


def write_bytes(root: str, rel: str, data: bytes, *, mode: int | None = None, shown: str = "") -> None:
    """Replace (or create) ``rel`` beneath ``root`` atomically: a temporary file made in the
    directory's descriptor, then renamed over the name there. Keeps an existing file's mode
    unless ``mode`` is given; a new file gets ``0o666`` less the umask. Whatever stands at the
    name (a symlink put there meanwhile included) is replaced, never written through."""
    with parent_of(root, rel, create=True, shown=shown) as (dirfd, name):
        keep: int | None = mode
        try:
            st = os.stat(name, dir_fd=dirfd, follow_symlinks=False)
        except FileNotFoundError:
            st = None
        if st is not None and stat.S_ISDIR(st.st_mode):
            raise IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR), shown or rel)
        if keep is None and st is not None and stat.S_ISREG(st.st_mode):
            keep = st.st_mode & 0o7777
        temp = f".{name[:200]}.{secrets.token_hex(4)}.ketch-tmp"
        fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | _O_CLOEXEC, 0o666 if keep is None else 0o600, dir_fd=dirfd)
        try:
            try:
                view = memoryview(data)
                while view:
                    view = view[os.write(fd, view):]
                if keep is not None:
                    os.fchmod(fd, keep)
            finally:
                os.close(fd)
            os.rename(temp, name, src_dir_fd=dirfd, dst_dir_fd=dirfd)
        except BaseException:
            try:
                os.unlink(temp, dir_fd=dirfd)
            except OSError:
                pass
            raise


def symlink(root: str, rel: str, target: str) -> None:
    """Make ``rel`` a symlink to ``target`` (replacing what is there), beneath ``root``."""
    with parent_of(root, rel, create=True) as (dirfd, name):
        temp = f".{name[:200]}.{secrets.token_hex(4)}.ketch-tmp"
        os.symlink(target, temp, dir_fd=dirfd)
        try:
            os.rename(temp, name, src_dir_fd=dirfd, dst_dir_fd=dirfd)
        except BaseException:
            os.unlink(temp, dir_fd=dirfd)
            raise


def unlink(root: str, rel: str) -> None:
    """Remove the file or symlink ``rel`` beneath ``root`` (a directory is left: IsADirectoryError)."""
    with parent_of(root, rel) as (dirfd, name):
        st = os.stat(name, dir_fd=dirfd, follow_symlinks=False)
        if stat.S_ISDIR(st.st_mode):
            raise IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR), rel)
        os.unlink(name, dir_fd=dirfd)


def rmdir(root: str, rel: str) -> None:
    """Remove the empty directory ``rel`` beneath ``root``."""
    with parent_of(root, rel) as (dirfd, name):
        os.rmdir(name, dir_fd=dirfd)
