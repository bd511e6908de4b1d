"""A background command that prints while a bench's turn goes on (``--background-mb`` of
``render.py`` and ``long_session.py``): how much, how fast, and the mark it leaves when done."""

from __future__ import annotations

BACKGROUND_DONE = "background-printed"
"""The file the producer writes (in the working directory) once it has printed everything."""


def background_producer(megabytes: float, seconds: float = 3.2) -> str:
    """A bash command printing ``megabytes`` MB of 1 KiB lines in 8 KiB bursts spread over about
    ``seconds``, then writing :data:`BACKGROUND_DONE`."""
    lines = max(8, int(megabytes * 1024))
    pause = seconds / (lines / 8)
    program = ("import sys, time\nfor i in range(%d):\n sys.stdout.write('%%1023d\\n' %% i)\n"
               " if i %% 8 == 7: sys.stdout.flush(); time.sleep(%r)\n") % (lines, round(pause, 4))
    return f"python3 -c \"{program}\" && echo done > {BACKGROUND_DONE}"
