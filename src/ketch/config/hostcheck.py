"""One check for every URL ketch connects to: no control byte, and a host that is a host.

A host name carrying a NUL, a newline or another control character (raw, percent-encoded,
behind a full-width or other compatibility form that IDNA folds into a delimiter, or inside a
punycode ``xn--`` label) can be read one way by the check that allows a URL and another by
the resolver, the TLS layer or a log line. Such a URL is refused before any connection with
one clear sentence: ``web_fetch`` (each redirect hop), connection base URLs, MCP server URLs,
the registry, and the search endpoint all call ``url_problem``.
"""

from __future__ import annotations

import re
import unicodedata
from urllib.parse import unquote, urlsplit

_INVISIBLE = frozenset({"Cc", "Cf", "Zl", "Zp", "Cs", "Co", "Cn"})
"""Unicode categories refused anywhere in a URL: controls (C0, C1, DEL), format characters
(zero-width, bidi), line and paragraph separators, surrogates, private use, unassigned."""


def _first_bad(text: str, *, spaces: bool = False) -> str | None:
    """The first refused character of ``text`` (with ``spaces``, any space counts too)."""
    for char in text:
        if unicodedata.category(char) in _INVISIBLE or (spaces and (char.isspace() or unicodedata.category(char) == "Zs")):
            return char
    return None
_HOST_OK = re.compile(r"[A-Za-z0-9_-]+(\.[A-Za-z0-9_-]+)*\.?")
_DELIMITERS = set("/?#@:%\\[] ")
_IDNA_DOTS = frozenset("\u3002\uff0e\uff61")
"""Characters IDNA reads as a label dot: ``127\uff0e0\uff0e0\uff0e1`` is ``127.0.0.1``."""


def _shown(text: str) -> str:
    return text.encode("unicode_escape").decode("ascii")


def url_problem(url: str) -> str | None:
    """Why ``url`` must not be connected to (one sentence), or None when its host is clean."""
    bad = _first_bad(url)
    if bad:
        return f"the URL {_shown(url)!r} holds a control or invisible character ({_shown(bad)})"
    try:
        parts = urlsplit(url)
        host = parts.hostname or ""
    except ValueError as exc:
        return f"the URL {_shown(url)!r} cannot be read ({exc})"
    if "%" in host:
        return f"the host of {_shown(url)!r} is percent-encoded (a host name never needs it)"
    if _first_bad(unquote(parts.netloc)):
        return f"the address part of {_shown(url)!r} percent-encodes a control character"
    bad = _first_bad(parts.netloc, spaces=True)
    if bad:
        return f"the host of {_shown(url)!r} holds a space or an invisible character ({_shown(bad)})"
    if not host or host.startswith("[") or ":" in host:  # no host: the caller's own check says so  # an IPv6 literal: urlsplit already checked its brackets
        return None
    return _host_problem(host, url)


def _host_problem(host: str, url: str) -> str | None:
    if _HOST_OK.fullmatch(host):
        for label in host.lower().split("."):
            if label.startswith("xn--"):
                try:
                    import idna

                    plain = idna.decode(label)
                except Exception:  # noqa: BLE001 - idna raises more than IDNAError on some input
                    return f"the host of {_shown(url)!r} has a punycode label that is not a valid international name"
                if _first_bad(plain, spaces=True) or set(unicodedata.normalize("NFKC", plain)) & _DELIMITERS:
                    return f"the host of {_shown(url)!r} decodes to a control or delimiter character"
        return None
    for char in host:
        if not char.isascii():
            folded = "." if char in _IDNA_DOTS else unicodedata.normalize("NFKC", char)
            if char in _IDNA_DOTS or (folded.isascii() and not folded.isalnum()):
                return f"the host of {_shown(url)!r} has {_shown(char)}, which IDNA folds into {folded!r}"
    folded = unicodedata.normalize("NFKC", host)
    if _first_bad(folded, spaces=True) or set(folded) & _DELIMITERS:
        return f"the host of {_shown(url)!r} folds into a control or delimiter character"
    try:
        import idna

        idna.encode(host, uts46=True)
    except Exception as exc:  # noqa: BLE001 - idna raises more than IDNAError on some input
        return f"the host of {_shown(url)!r} is not a valid international domain name ({exc})"
    return None
