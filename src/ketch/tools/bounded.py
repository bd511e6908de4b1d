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


def _through_newline(handle: BinaryIO, pos: int, end: int, budget: int) -> tuple[int, bytes, bool]:
    """Read on from ``pos`` to just past the next newline, at most ``budget`` bytes (and never
    past ``end``), in large chunks. Returns (new position, bytes read without the newline, found)."""
    taken: list[bytes] = []
    while budget > 0 and pos < end:
        chunk = handle.read(min(SKIP_CHUNK, end - pos, budget))
        if not chunk:
            break
        newline = chunk.find(b"\n")
        if newline >= 0:
            handle.seek(pos + newline + 1)
            taken.append(chunk[:newline])
            return pos + newline + 1, b"".join(taken), True
        pos += len(chunk)
        budget -= len(chunk)
        taken.append(chunk)
    return pos, b"".join(taken), False


def _skip_line(handle: BinaryIO, pos: int, end: int) -> int:
    """Position just past the next newline (or ``end``), reading without keeping anything."""
    while pos < end:
        chunk = handle.read(min(SKIP_CHUNK, end - pos))
        if not chunk:
            return end
        newline = chunk.find(b"\n")
        if newline >= 0:
            handle.seek(pos + newline + 1)
            return pos + newline + 1
        pos += len(chunk)
    return pos


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
        pos, counted, ended = _through_newline(handle, pos, end, COUNT_REST_BYTES)
        rest = utf8_chars(raw[max_bytes:]) + utf8_chars(_strip_eol(counted + b"\n") if ended else counted)
        yield Line(raw[:max_bytes], rest, ended or pos >= end)
        if not ended:  # reached only when the caller wants the next line
            pos = _skip_line(handle, pos, end)


def cut_note(chars: int, line: Line) -> str:
    """`` … [N more characters]`` for a line cut after ``chars`` more characters were dropped."""
    more = line.rest + chars
    if not line.rest_known:
        return f" … [line cut; more than {more:,} more characters]"
    return f" … [{more:,} more characters]"
