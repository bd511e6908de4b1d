"""Keys typed while the UI imports: echoed on the early prompt line, then replayed into the
app's input (src/ketch/ui/typeahead.py). The end-to-end test types into the real ``ketch``
on a pseudo-terminal before anything is drawn."""

from __future__ import annotations

import os
import pty
import select
import signal
import sys
import time
from pathlib import Path

from fakeprovider import FakeProvider, Turn, user_texts
from kettle import ketch_env
from prompt_toolkit.keys import Keys

from ketch.ui.typeahead import EarlyLine, key_presses

SYNC_FRAME = b"\x1b[?2026h"


def test_the_early_line_shows_what_was_typed_across_split_utf8() -> None:
    line = EarlyLine()
    word = "héllo".encode()
    assert line.feed(word[:2]) is True  # 'h' and half of 'é'
    assert line.text == "h"
    line.feed(word[2:])
    assert line.text == "héllo"
    line.feed(b"\x7f\x7f")
    assert line.text == "hél"
    assert line.render(80).endswith("hél\x1b[K")
    assert line.render(5).endswith("› \x1b[0mél\x1b[K"), "a narrow terminal shows the tail"


def test_enter_or_an_escape_sequence_ends_the_echo() -> None:
    line = EarlyLine()
    line.feed(b"ls\r")
    assert line.feed(b"more") is False and line.text == "ls"
    arrows = EarlyLine()
    arrows.feed(b"ab\x1b[Acd")
    assert arrows.text == "ab" and not arrows.echoing


def test_typed_bytes_become_the_same_key_presses_the_app_would_read() -> None:
    keys = key_presses(b"hi\x1b[A\x7f\r")
    assert [k.key for k in keys] == ["h", "i", Keys.Up, Keys.ControlH, Keys.ControlM]
    assert [k.key for k in key_presses(b"ok\n")][-1] == Keys.ControlM, "an Enter typed before quiet_tty arrives as NL"


def _read(fd: int, into: bytearray, timeout: float) -> None:
    ready, _, _ = select.select([fd], [], [], timeout)
    if ready:
        try:
            into += os.read(fd, 65536)
        except OSError:
            pass


def test_a_prompt_typed_at_launch_is_echoed_before_the_app_and_then_sent(tmp_path: Path) -> None:
    env = ketch_env({"TERM": "xterm-256color", "COLUMNS": "100", "LINES": "30"})
    with FakeProvider([Turn(text="typed early, answered")]) as fake:
        pid, fd = pty.fork()
        if pid == 0:  # the child: the real ketch on this pty
            os.chdir(tmp_path)
            os.execve(sys.executable, [sys.executable, "-m", "ketch", "--base-url", fake.base_url,
                                       "--wire", "openai-chat", "--model", "fake-model"], env)
        out = bytearray()
        try:
            deadline = time.monotonic() + 60
            while "›".encode() not in out and time.monotonic() < deadline:
                _read(fd, out, 0.01)
            os.write(fd, b"hello there\r")  # the early prompt is up; the UI is still importing
            while b"answered" not in out and time.monotonic() < deadline:
                _read(fd, out, 0.1)
            assert b"answered" in out, out[-2000:].decode(errors="replace")
            first_frame = out.find(SYNC_FRAME)
            assert first_frame > 0
            assert b"hello there" in out[:first_frame], "echoed on the early prompt line before the app drew"
            assert [user_texts(r)[-1] for r in fake.requests if r.wire == "chat"] == ["hello there"]
        finally:
            os.write(fd, b"\x03\x03")
            deadline = time.monotonic() + 10
            while time.monotonic() < deadline:
                _read(fd, out, 0.05)
                if os.waitpid(pid, os.WNOHANG)[0]:
                    break
            else:
                os.kill(pid, signal.SIGKILL)
                os.waitpid(pid, 0)
            os.close(fd)
