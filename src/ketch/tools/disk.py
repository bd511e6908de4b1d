"""Reading and writing files on disk for the file tools: regular files only (never a FIFO or
a device, which would block), text only (binary and non-UTF-8 are refused for editing),
writes atomic and keeping the file's mode."""

from __future__ import annotations

import os
import stat
import tempfile
from pathlib import Path
from typing import BinaryIO

from pydantic_ai.exceptions import ToolFailed

BINARY_SNIFF_BYTES = 8192
MAX_LINE_CHARS = 2000


def is_binary(head: bytes) -> bool:
    return b"\x00" in head


def open_regular(path: Path | str, shown: str) -> BinaryIO:
    """Open a file for binary reading, refusing FIFOs, devices and sockets without blocking."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise ToolFailed(f"{shown} is not a regular file (a device, pipe or socket); it cannot be read.")
    return os.fdopen(fd, "rb")


def read_text(path: Path, shown: str) -> str:
    """The whole text of an existing file for editing; refuses binary and non-UTF-8."""
    if path.is_dir():
        raise ToolFailed(f"{shown} is a directory, not a file.")
    try:
        with open_regular(path, shown) as handle:
            data = handle.read()
    except OSError as exc:
        raise ToolFailed(f"Cannot read {shown}: {exc.strerror or exc}.") from exc
    if is_binary(data[:BINARY_SNIFF_BYTES]):
        raise ToolFailed(f"{shown} is a binary file; only text files can be edited.")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ToolFailed(f"{shown} is not UTF-8 text; it cannot be edited safely.") from exc


def write_atomic(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    mode = path.stat().st_mode & 0o7777 if path.exists() else None
    fd, temp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".ketch-tmp")
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(text.encode("utf-8"))
        if mode is not None:
            os.chmod(temp, mode)
        os.replace(temp, path)
    except BaseException:
        if os.path.exists(temp):
            os.unlink(temp)
        raise
