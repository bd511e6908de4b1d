"""Exceptions shared across ketch that must stay cheap to import."""

from __future__ import annotations


class ConfigError(Exception):
    """A configuration or usage problem the user must fix; the message is one line."""


class MissingKey(ConfigError):
    """A connection needs an API key and none is set or stored (an editor asks to log in)."""
