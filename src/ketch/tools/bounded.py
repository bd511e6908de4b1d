"""Reading lines of a file in bounded memory and time, whatever the file looks like.

``bounded_lines`` never holds more than ``max_bytes`` of a line: a longer line is cut, the
length of its rest is counted (up to ``COUNT_REST_BYTES``, in chunks) and the rest is
skipped only when the caller asks for the next line. It stops at ``end`` (the size the file
had when it was opened), so a file that grows while it is read cannot keep a read going.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import BinaryIO

COUNT_REST_BYTES = 1024 * 1024
"""How far past the cut of a long line its length is counted; beyond, it is 'more than'."""
SKIP_CHUNK = 1024 * 1024
_CONTINUATION = bytes(range(0x80, 0xC0))


@dataclass(frozen=True)
class Line:
    """One line, at most ``max_bytes`` of it, without its line ending."""

    data: bytes
    rest: int = 0
    """Characters of the line after ``data`` (0 when the line was not cut)."""
    rest_known: bool = True
    """False when the rest is longer than was counted: ``rest`` is then a lower bound."""


def utf8_chars(data: bytes) -> int:
    """Characters in UTF-8 ``data`` (bytes that start a character), without decoding it."""
    return len(data.translate(None, _CONTINUATION))


def _strip_eol(raw: bytes) -> bytes:
    if raw.endswith(b"\n"):
        raw = raw[:-1]
    return raw[:-1] if raw.endswith(b"\r") else raw


def bounded_lines(handle: BinaryIO, end: int, max_bytes: int) -> Iterator[Line]:
    """The lines of ``handle`` from its position up to byte ``end``, each cut at ``max_bytes``."""
    pos = handle.tell()
    while pos < end:
        raw = handle.readline(min(max_bytes + 1, end - pos))
        if not raw:
            return  # the file shrank
        pos += len(raw)
        if raw.endswith(b"\n") or len(raw) <= max_bytes:
            yield Line(_strip_eol(raw))
            continue
        rest, ended = utf8_chars(raw[max_bytes:]), False
        counted = len(raw) - max_bytes
        while counted < COUNT_REST_BYTES and pos < end:
            chunk = handle.readline(min(SKIP_CHUNK, end - pos, COUNT_REST_BYTES - counted + 1))
            if not chunk:
                break
            pos += len(chunk)
            counted += len(chunk)
            if chunk.endswith(b"\n"):
                rest += utf8_chars(_strip_eol(chunk))
                ended = True
                break
            rest += utf8_chars(chunk)
        known = ended or pos >= end
        yield Line(raw[:max_bytes], rest, known)
        while not ended and pos < end:  # reached only when the caller wants the next line
            chunk = handle.readline(min(SKIP_CHUNK, end - pos))
            if not chunk:
                return
            pos += len(chunk)
            ended = chunk.endswith(b"\n")


def cut_note(chars: int, line: Line) -> str:
    """`` … [N more characters]`` for a line cut after ``chars`` more characters were dropped."""
    more = line.rest + chars
    if not line.rest_known:
        return f" … [line cut; more than {more:,} more characters]"
    return f" … [{more:,} more characters]"
