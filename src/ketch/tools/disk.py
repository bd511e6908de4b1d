"""Reading and writing files on disk for the file tools: regular files only (never a FIFO, a
device, a socket or a file of procfs/sysfs), text only (binary and non-UTF-8 are refused for
editing), writes atomic and keeping the file's mode.

Each path arrives as ``(workspace directory, relative path)`` (``Workspace.where``) and is
opened beneath that directory in one step by ``tools.beneath``: a symlink swapped in by a
command running at the same time makes the call fail, never read or write elsewhere.
"""

from __future__ import annotations

import errno
import os
from typing import BinaryIO

from pydantic_ai.exceptions import ToolFailed

import ketch.tools.beneath as beneath

BINARY_SNIFF_BYTES = 8192
MAX_LINE_CHARS = 2000

Place = tuple[str, str]
"""(workspace directory, path relative to it), as ``Workspace.where`` gives it."""


def is_binary(head: bytes) -> bool:
    return b"\x00" in head


def open_regular(place: Place, shown: str) -> BinaryIO:
    """Open a file for binary reading, refusing FIFOs, devices, sockets and kernel state
    without blocking."""
    return os.fdopen(beneath.open_regular_fd(place[0], place[1], shown), "rb")


def exists(place: Place) -> bool:
    """Whether something (a symlink included) is at the place, looked at beneath its directory."""
    return beneath.lstat(*place) is not None


def read_text(place: Place, shown: str) -> str:
    """The whole text of an existing file for editing; refuses binary and non-UTF-8."""
    try:
        with open_regular(place, shown) as handle:
            data = handle.read()
    except IsADirectoryError:
        raise ToolFailed(f"{shown} is a directory, not a file.") from None
    except OSError as exc:
        if exc.errno == errno.EISDIR:
            raise ToolFailed(f"{shown} is a directory, not a file.") from None
        raise ToolFailed(f"Cannot read {shown}: {exc.strerror or exc}.") from exc
    if is_binary(data[:BINARY_SNIFF_BYTES]):
        raise ToolFailed(f"{shown} is a binary file; only text files can be edited.")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ToolFailed(f"{shown} is not UTF-8 text; it cannot be edited safely.") from exc


def write_atomic(place: Place, text: str, shown: str = "") -> None:
    """Replace the file with ``text`` (its mode kept), making missing parent directories."""
    beneath.write_bytes(place[0], place[1], text.encode("utf-8"), shown=shown)
