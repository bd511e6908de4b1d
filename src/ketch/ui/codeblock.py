"""Fast syntax highlighting for fenced code blocks (pygments straight to ANSI).

Rich's Syntax took ~300 ms for a 170-line block on these machines, stalling the event
loop (and key echo) while the block was committed; pygments alone takes ~20 ms.
No background colour; long lines wrap at the terminal width.
"""

from __future__ import annotations

import os
from functools import lru_cache
from typing import Any

THEME = "monokai"


@lru_cache(maxsize=32)
def _lexer(name: str) -> Any:
    from pygments.lexers import get_lexer_by_name
    from pygments.util import ClassNotFound

    try:
        return get_lexer_by_name(name or "text", stripnl=False, ensurenl=False)
    except ClassNotFound:
        return get_lexer_by_name("text", stripnl=False, ensurenl=False)


def _truecolor() -> bool:
    return os.environ.get("COLORTERM", "").lower() in ("truecolor", "24bit")


@lru_cache(maxsize=1)
def _style() -> Any:
    from pygments.styles import get_style_by_name

    return get_style_by_name(THEME)


@lru_cache(maxsize=512)
def _sgr(token_type: Any) -> str:
    spec = _style().style_for_token(token_type)
    codes: list[str] = []
    if spec.get("bold"):
        codes.append("1")
    if spec.get("italic"):
        codes.append("3")
    color = spec.get("color")
    if color and color != _plain_color():
        r, g, b = (int(color[i:i + 2], 16) for i in (0, 2, 4))
        codes.append(f"38;2;{r};{g};{b}" if _truecolor() else f"38;5;{_to_256(r, g, b)}")
    return ";".join(codes)


@lru_cache(maxsize=1)
def _plain_color() -> str:
    from pygments.token import Text

    return str(_style().style_for_token(Text).get("color") or "")


def _to_256(r: int, g: int, b: int) -> int:
    def level(v: int) -> int:
        return 0 if v < 48 else 1 if v < 115 else (v - 35) // 40

    return 16 + 36 * level(r) + 6 * level(g) + level(b)


def highlight(code: str, language: str, width: int) -> list[str]:
    """ANSI lines for ``code`` (no trailing padding), wrapped at ``width`` columns."""
    rows: list[list[tuple[str, str]]] = [[]]
    used = 0
    for token_type, value in _lexer(language.lower()).get_tokens(code):
        sgr = _sgr(token_type) if value.strip() else ""
        for i, piece in enumerate(value.split("\n")):
            if i:
                rows.append([])
                used = 0
            while piece:
                if used >= width:
                    rows.append([])
                    used = 0
                chunk, piece = piece[: width - used], piece[width - used:]
                row = rows[-1]
                if row and row[-1][0] == sgr:
                    row[-1] = (sgr, row[-1][1] + chunk)
                else:
                    row.append((sgr, chunk))
                used += len(chunk)
    lines = ["".join(f"\x1b[{c}m{t}\x1b[0m" if c else t for c, t in row) for row in rows]
    while lines and not lines[-1]:
        lines.pop()
    return lines
