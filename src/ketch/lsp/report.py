"""Diagnostics as ketch keeps and shows them: parsed narrowly from what a server sent, the
errors and warnings an edit added (compared without positions, which an edit shifts), and
the bounded text a tool result carries.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

MAX_KEPT = 1000
"""Diagnostics kept per file (a server may send any number)."""
MAX_SHOWN = 20
"""Diagnostics listed in one tool result."""
MAX_MESSAGE_CHARS = 300
MAX_REPORT_CHARS = 4000
SEVERITIES = {1: "error", 2: "warning", 3: "info", 4: "hint"}


@dataclass(frozen=True)
class Diagnostic:
    line: int
    """1-based."""
    column: int
    """1-based."""
    severity: int
    """1 error, 2 warning, 3 information, 4 hint (a server that names none: error)."""
    message: str
    source: str = ""
    code: str = ""

    @property
    def identity(self) -> tuple[int, str, str, str]:
        """What stays the same when an edit moves the problem to another line."""
        return (self.severity, self.source, self.code, self.message)

    def render(self, shown: str) -> str:
        tail = f" [{self.source}{' ' + self.code if self.code else ''}]" if self.source or self.code else ""
        return f"{shown}:{self.line}:{self.column}: {SEVERITIES.get(self.severity, 'error')}: {self.message}{tail}"


def _clean(text: str, limit: int) -> str:
    """One line without control characters, cut to ``limit``."""
    flat = " ".join("".join(c if c.isprintable() else " " for c in text).split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def _whole(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None


def parse_diagnostics(raw: Any) -> tuple[Diagnostic, ...]:
    """The well-formed entries of a server's diagnostics list; the rest are left out."""
    if not isinstance(raw, list):
        return ()
    out: list[Diagnostic] = []
    for item in raw[:MAX_KEPT]:
        if not isinstance(item, dict) or not isinstance(item.get("message"), str):
            continue
        start = item.get("range", {}).get("start") if isinstance(item.get("range"), dict) else None
        line = _whole(start.get("line")) if isinstance(start, dict) else None
        column = _whole(start.get("character")) if isinstance(start, dict) else None
        if line is None or column is None:
            continue
        severity = item.get("severity", 1)
        if severity not in SEVERITIES or isinstance(severity, bool):
            continue
        source = item.get("source") if isinstance(item.get("source"), str) else ""
        code = item.get("code")
        code_text = str(code) if isinstance(code, (str, int)) and not isinstance(code, bool) else ""
        out.append(Diagnostic(line + 1, column + 1, severity, _clean(item["message"], MAX_MESSAGE_CHARS),
                              _clean(source, 40), _clean(code_text, 40)))
    return tuple(out)


def problems(items: Iterable[Diagnostic]) -> list[Diagnostic]:
    """Errors and warnings only, errors first, in file order."""
    return sorted((d for d in items if d.severity <= 2), key=lambda d: (d.severity, d.line, d.column))


def added(before: Iterable[Diagnostic], after: Iterable[Diagnostic]) -> tuple[list[Diagnostic], int]:
    """(errors and warnings in ``after`` that ``before`` did not have, how many of ``before``'s are gone)."""
    left = Counter(d.identity for d in problems(before))
    new: list[Diagnostic] = []
    for diagnostic in problems(after):
        if left[diagnostic.identity] > 0:
            left[diagnostic.identity] -= 1
        else:
            new.append(diagnostic)
    return new, sum(left.values())


def listing(items: list[Diagnostic], shown: str) -> str:
    """At most ``MAX_SHOWN`` lines and ``MAX_REPORT_CHARS`` characters, saying what was left out."""
    lines: list[str] = []
    used = 0
    for diagnostic in items[:MAX_SHOWN]:
        line = diagnostic.render(shown)
        if used + len(line) + 1 > MAX_REPORT_CHARS:
            break
        lines.append(line)
        used += len(line) + 1
    if len(lines) < len(items):
        lines.append(f"(and {len(items) - len(lines)} more)")
    return "\n".join(lines)


def after_edit_text(server: str, shown: str, before: Iterable[Diagnostic], after: Iterable[Diagnostic]) -> str:
    """The lines an edit's result gains: the new problems, and a count of the ones it cleared."""
    new, gone = added(before, after)
    server = f"the {server} language server"
    parts = []
    if new:
        parts.append(f"{server[0].upper()}{server[1:]} reports {len(new)} new problem{'s' if len(new) != 1 else ''} in {shown}:\n{listing(new, shown)}")
    if gone:
        parts.append(f"({gone} problem{'s' if gone != 1 else ''} {server} reported before this edit no longer {'appear' if gone != 1 else 'appears'}.)")
    return "\n".join(parts)
