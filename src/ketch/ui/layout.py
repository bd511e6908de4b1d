"""The live region: streaming tail, tool progress, queue, overlay, input, menu, status."""

from __future__ import annotations

from typing import Any

from prompt_toolkit.filters import Condition
from prompt_toolkit.formatted_text import ANSI, to_formatted_text
from prompt_toolkit.layout import ConditionalContainer, HSplit, Layout, Window
from prompt_toolkit.layout.controls import BufferControl, FormattedTextControl
from prompt_toolkit.layout.dimension import Dimension
from prompt_toolkit.styles import Style

from ketch.ui.statusline import status_text
from ketch.ui.toolfmt import clip, headline

KetchApp = Any
"""The app (``ui.controller.KetchApp``) is passed in, not imported: it imports this module."""

Fragments = list[tuple[str, str]]
FIRST_RUN_HINT = ("enter sends · ctrl-j newline · ctrl-c stops · esc cancels the turn · "
                  "ctrl-o output · ctrl-r reasoning · ctrl-d or ctrl-c twice quits · /help")
INPUT_MAX_ROWS = 10
REASONING_MAX_ROWS = 16
"""Rows the expanded reasoning takes at most (half the terminal when that is less)."""
RESERVED_ROWS = 8

STYLE = Style.from_dict({
    # Only the terminal's 16 ANSI colours and attributes: the terminal's theme keeps them
    # readable on dark and light backgrounds. Class names avoid prompt_toolkit's own
    # defaults ("menu" there is grey on grey).
    "dim": "dim",
    "prompt": "bold",
    "tool": "bold",
    "queued": "italic dim",
    "hint": "bold",
    "working": "dim",
    "error": "ansired",
    "status": "dim",
    "overlay.title": "bold",
    "command": "bold",
    "choice.selected": "bold reverse",
    "overlay.input": "",
    "pick": "",
    "pick.current": "reverse",
    "pick.detail": "dim",
    "diff.add": "ansigreen",
    "diff.del": "ansired",
})


class _AnsiCache:
    """Converts the open block's ANSI lines to fragments once per change."""

    def __init__(self) -> None:
        self._lines: Any = None
        self._rows = -1
        self._value: Fragments = []

    def get(self, lines: list[str], max_rows: int) -> Fragments:
        shown = lines[-max_rows:] if max_rows > 0 else []
        if lines is not self._lines or len(shown) != self._rows:
            self._lines, self._rows = lines, len(shown)
            self._value = _merge_runs(to_formatted_text(ANSI("\n".join(shown) + "\n"))) if shown else []
        return self._value


