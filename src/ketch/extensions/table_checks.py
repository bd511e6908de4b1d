"""The config's extension tables checked by their owners, handed to ``config.tables`` on request.

``[hooks]``, ``[permissions]`` and ``[guards]`` are parsed by ``hooks``, ``rules`` and ``plugins``;
``config`` sits below ``extensions`` and cannot import them, so whoever loads the config calls
:func:`install` first (the front ends' loaders do). Without it such a table is refused, not
read leniently.
"""

from __future__ import annotations

from typing import Any


def _hooks(value: dict[str, Any]) -> None:
    from ketch.extensions.hooks import HookConfigError, parse_hooks

    try:
        parse_hooks(value)
    except HookConfigError as exc:
        raise ValueError(str(exc)) from None


def _permissions(value: dict[str, Any]) -> None:
    from ketch.gate.rules import RuleError, rules_from_config

    try:
        rules_from_config(value)
    except RuleError as exc:
        raise ValueError(str(exc)) from None


def _guards(value: list[Any]) -> None:
    from ketch.extensions.plugins import ManifestError, config_rules

    try:
        config_rules(value, "guards")
    except ManifestError as exc:
        raise ValueError(str(exc)) from None


def install() -> None:
    """Hand the three checks to ``config.tables`` (idempotent; imports the parsers only when a table is checked)."""
    from ketch.config.tables import take_extension_checks

    take_extension_checks({"hooks": _hooks, "permissions": _permissions, "guards": _guards})
