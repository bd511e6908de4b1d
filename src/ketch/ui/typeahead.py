"""Keys typed while the UI is still importing: echoed at once, handed to the app later.

prompt_toolkit and the UI modules take 0.15–0.3 s to import. ``collect_while`` runs on the
main thread while a worker imports them: it reads the terminal (already quiet, see
``quiet_tty``), redraws the early prompt line with what was typed, and returns every byte
so the app can feed them to its key processor before its first frame. A worker holding the
GIL has to give it up every few milliseconds, so a key shows within a frame of being typed.

Only the first line is echoed, as plain text; once Enter or an escape sequence is typed the
echo stops (the bytes are still kept and replayed faithfully by the app).
"""

from __future__ import annotations

import codecs
import os
import select
import threading
from typing import TextIO

PROMPT = "\x1b[1m› \x1b[0m"
BACKSPACES = ("\x7f", "\x08")


class EarlyLine:
    """What the early prompt line shows for the bytes typed so far."""

    def __init__(self) -> None:
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self.text = ""
        self.echoing = True

    def feed(self, data: bytes) -> bool:
        """Take typed bytes; returns whether the shown line changed."""
        if not self.echoing:
            return False
        before = self.text
        for ch in self._decoder.decode(data):
            if ch in ("\r", "\n", "\x1b"):
                self.echoing = False
                break
            if ch in BACKSPACES:
                self.text = self.text[:-1]
            elif ch.isprintable():
                self.text += ch
        return self.text != before

    def render(self, columns: int) -> str:
        room = max(1, columns - 3)
        shown = self.text[-room:]
        return f"\r{PROMPT}{shown}\x1b[K"


def collect_while(loading: threading.Thread, fd: int, out: TextIO, *, columns: int = 80) -> bytes:
    """Echo keys typed on ``fd`` until ``loading`` ends; return them all."""
    typed = bytearray()
    line = EarlyLine()
    shown = False
    while loading.is_alive():
        try:
            ready, _, _ = select.select([fd], [], [], 0.01)
        except (OSError, ValueError):
            loading.join()
            break
        if not ready:
            continue
        try:
            data = os.read(fd, 4096)
        except OSError:
            loading.join()
            break
        if not data:
            loading.join()
            break
        typed += data
        if line.feed(data):
            out.write(line.render(columns))
            out.flush()
            shown = True
    if shown:
        out.write("\r")  # the app's first frame draws from the start of this line
        out.flush()
    return bytes(typed)


def key_presses(typed: bytes) -> list[object]:
    """``typed`` as prompt_toolkit key presses, parsed the way its own input would.

    A newline is read as Enter: keys typed before ``quiet_tty`` went through the tty's
    CR-to-NL translation, so there an Enter arrives as ``\n``."""
    from prompt_toolkit.input.vt100_parser import Vt100Parser

    keys: list[object] = []
    parser = Vt100Parser(keys.append)
    parser.feed_and_flush(codecs.decode(typed.replace(b"\n", b"\r"), "utf-8", errors="surrogateescape"))
    return keys