def build_layout(ctl: KetchApp) -> Layout:
    """The live region's containers, reading state from the controller on each frame."""
    cache = _AnsiCache()

    frame_cache: dict[str, Any] = {"frame": -1, "value": []}

    def above() -> Fragments:
        if frame_cache["frame"] != ctl.app.render_counter:
            frame_cache["frame"] = ctl.app.render_counter
            frame_cache["value"] = compute_above()
        return frame_cache["value"]

    def compute_above() -> Fragments:
        size = ctl.output.get_size()
        width = size.columns
        view = ctl.view
        out: Fragments = list(cache.get(view.answer_lines, live_answer_rows(size.rows)))
        if view.reasoning:
            if ctl.reasoning_expanded:
                height = max(3, min(REASONING_MAX_ROWS, size.rows // 2))
                rows = reasoning_tail(view.reasoning, width - 3, height)
                out.append(("class:dim", f"✻ thinking · ~{ctl.reasoning_tokens()} tokens (ctrl-r to collapse)\n"))
                out += [("class:dim", "  " + r + "\n") for r in rows]
            else:
                out.append(("class:dim", f"✻ thinking… ~{ctl.reasoning_tokens()} tokens (ctrl-r to expand)\n"))
        for tool in view.tools.values():
            out.append(("class:tool", headline(tool.name, tool.args, width) + "\n"))
            out += [("class:dim", "  │ " + clip(r, width - 5) + "\n") for r in tool.lines()]
        for label in view.subagents.values():
            out.append(("class:dim", "  ↳ " + clip(label, width - 5) + "\n"))
        if ctl.busy and not ctl.overlay:
            keys = "esc or ctrl-c to stop" if not view.tools else "ctrl-c stops the command · esc the turn"
            work = ctl.meter.line() if ctl.meter.started_at is not None else "working"
            out.append(("class:working", clip(f"… {work} · {keys}", width - 1) + "\n"))
        if not ctl.session_ready and ctl.queue:
            out.append(("class:dim", "… loading the model\n"))
        for text in ctl.queue:
            out.append(("class:queued", "⧗ queued: " + clip(text.splitlines()[0] if text else "", width - 12) + "\n"))
        overlay = ctl.overlay
        if overlay is not None:
            if hasattr(overlay, "screen_rows"):
                overlay.screen_rows = size.rows
            out += overlay.fragments(width)
        return _pad_to_keep_rows(_trim_last_newline(out), ctl.output.keep_rows_above - ctl.buffer.document.cursor_position_row)

    def below() -> Fragments:
        width = ctl.output.get_size().columns
        out: Fragments = []
        menu = ctl.menu
        if menu is not None and ctl.overlay is None:
            for i, item in enumerate(menu.items):
                style = "class:pick.current" if i == menu.selected else "class:pick"
                out.append((style, f" {clip(item.label, width - 2)} "))
                if item.detail:
                    out.append(("class:pick.detail", " " + clip(item.detail, max(1, width - len(item.label) - 4))))
                out.append(("", "\n"))
        if ctl.hint:
            out.append(("class:hint", clip(ctl.hint, width) + "\n"))
        elif ctl.first_run_hint and ctl.overlay is None:
            out += [("class:dim", row + "\n") for row in hint_rows(FIRST_RUN_HINT, width - 1)]
        out.append(("class:status", status_text(ctl.status, width - 1, loading=not ctl.session_ready)))
        return out

    def has_above() -> bool:
        return bool(above())

    def prefix(line_number: int, wrap_count: int) -> Fragments:
        return [("class:prompt", "› " if line_number == 0 and wrap_count == 0 else "  ")]

    input_window = Window(
        BufferControl(buffer=ctl.buffer),
        height=Dimension(min=1, max=INPUT_MAX_ROWS),
        get_line_prefix=prefix,
        wrap_lines=True,
        dont_extend_height=True,
    )
    body = HSplit([
        ConditionalContainer(
            Window(FormattedTextControl(above), dont_extend_height=True, wrap_lines=False),
            filter=Condition(has_above),
        ),
        ConditionalContainer(input_window, filter=Condition(lambda: ctl.overlay is None)),
        Window(FormattedTextControl(below), dont_extend_height=True, wrap_lines=False),
    ])
    return Layout(body, focused_element=input_window)


def hint_rows(text: str, width: int) -> list[str]:
    """A ``·``-separated hint in as many rows as ``width`` needs, broken between items."""
    rows: list[str] = []
    for item in text.split(" · "):
        if rows and len(rows[-1]) + 3 + len(item) <= width:
            rows[-1] += " · " + item
        else:
            rows.append(item)
    return [clip(r, width) if len(r) > width else r for r in rows]


def live_answer_rows(screen_rows: int) -> int:
    """How many rows of the open Markdown block the live region shows (its tail; the whole
    block goes to the scrollback when it closes): at most about half the screen, so that a
    terminal narrowed to half its width re-wraps the region within the screen, where the
    next frame can erase it, instead of pushing its top into the scrollback."""
    return max(3, min(screen_rows - RESERVED_ROWS, screen_rows // 2 - RESERVED_ROWS // 2))


def reasoning_tail(text: str, width: int, height: int) -> list[str]:
    """The last ``height`` rows of ``text`` word-wrapped at ``width`` (only its end is
    wrapped, so a long reasoning costs the same per frame as a short one)."""
    import textwrap

    width = max(10, width)
    tail = text[-(width * height * 3):]
    rows: list[str] = []
    for paragraph in tail.strip().split("\n"):
        rows += textwrap.wrap(paragraph, width, break_long_words=True, replace_whitespace=False) or [""]
    return rows[-height:]


def _pad_to_keep_rows(fragments: Fragments, rows: int) -> Fragments:
    """Blank rows on top of the region's upper part so it spans ``rows`` rows (see
    ``FrameOutput.keep_rows_above``); unchanged when it already does."""
    if rows <= 0:
        return fragments
    if not fragments:
        return [("", "\n" * (rows - 1))]
    have = sum(text.count("\n") for _, text, *_ in fragments) + 1
    return [("", "\n" * (rows - have)), *fragments] if rows > have else fragments


def _trim_last_newline(fragments: Fragments) -> Fragments:
    """Drop the newline ending the last row (it would draw an empty row)."""
    if fragments and fragments[-1][1].endswith("\n"):
        style, text = fragments[-1][:2]
        fragments = fragments[:-1] + [(style, text[:-1])]
    return fragments


def _merge_runs(fragments: Any) -> Fragments:
    """Join neighbouring fragments of one style (PT's ANSI parser yields one per char)."""
    merged: Fragments = []
    for fragment in fragments:
        style, text = fragment[0], fragment[1]
        if merged and merged[-1][0] == style:
            merged[-1] = (style, merged[-1][1] + text)
        else:
            merged.append((style, text))
    return merged
