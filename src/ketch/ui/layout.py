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
INPUT_MAX_ROWS = 10
RESERVED_ROWS = 8

STYLE = Style.from_dict({
    "dim": "#888888",
    "prompt": "bold",
    "tool": "#d7af00",
    "queued": "#888888 italic",
    "hint": "#d7af00",
    "status": "#888888",
    "overlay.title": "bold",
    "choice.selected": "bold #5fafff",
    "overlay.input": "",
    "menu.selected": "reverse",
    "menu": "",
    "menu.detail": "#888888",
    "diff.add": "#5faf5f",
    "diff.del": "#d75f5f",
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
        out: Fragments = list(cache.get(view.answer_lines, size.rows - RESERVED_ROWS))
        if view.reasoning:
            if ctl.reasoning_expanded:
                rows = view.reasoning.strip().splitlines()[-10:]
                out.append(("class:dim", "✻ thinking (ctrl-r to collapse)\n"))
                out += [("class:dim", "  " + clip(r, width - 3) + "\n") for r in rows]
            else:
                out.append(("class:dim", f"✻ thinking… ~{ctl.reasoning_tokens()} tokens (ctrl-r to expand)\n"))
        for tool in view.tools.values():
            out.append(("class:tool", headline(tool.name, tool.args, width) + "\n"))
            out += [("class:dim", "  │ " + clip(r, width - 5) + "\n") for r in tool.lines()]
        for label in view.subagents.values():
            out.append(("class:dim", "  ↳ " + clip(label, width - 5) + "\n"))
        if ctl.busy and not ctl.overlay:
            out.append(("class:dim", "… working · esc to cancel · ctrl-c stops a command\n"))
        if not ctl.session_ready and ctl.queue:
            out.append(("class:dim", "… loading the model\n"))
        for text in ctl.queue:
            out.append(("class:queued", "⧗ queued: " + clip(text.splitlines()[0] if text else "", width - 12) + "\n"))
        overlay = ctl.overlay
        if overlay is not None:
            out += overlay.fragments(width)
        return _trim_last_newline(out)

    def below() -> Fragments:
        width = ctl.output.get_size().columns
        out: Fragments = []
        menu = ctl.menu
        if menu is not None and ctl.overlay is None:
            for i, item in enumerate(menu.items):
                style = "class:menu.selected" if i == menu.selected else "class:menu"
                out.append((style, f" {clip(item.label, width - 2)} "))
                if item.detail:
                    out.append(("class:menu.detail", " " + clip(item.detail, max(1, width - len(item.label) - 4))))
                out.append(("", "\n"))
        if ctl.hint:
            out.append(("class:hint", clip(ctl.hint, width) + "\n"))
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
