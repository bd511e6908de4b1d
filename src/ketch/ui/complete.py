"""Completion of ``@path`` mentions and of the ``/`` command name, as pure functions.

Two rules are decisions, not mechanics:

* the ``@`` must start a word, so ``user@host`` never opens the file picker;
* a prefix match on the path outranks a match on the basename, which outranks a
  substring match, which outranks a fuzzy one: ``@src/`` means "under ``src/``" and
  ``vendor/src/…`` must not bury it.

Candidates are workspace-relative paths with ``/`` separators; directories end in ``/``.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass


@dataclass(frozen=True)
class AtToken:
    """An open ``@`` mention: ``text[start:end]`` is ``@`` + ``query``; ``end`` is the cursor."""

    start: int
    end: int
    query: str


@dataclass(frozen=True)
class SlashToken:
    """The command name being typed: ``text[0:end]`` is ``/`` + ``query``."""

    end: int
    query: str


def find_at_token(text: str, cursor: int) -> AtToken | None:
    """The ``@`` mention the cursor is in, if any: the word before the cursor must
    start with ``@`` (at the start of input or after whitespace)."""
    cursor = max(0, min(cursor, len(text)))
    start = cursor
    while start > 0 and not text[start - 1].isspace():
        start -= 1
    if start == cursor or text[start] != "@":
        return None
    return AtToken(start, cursor, text[start + 1 : cursor])


def find_slash_token(text: str, cursor: int) -> SlashToken | None:
    """The command name being typed, only at the very start of the input and only while
    the cursor is still inside the name."""
    cursor = max(0, min(cursor, len(text)))
    if not text.startswith("/") or cursor == 0:
        return None
    name = text[1:cursor]
    if any(ch.isspace() for ch in name):
        return None
    return SlashToken(cursor, name)


def _is_subsequence(query: str, text: str) -> bool:
    it = iter(text)
    return all(ch in it for ch in query)


def _tier(query: str, path: str) -> int | None:
    if not query:
        return 0
    if path.startswith(query):
        return 0
    base = path.rstrip("/").rsplit("/", 1)[-1]
    if base.startswith(query):
        return 1
    if query in path:
        return 2
    if _is_subsequence(query, path):
        return 3
    return None


def rank(query: str, candidates: Iterable[str], limit: int = 50) -> list[str]:
    """Order the candidates matching ``query``: path prefix, basename prefix, substring,
    then subsequence; within a tier shallower, then shorter, then alphabetical.
    Matching ignores case unless the query contains an upper-case letter."""
    fold = query == query.lower()
    q = query.lower() if fold else query
    scored = []
    for path in dict.fromkeys(candidates):
        tier = _tier(q, path.lower() if fold else path)
        if tier is not None:
            scored.append((tier, path.rstrip("/").count("/"), len(path), path))
    scored.sort()
    return [item[3] for item in scored[: max(0, limit)]]


def insert_completion(text: str, token: AtToken, choice: str) -> tuple[str, int]:
    """Replace the token with ``@choice`` and return the new text and cursor. A file gets
    a trailing space (reusing one already there); a directory keeps its ``/`` so the
    user can keep typing into it."""
    is_dir = choice.endswith("/")
    rest = text[token.end :]
    mention = "@" + choice
    if is_dir:
        new_text = text[: token.start] + mention + rest
        return new_text, token.start + len(mention)
    if rest[:1].isspace():
        new_text = text[: token.start] + mention + rest
        return new_text, token.start + len(mention) + 1
    new_text = text[: token.start] + mention + " " + rest
    return new_text, token.start + len(mention) + 1
