"""The seam between prompt_toolkit's renderer and the terminal's scrollback.

prompt_toolkit (3.0.x) draws an inline application as a region below the cursor. Finished
output must go *above* that region, into the terminal's own scrollback, exactly once, and
in the same write as the frame that follows it (separate erase/print/redraw writes make
the input blink and let tmux copy the live region into history).

How: every frame, ``before_render`` holds the output buffer; if lines are waiting to be
committed, the cursor goes back to the top of the live region, the lines overwrite it,
and the renderer is told it starts afresh at the row below (``_cursor_pos`` and
``_last_screen`` are private renderer attributes: prompt_toolkit is pinned to <3.1 and
tests/test_ui_seam.py pins this). ``after_render`` releases the buffer as one write,
wrapped in synchronized-output sequences so terminals that know them paint it at once.
"""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Callable
from typing import Any, TextIO

from prompt_toolkit.data_structures import Point, Size
from prompt_toolkit.output.flush_stdout import flush_stdout
from prompt_toolkit.output.vt100 import Vt100_Output

_SGR = re.compile(r"(\x1b\[[0-9;:]*m)")
"""Colour and style codes: the only escape sequences a committed line may carry."""
_NOT_TEXT = re.compile(
    r"\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)?"          # OSC (title, clipboard, hyperlinks, ...)
    r"|\x1b[PX^_][^\x1b]*(?:\x1b\\)?"              # DCS, SOS, PM, APC strings
    r"|\x1b\[[0-?]*[ -/]*[@-~]?"                    # any other CSI (cursor moves, erases, modes)
    r"|\x1b.?"                                       # any other escape
    r"|[\x00-\x08\x0a-\x1f\x7f\x80-\x9f]"              # other control characters (C0 but tab, C1)
)


def terminal_safe(line: str) -> str:
    """``line`` with every escape sequence but colours and every control character removed.

    What is committed reaches the terminal as bytes, and much of it comes from outside: a
    command's output, a file's name, a provider's search titles. A clipboard write (OSC 52), a
    title change or a cursor move in it would act on the user's terminal, or break the
    accounting of the rows the live region occupies."""
    parts = _SGR.split(line)
    return "".join(part if i % 2 else _NOT_TEXT.sub("", part) for i, part in enumerate(parts))


SYNC_BEGIN = "\x1b[?2026h"
SYNC_END = "\x1b[?2026l"


class FrameOutput(Vt100_Output):
    """A vt100 output that can hold its buffer and writes each frame as one unit."""

    def __init__(self, stdout: TextIO, get_size: Callable[[], Size], *, term: str | None = None,
                 synchronized: bool = True) -> None:
        from prompt_toolkit.output.color_depth import ColorDepth

        # NO_COLOR and PROMPT_TOOLKIT_COLOR_DEPTH (prompt_toolkit reads them only for the
        # outputs it creates itself)
        super().__init__(stdout, get_size, term=term, enable_cpr=False, enable_bell=False,
                         default_color_depth=ColorDepth.from_env())
        self.holding = False
        """While True, ``flush`` keeps the buffer (one frame is being assembled)."""
        self.row_widths: list[int] = []
        """How wide the terminal takes each row of the live region to be (see ``RowWidths``)."""
        self.keep_rows_above = 0
        """Rows the live region keeps above the cursor until lines are next committed: set
        after the terminal narrowed, to the rows its re-wrapping gave the region, so the
        redrawn (shorter) region does not leave the cursor high on the screen, where the
        next narrowing would push the region's top into the scrollback."""
        self.synchronized = synchronized
        self.frames_written = 0

    @classmethod
    def for_terminal(cls, stdout: TextIO | None = None) -> FrameOutput:
        """An output on the real terminal (size read from the tty)."""
        stream = stdout or sys.stdout

        def get_size() -> Size:
            try:
                cols, rows = os.get_terminal_size(stream.fileno())
            except OSError:
                return Size(rows=24, columns=80)
            return Size(rows=rows or 24, columns=cols or 80)

        return cls(stream, get_size, term=os.environ.get("TERM"))

    def erase_down(self) -> None:
        """Erase from the cursor (always at the start of a row here) to the screen's end,
        without ever sending ED at the top-left cell: tmux treats that as clearing the
        screen and, with its default ``scroll-on-clear``, first copies every row into the
        scrollback, so a live region erased from the top (after a re-wrap made it reach the
        top of the screen) would land in the scrollback whole. The row itself is cleared
        by inserting a blank line over it (IL: unlike erasing the line, that also forgets how
        wide the row was, which tmux re-wraps by), the rows below with ED from the next row,
        and the cursor put back."""
        self.write_raw("\x1b[L\x1b7\x1b[1B\r\x1b[J\x1b8")

    def flush(self) -> None:
        """Write the buffered frame in one write (unless holding)."""
        if self.holding or not self._buffer:
            return
        data = "".join(self._buffer)
        self._buffer = []
        if self.synchronized:
            data = f"{SYNC_BEGIN}{data}{SYNC_END}"
        self.frames_written += 1
        flush_stdout(self.stdout, data)


