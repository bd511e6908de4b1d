"""Turn Markdown, diffs and panels into ANSI lines with Rich (imported lazily).

Rich pads every line to the full width and paints code blocks with a background; both
cost bytes and make copied text carry trailing blanks. Lines here have unstyled trailing
padding stripped and code blocks carry no background.
"""

from __future__ import annotations

import io
import os
import re
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from rich.console import Console, RenderableType

_WHOLE_FENCE = re.compile(r"\A {0,3}(`{3,}|~{3,})([^\n]*)\n(.*?)\n? {0,3}\1[`~]*[ \t]*\Z", re.S)


def _color_system() -> str:
    if os.environ.get("COLORTERM", "").lower() in ("truecolor", "24bit"):
        return "truecolor"
    return "256"


class AnsiRenderer:
    """Renders Rich renderables to lists of ANSI strings, one per terminal row."""

    def __init__(self) -> None:
        self._console: Console | None = None
        self._markdown_cls: Any = None
        self._system: Any = None
        self._sgr_cache: dict[Any, str] = {}
        self._code_theme: Any = None

    def warm_up(self) -> None:
        """Import Rich, build the console and compile the common lexers (call from a
        thread after the first frame)."""
        self._ensure()
        self.markdown("# w\n\n**w** `w`\n\n- w\n\n```python\nx = 1\n```\n", 40)

    def _ensure(self) -> Console:
        if self._console is None:
            from rich.color import ColorSystem
            from rich.console import Console

            from ketch.ui._markdown import plain_code_markdown

            name = _color_system()
            from rich.theme import Theme

            console = Console(
                file=io.StringIO(), force_terminal=True, color_system=name, width=80,  # type: ignore[arg-type]
                highlight=False, emoji=False,
                theme=Theme({"markdown.code": "bold cyan", "markdown.block_quote": "italic",
                             "markdown.link_url": "underline", "markdown.hr": "dim"}),
            )
            self._system = ColorSystem.TRUECOLOR if name == "truecolor" else ColorSystem.EIGHT_BIT
            self._markdown_cls = plain_code_markdown()
            # published last: the warm-up thread may be here while the loop renders
            self._console = console
        return self._console

    def lines(self, renderable: RenderableType, width: int) -> list[str]:
        """Render any Rich renderable at ``width`` columns."""
        console = self._ensure()
        options = console.options.update(width=max(10, width))
        rows = console.render_lines(renderable, options, pad=False)
        return [self._row_to_ansi(row) for row in rows]

    def markdown(self, text: str, width: int) -> list[str]:
        """Render Markdown (code blocks highlighted, no background). A block that is one
        fenced code block goes straight to pygments (much faster than Rich's Syntax)."""
        fence = _WHOLE_FENCE.match(text)
        if fence:
            from ketch.ui.codeblock import highlight

            return highlight(fence.group(3), fence.group(2).strip().split(" ")[0], width)
        self._ensure()
        if self._code_theme is None:
            from ketch.ui.codeblock import rich_theme

            self._code_theme = rich_theme()
        rows = self.lines(self._markdown_cls(text, code_theme=self._code_theme, hyperlinks=False), width)
        while rows and not rows[-1]:
            rows.pop()
        while rows and not rows[0]:
            rows.pop(0)
        return rows

    def styled(self, text: str, style: str, width: int) -> list[str]:
        """Render plain text in one Rich style, wrapped at ``width``."""
        self._ensure()
        from rich.text import Text

        return self.lines(Text(text, style=style), width)

    def _row_to_ansi(self, row: list[Any]) -> str:
        segs = [seg for seg in row if not seg.control]
        while segs and _is_blank_padding(segs[-1]):
            segs.pop()
        if segs and _no_background(segs[-1].style):
            last = segs[-1]
            segs[-1] = type(last)(last.text.rstrip(" "), last.style)
        parts: list[str] = []
        run_style: Any = None
        run_text: list[str] = []
        for seg in segs:
            if seg.style != run_style and run_text:
                parts.append(self._paint("".join(run_text), run_style))
                run_text = []
            run_style = seg.style
            run_text.append(seg.text)
        if run_text:
            parts.append(self._paint("".join(run_text), run_style))
        return "".join(parts)

    def _paint(self, text: str, style: Any) -> str:
        if not style or not text:
            return text
        codes = self._sgr_cache.get(style)
        if codes is None:
            rendered = style.render("\0", color_system=self._system)
            opening = rendered.split("\0")[0]
            inner = [c for c in opening[2:-1].split(";") if c and c != "49"] if opening else []
            codes = f"\x1b[{';'.join(inner)}m" if inner else ""
            self._sgr_cache[style] = codes
        return f"{codes}{text}\x1b[0m" if codes else text


def _no_background(style: Any) -> bool:
    if style is None:
        return True
    bg = style.bgcolor
    return (bg is None or bg.is_default) and not style.underline and not style.reverse


def _is_blank_padding(seg: Any) -> bool:
    if seg.control or seg.text.strip(" "):
        return False
    return _no_background(seg.style)
