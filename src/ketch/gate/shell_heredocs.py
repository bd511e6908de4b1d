"""Here-documents as bash reads them, to check the grammar's reading against.

tree-sitter-bash ends a here-document at the first line that looks like its delimiter;
bash first joins backslash-newlines in the body of an unquoted one, strips leading tabs
only for ``<<-``, and compares the whole line (``E `` with a trailing space is not ``E``).
Where the two disagree, lines the grammar reads as commands are text to bash, or the
other way round, so the parse proves nothing: ``heredoc_mismatch`` says where.

Kept conservative: a here-document inside a substitution, a delimiter with an expansion
in it, or a body that does not start right after the line holding its operator is
reported as a mismatch too (ketch then calls the command unparsed).
"""

from __future__ import annotations

from typing import Any

_QUOTED_CONTAINERS = frozenset({"string", "raw_string", "ansi_c_string", "translated_string"})
_SUBSTITUTIONS = frozenset({"command_substitution", "process_substitution"})


def _delimiter(raw: str) -> tuple[str, bool] | None:
    """The delimiter bash compares lines with, and whether the word was quoted (then the
    body is taken as it is). None for words whose value ketch does not work out."""
    if "$" in raw or "`" in raw:
        return None
    out, i, quote = [], 0, ""
    quoted = False
    while i < len(raw):
        c = raw[i]
        if quote == "'":
            if c == "'":
                quote = ""
            else:
                out.append(c)
        elif quote == '"':
            if c == '"':
                quote = ""
            elif c == "\\" and i + 1 < len(raw) and raw[i + 1] in '"\\$`':
                out.append(raw[i + 1])
                i += 1
            else:
                out.append(c)
        elif c in "|&;()<> \t":
            return None  # bash's word ends here: the grammar took more than the delimiter
        elif c in "'\"":
            quote, quoted = c, True
        elif c == "\\":
            quoted = True
            if i + 1 < len(raw):
                out.append(raw[i + 1])
                i += 1
        else:
            out.append(c)
        i += 1
    if quote or "\n" in raw:
        return None
    return "".join(out), quoted


def _bash_end(data: bytes, start: int, delimiter: bytes, *, joins: bool, tabs: bool) -> tuple[int, int]:
    """From the body's first byte, the span of the physical line(s) bash takes as the
    delimiter line ((len, len) when it reads to the end of the input)."""
    pos = len(data)
    i = start
    while i < len(data):
        line_start = i
        logical = bytearray()
        while True:
            nl = data.find(b"\n", i)
            end = len(data) if nl == -1 else nl
            piece = data[i:end]
            i = end + 1 if nl != -1 else len(data)
            backslashes = len(piece) - len(piece.rstrip(b"\\"))
            if joins and nl != -1 and backslashes % 2 == 1:
                logical += piece[:-1]
                if i >= len(data):
                    break
                continue
            logical += piece
            break
        line = bytes(logical).lstrip(b"\t") if tabs else bytes(logical)
        if line == delimiter:
            return line_start, (i - 1 if i <= len(data) and data[i - 1 : i] == b"\n" else i)
    return pos, pos


def _line_span(data: bytes, node: Any) -> tuple[int, int]:
    start = data.rfind(b"\n", 0, node.start_byte) + 1
    end = data.find(b"\n", node.end_byte)
    return start, len(data) if end == -1 else end


def _inside(node: Any, kinds: frozenset[str]) -> bool:
    node = node.parent
    while node is not None:
        if node.type in kinds:
            return True
        node = node.parent
    return False


def _newlines_before_body(root: Any, data: bytes, after: int, body_start: int) -> bool:
    """Every newline between the operator and the body is quoted or escaped (bash reads
    the body after the first newline that ends the command line)."""
    for k in range(after, body_start - 1):
        if data[k : k + 1] != b"\n":
            continue
        backslashes = k - len(data[:k].rstrip(b"\\"))
        if backslashes % 2 == 1:
            continue
        node = root.descendant_for_byte_range(k, k + 1)
        if node is None or not (node.type in _QUOTED_CONTAINERS or _inside(node, _QUOTED_CONTAINERS)):
            return False
    return True


def heredoc_mismatch(root: Any, data: bytes) -> int | None:
    """The byte offset of the first here-document the grammar ends (or starts) where
    bash would not; None when every one agrees."""
    stack = [root]
    found: list[Any] = []
    while stack:
        node = stack.pop()
        if node.type == "heredoc_redirect":
            found.append(node)
        stack.extend(reversed(node.children))
    for node in found:
        if _inside(node, _SUBSTITUTIONS):
            return node.start_byte
        kids = {c.type: c for c in node.children}
        start, body, end = kids.get("heredoc_start"), kids.get("heredoc_body"), kids.get("heredoc_end")
        if start is None or end is None:
            return node.start_byte
        parsed = _delimiter(start.text.decode("utf-8", "surrogateescape"))
        if parsed is None or not parsed[0]:
            return node.start_byte
        delimiter, quoted = parsed
        first = body if body is not None else end
        body_start = data.rfind(b"\n", 0, first.start_byte) + 1
        if data[body_start : first.start_byte].strip(b"\t"):
            return node.start_byte
        if body_start == 0 or data[body_start - 1 : body_start] != b"\n" or not _newlines_before_body(root, data, start.end_byte, body_start):
            return node.start_byte
        dash = any(c.type == "<<-" for c in node.children)
        bash = _bash_end(data, body_start, delimiter.encode("utf-8", "surrogateescape"), joins=not quoted, tabs=dash)
        if bash != _line_span(data, end):
            return node.start_byte
    return None