class ScrollbackCommitter:
    """Queues finished ANSI lines and writes them above the live region, once."""

    def __init__(self, app: Any, output: FrameOutput) -> None:
        self._app = app
        self._output = output
        self._pending: list[str] = []
        self._rewind_requested = False
        from ketch.ui.palette import colour_disabled

        self._no_colour = colour_disabled()
        app.before_render += self._before_render
        app.after_render += self._after_render

    def commit(self, lines: list[str]) -> None:
        """Queue rendered lines for the scrollback; they go out with the next frame (colours
        kept, any other escape sequence or control character dropped: ``terminal_safe``)."""
        lines = [terminal_safe(line) for line in lines]
        if self._no_colour:
            from ketch.ui.palette import strip_colours

            lines = [strip_colours(line) for line in lines]
        self._pending.extend(lines)
        self._app.invalidate()

    def request_rewind(self, *, redraw: bool = True) -> None:
        """Repaint the live region from its top next frame (lets it shrink). From a
        ``before_render`` handler registered before this one, pass ``redraw=False``:
        the frame being drawn takes it."""
        self._rewind_requested = True
        if redraw:
            self._app.invalidate()

    @property
    def has_pending(self) -> bool:
        """True when lines are waiting for the next frame."""
        return bool(self._pending)

    def _before_render(self, app: Any) -> None:
        out = self._output
        out.holding = True
        if not self._pending and not self._rewind_requested:
            return
        renderer = app.renderer
        pos: Point = renderer._cursor_pos
        out.write_raw("\r")
        if pos.y:
            out.cursor_up(pos.y)
        out.reset_attributes()
        if self._pending:
            out.keep_rows_above = 0
        for line in self._pending:
            out.write_raw(f"\x1b[2K{line}\x1b[0m\r\n")
        out.erase_down()
        self._pending = []
        self._rewind_requested = False
        renderer._cursor_pos = Point(x=0, y=0)
        renderer._last_screen = None
        renderer._last_style = None

    def _after_render(self, app: Any) -> None:
        self._output.holding = False
        self._output.flush()


def _used_columns(screen: Any, y: int) -> int:
    line = screen.data_buffer.get(y) if hasattr(screen.data_buffer, "get") else screen.data_buffer[y]
    return max((x + 1 for x, ch in (line or {}).items() if ch.char not in (" ", "")), default=0)


def rows_after_reflow(renderer: Any, columns: int, widths: list[int] | None = None) -> Point | None:
    """Where the cursor is, relative to the live region's top, once the terminal has
    re-wrapped the last frame at ``columns`` (narrower than it was drawn at).

    Terminals such as tmux re-wrap rows that no longer fit, so the region occupies more
    rows than prompt_toolkit drew; erasing only the rows it drew would leave the top of
    the old region on screen, to end up in the scrollback twice. A row is as wide as
    ``widths`` says (what the terminal holds, see ``RowWidths``), else as the frame drew it.
    None: nothing drawn."""
    screen = renderer._last_screen
    pos: Point = renderer._cursor_pos
    if screen is None or columns <= 0:
        return None
    widths = widths or []
    rows = 0
    for y in range(pos.y):
        used = max(_used_columns(screen, y), widths[y] if y < len(widths) else 0)
        rows += max(1, -(-used // columns))
    return Point(x=pos.x % columns, y=rows + pos.x // columns)


class RowWidths:
    """Keeps ``FrameOutput.row_widths``: the widest content each row of the live region has
    held since an erase-display last cleared it. prompt_toolkit shortens a row by erasing
    its end (EL), and tmux keeps the cells EL cleared in the row's width when it re-wraps,
    so a row that once held a long line takes as many rows as that line did. Install
    after the committer, so a frame that starts from a wiped region is seen as one."""

    def __init__(self, app: Any, output: FrameOutput) -> None:
        self._output = output
        self._wiped = True
        app.before_render += self._before
        app.after_render += self._after

    def _before(self, app: Any) -> None:
        renderer = app.renderer
        self._wiped = renderer._last_screen is None or renderer._last_size != self._output.get_size()

    def _after(self, app: Any) -> None:
        screen = app.renderer._last_screen
        if screen is None:
            return
        now = [_used_columns(screen, y) for y in range(screen.height)]
        if not self._wiped:  # rows below the new height were erased (ED): they start afresh
            old = self._output.row_widths
            now = [max(width, old[y]) if y < len(old) else width for y, width in enumerate(now)]
        self._output.row_widths = now


def install_reflow_guard(app: Any, output: FrameOutput) -> None:
    """When the terminal got narrower, count the rows its re-wrapping added before
    prompt_toolkit erases or redraws the region (whichever comes first: the resize
    handler, or a frame drawn at the new size before the signal was handled), so that
    either starts at the region's real top. Register before the committer's hook."""
    original = app._on_resize
    drawn = {"columns": output.get_size().columns}

    def adjust(*_: Any) -> None:
        columns = output.get_size().columns
        if columns < drawn["columns"]:
            moved = rows_after_reflow(app.renderer, columns, output.row_widths)
            if moved is not None:
                app.renderer._cursor_pos = moved
                output.keep_rows_above = min(moved.y, max(0, output.get_size().rows - 3))
        drawn["columns"] = columns

    def on_resize() -> None:
        adjust()
        original()

    app._on_resize = on_resize
    app.before_render += adjust
