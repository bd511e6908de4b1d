"""ANSI rendering: no unstyled trailing padding, no code background, fast code path."""

from __future__ import annotations

import re

from ketch.ui.codeblock import highlight
from ketch.ui.rich_render import AnsiRenderer

SGR = re.compile(r"\x1b\[[0-9;]*m")


def plain(line: str) -> str:
    return SGR.sub("", line)


def has_background(text: str) -> bool:
    """True if any SGR sequence sets a background colour."""
    for match in re.finditer(r"\x1b\[([0-9;]*)m", text):
        params = [int(p) for p in match.group(1).split(";") if p]
        i = 0
        while i < len(params):
            p = params[i]
            if p == 48 or 40 <= p <= 47 or 100 <= p <= 107:
                return True
            i += 3 if p == 38 and params[i + 1:i + 2] == [5] else 5 if p == 38 else 1
        continue
    return False


def test_markdown_lines_carry_no_trailing_padding() -> None:
    lines = AnsiRenderer().markdown("Short line.\n\n- a\n- b\n\n> quoted", 80)
    assert [plain(x) for x in lines][:1] == ["Short line."]
    assert all(not plain(x).endswith(" ") for x in lines)
    assert all(len(plain(x)) < 40 for x in lines)


def test_code_blocks_have_no_background_colour() -> None:
    for text in ("```python\nx = 1\n```", "1. step\n\n   ```python\n   x = 1\n   ```"):
        out = "\n".join(AnsiRenderer().markdown(text, 60))
        assert "x" in plain(out)
        assert not has_background(out)


def test_highlight_wraps_long_lines_and_keeps_text() -> None:
    code = "value = " + " + ".join(str(i) for i in range(40))
    lines = highlight(code + "\nprint(value)", "python", 30)
    assert all(len(plain(x)) <= 30 for x in lines)
    assert "".join(plain(x) for x in lines[:-1]) == code
    assert plain(lines[-1]) == "print(value)"
    assert "\x1b[" in lines[-1]


def test_unknown_language_falls_back_to_plain_text() -> None:
    assert [plain(x) for x in highlight("a b\nc", "nosuchlang", 20)] == ["a b", "c"]
