"""Where tree-sitter-bash reads a command line otherwise than bash does.

Each check finds a construct the grammar is known to read differently (a continuation
that bash joins inside a word, one simple command over two lines, a bare newline in a
word, backticks paired wrongly, text the grammar dropped); ``shell_parse`` then calls the
command unparsed, which no allow rule covers and every guard refuses. The differential
test against bash (``tests/test_shell_parse_vs_bash.py``) is where new ones are found.
"""

from __future__ import annotations

import re
from typing import Any


_LITERAL_CONTAINERS = frozenset({"raw_string", "heredoc_body", "heredoc_content", "comment", "ansi_c_string", "string"})


def split_continuation(root: Any, data: bytes) -> int | None:
    """Where a backslash-newline joins two pieces bash reads as one word but the grammar
    split (``git p\\<newline>ush`` is ``git push`` to bash, ``a\\<newline>#x`` is ``a#x``
    where the grammar reads a comment); None when there is none."""
    for match in re.finditer(rb"(\\+)\n", data):
        start = match.start()
        k = match.end() - 2  # the backslash before the newline
        if len(match.group(1)) % 2 == 0 or start == 0 or match.end() >= len(data):
            continue
        if data[start - 1 : start].isspace() or data[match.end() : match.end() + 1].isspace():
            continue
        before = root.descendant_for_byte_range(start - 1, start)
        after = root.descendant_for_byte_range(match.end(), match.end() + 1)
        if after is not None and after.type == "comment" and after.start_byte == match.end() and not _inside(before, _COMMENT):
            return k  # ``a\<newline>#x`` (or ``'a'\<newline>#x``) is the word ``a#x`` to bash: a ``#`` inside a word starts no comment
        if _literal(before) or _literal(after):
            continue
        if before is None or after is None or before.id != after.id:
            return k
    return None


_ONE_LINE = frozenset({"command", "file_redirect", "redirected_statement", "variable_assignment"})
_MAY_HOLD_NEWLINES = frozenset({"raw_string", "ansi_c_string", "string_content", "heredoc_body", "heredoc_content", "translated_string", "comment"})
_BARE_NEWLINE = re.compile(rb"(?<!\\)\n")


def joined_lines(node: Any, data: bytes) -> tuple[int, str] | None:
    """Where the grammar's parse cannot be what bash runs: one simple command (or
    redirection) of words on different lines (tree-sitter-bash reads ``a | b |
    c<newline>d e`` as ``c d e``; bash ends a simple command at a newline), a token
    holding a bare newline, or backticks it paired wrongly."""
    if node.type == "command_substitution" and data[node.start_byte : node.start_byte + 1] == b"`" and b"\\" in data[node.start_byte : node.end_byte]:
        return node.start_byte, "backslashes inside backticks (bash removes some before it reads the command)"
    if node.type == "``":
        return node.start_byte, "two backtick substitutions as one"  # `a` `b` read as one, holding "` `"
    if node.child_count == 0 and node.type not in _MAY_HOLD_NEWLINES and _BARE_NEWLINE.search(data, node.start_byte, node.end_byte):
        return node.start_byte, "a word across a line break"  # an unquoted word never holds a newline in bash
    if node.type in _ONE_LINE:
        children = node.children
        for left, right in zip(children, children[1:]):
            if right.type == "heredoc_redirect" or left.type == "heredoc_redirect":
                continue
            if _BARE_NEWLINE.search(data, left.end_byte, right.start_byte):
                return left.end_byte, "two lines as one command"
    for child in node.children:
        found = joined_lines(child, data)
        if found is not None:
            return found
    return None


_CODE_CONTAINERS = frozenset({"command_substitution", "process_substitution", "arithmetic_expansion", "expansion"})


def _literal(node: Any) -> bool:
    """Inside quotes, a comment or a here-document body (and not in a substitution
    nested there): a backslash-newline is no word break the grammar could miss."""
    while node is not None:
        if node.type in _CODE_CONTAINERS:
            return False
        if node.type in _LITERAL_CONTAINERS:
            return True
        node = node.parent
    return False


_TEXT_CONTAINERS = frozenset({"string", "raw_string", "ansi_c_string", "translated_string", "heredoc_body", "heredoc_content", "comment"})


def skipped_text(root: Any, data: bytes) -> int | None:
    """Where a byte that is not blank lies outside every token of the parse (the grammar
    dropped it: ``printf -c - 3<in`` loses its ``-``); None when there is none."""
    covered = bytearray(len(data))
    stack = [root]
    while stack:
        node = stack.pop()
        if node.child_count == 0 or node.type in _TEXT_CONTAINERS:
            covered[node.start_byte : node.end_byte] = b"\x01" * (node.end_byte - node.start_byte)
        else:
            stack.extend(node.children)
    for k, byte in enumerate(data):
        if covered[k] or byte in b" \t\n":
            continue
        if byte == 0x5C and data[k + 1 : k + 2] == b"\n":
            continue  # a line continuation between words
        return k
    return None


_COMMENT = frozenset({"comment"})


def _inside(node: Any, kinds: frozenset[str]) -> bool:
    while node is not None:
        if node.type in kinds:
            return True
        node = node.parent
    return False
