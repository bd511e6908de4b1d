"""Exceptions shared across ketch that must stay cheap to import."""

from __future__ import annotations


class ConfigError(Exception):
    """A configuration or usage problem the user must fix; the message is one line."""
