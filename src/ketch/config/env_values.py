"""Typed reads of the ``KETCH_*`` variables that hold a yes/no or a number.

The environment is the user's own, but a typo there must not silently turn a setting on or
off: each variable accepts a short fixed spelling list and anything else is a ``ConfigError``
naming the variable and the value (never a lenient ``bool(text)`` or a prefix parse).
"""

from __future__ import annotations

from collections.abc import Mapping

from ketch.protocol.exceptions import ConfigError

TRUE_WORDS = frozenset({"1", "true", "yes", "on"})
FALSE_WORDS = frozenset({"0", "false", "no", "off"})


def env_bool(environ: Mapping[str, str], name: str) -> bool | None:
    """``name`` as a yes/no (None when unset or empty); other text is an error."""
    raw = environ.get(name)
    if raw is None or raw == "":
        return None
    word = raw.strip().lower()
    if word in TRUE_WORDS:
        return True
    if word in FALSE_WORDS:
        return False
    raise ConfigError(f"{name} must be one of 1, true, yes, on, 0, false, no, off; not {raw!r}")


def env_int(environ: Mapping[str, str], name: str, *, minimum: int = 0) -> int | None:
    """``name`` as a whole number ≥ ``minimum`` written in ASCII digits (None when unset or empty)."""
    raw = environ.get(name)
    if raw is None or raw == "":
        return None
    text = raw.strip()
    if not (text.isascii() and text.isdigit()) or int(text) < minimum:
        raise ConfigError(f"{name} must be a whole number of at least {minimum}, not {raw!r}")
    return int(text)


_ENV_KEYS: dict[str, str] = {
    "KETCH_MODEL": "model",
    "KETCH_THINK": "think",
    "KETCH_AGENT": "agent",
}


def env_layer(environ: dict[str, str]) -> dict[str, object]:
    """The ``KETCH_*`` settings, each read with its own type (below): a
    yes/no or a number that is neither is an error naming the variable."""
    layer: dict[str, object] = {}
    for var, key in _ENV_KEYS.items():
        if environ.get(var):
            layer[key] = environ[var]
    steps = env_int(environ, "KETCH_MAX_STEPS", minimum=1)
    if steps is not None:
        layer["max_steps"] = steps
    privacy = env_bool(environ, "KETCH_PRIVACY")
    if privacy is not None:
        layer["privacy"] = privacy
    search = env_bool(environ, "KETCH_WEB_SEARCH_ENABLED")
    if search is not None:
        layer["web_search"] = {"enabled": search}
    return layer
