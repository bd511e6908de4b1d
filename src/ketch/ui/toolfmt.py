"""How a tool call reads on one line, and how its result is summarised."""

from __future__ import annotations

from typing import Any

_KEY_ARGS = ("command", "path", "file_path", "pattern", "query", "url", "description", "question", "name")
BULLET = "●"


def key_argument(args: dict[str, Any]) -> str:
    """The one argument that says what a call does (the command, the path, ...)."""
    for key in _KEY_ARGS:
        value = args.get(key)
        if isinstance(value, str) and value:
            return value
    for value in args.values():
        if isinstance(value, str) and value:
            return value
    return ""


def headline(name: str, args: dict[str, Any], width: int) -> str:
    """``● shell  pytest -q`` cut to ``width`` columns (first line of the argument only)."""
    arg = key_argument(args).splitlines()[0] if key_argument(args) else ""
    text = f"{BULLET} {name}  {arg}".rstrip()
    return text if len(text) <= width else text[: max(1, width - 1)] + "…"


def clip(text: str, width: int) -> str:
    """One line, cut to ``width`` columns."""
    line = text.replace("\t", "    ")
    return line if len(line) <= width else line[: max(1, width - 1)] + "…"


def diff_line_style(line: str) -> str:
    """The ANSI SGR code for one unified-diff line ('' for context)."""
    if line.startswith(("+++", "---")):
        return "1"
    if line.startswith("+"):
        return "32"
    if line.startswith("-"):
        return "31"
    if line.startswith("@@"):
        return "36"
    return ""


def paint(text: str, sgr: str) -> str:
    """Wrap ``text`` in an SGR code (no-op for an empty code)."""
    return f"\x1b[{sgr}m{text}\x1b[0m" if sgr else text


def result_lines(name: str, args: dict[str, Any], summary: str, *, is_error: bool, diff: str,
                 width: int, max_lines: int = 40) -> list[str]:
    """ANSI lines committed when a call finishes: headline, then diff or summary."""
    bullet_sgr = "31" if is_error else "32"
    head = headline(name, args, width)
    lines = [paint(BULLET, bullet_sgr) + paint(head[1:], "1")]
    body: list[str] = []
    if diff:
        diff_rows = diff.splitlines()
        for row in diff_rows[:max_lines]:
            body.append(paint(clip(row, width - 4), diff_line_style(row)))
        if len(diff_rows) > max_lines:
            body.append(paint(f"… {len(diff_rows) - max_lines} more diff lines", "2"))
    elif summary:
        rows = summary.splitlines()
        shown = rows[-max_lines:] if len(rows) > max_lines else rows
        if len(rows) > max_lines:
            body.append(paint(f"… {len(rows) - max_lines} earlier lines", "2"))
        for row in shown:
            body.append(paint(clip(row, width - 4), "31" if is_error else "2"))
    lines.extend(f"  ⎿ {row}" if i == 0 else f"    {row}" for i, row in enumerate(body))
    return lines
