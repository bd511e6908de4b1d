"""The ``---`` front matter of Markdown files ketch reads (skills, user commands).

Only the simple subset: ``key: value`` lines, optionally quoted values, ``#`` comments.
Indented lines (YAML lists or nested values) are skipped; any other line without a colon
is an error.
"""

from __future__ import annotations


class FrontMatterError(ValueError):
    """The front matter cannot be read; the message says where."""


def _unquote(value: str) -> str:
    value = value.strip()
    if len(value) >= 2 and value[0] == value[-1] and value[0] in "\"'":
        inner = value[1:-1]
        if value[0] == '"':
            return inner.replace('\\"', '"').replace("\\\\", "\\")
        return inner.replace("''", "'")
    return value


def split_front_matter(text: str) -> tuple[dict[str, str], str] | None:
    """``(meta, body)`` with lower-cased keys, or None when ``text`` has no front matter.

    ``body`` is the text after the closing ``---`` line, exactly as written."""
    lines = text.lstrip("\ufeff").splitlines(keepends=True)
    if not lines or lines[0].strip() != "---":
        return None
    try:
        end = next(i for i in range(1, len(lines)) if lines[i].strip() == "---")
    except StopIteration:
        raise FrontMatterError("front matter starts with '---' but never ends (no closing '---' line)") from None
    meta: dict[str, str] = {}
    for number, line in enumerate(lines[1:end], start=2):
        if not line.strip() or line.lstrip().startswith("#") or line[0] in " \t":
            continue
        key, colon, value = line.partition(":")
        if not colon or not key.strip():
            raise FrontMatterError(f"front matter line {number} is not 'key: value'")
        meta[key.strip().lower()] = _unquote(value)
    return meta, "".join(lines[end + 1 :])
