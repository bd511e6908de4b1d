"""Fast syntax highlighting for fenced code blocks (pygments straight to ANSI).

Rich's Syntax took ~300 ms for a 170-line block on these machines, stalling the event
loop (and key echo) while the block was committed; pygments alone takes ~20 ms.
No background colour; long lines wrap at the terminal width.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any

# Token colours: the terminal's own 16 ANSI colours and attributes, never fixed RGB, so
# code reads on dark and light themes alike and needs nothing above 16 colours. Plain
# names, operators and punctuation keep the terminal's foreground.
TOKEN_SGR: dict[str, str] = {
    "Keyword": "35", "Keyword.Constant": "36", "Name.Builtin": "36", "Name.Constant": "36",
    "Name.Function": "1", "Name.Class": "1", "Name.Decorator": "36", "Name.Tag": "35",
    "Name.Attribute": "36", "Literal.String": "32", "Literal.Number": "36", "Comment": "2;3",
    "Generic.Inserted": "32", "Generic.Deleted": "31", "Generic.Heading": "1",
    "Generic.Subheading": "1", "Generic.Emph": "3", "Generic.Strong": "1", "Error": "31",
}
_RICH_STYLE = {"35": "magenta", "36": "cyan", "1": "bold", "32": "green", "2;3": "dim italic",
               "31": "red", "3": "italic"}


@lru_cache(maxsize=32)
def _lexer(name: str) -> Any:
    from pygments.lexers import get_lexer_by_name
    from pygments.util import ClassNotFound

    try:
        return get_lexer_by_name(name or "text", stripnl=False, ensurenl=False)
    except ClassNotFound:
        return get_lexer_by_name("text", stripnl=False, ensurenl=False)


@lru_cache(maxsize=512)
def _sgr(token_type: Any) -> str:
    """The SGR of a token: its own entry or its nearest ancestor's."""
    while token_type is not None:
        name = ".".join(token_type)
        if name in TOKEN_SGR:
            return TOKEN_SGR[name]
        token_type = token_type.parent
    return ""


def rich_theme() -> Any:
    """The same colours as a Rich syntax theme (code inside lists, quotes)."""
    from pygments.token import string_to_tokentype
    from rich.style import Style
    from rich.syntax import ANSISyntaxTheme

    return ANSISyntaxTheme({string_to_tokentype(k): Style.parse(_RICH_STYLE[v]) for k, v in TOKEN_SGR.items()})


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
