"""What ketch changes in how pydantic-ai (2.68.0) and its HTTP stack load, pinned to those versions.

Start-up only: these keep modules that a session never uses from being imported on the way to
the first request, where ``bench/startup.py`` counts them (the session's CPU until it is ready).

- ``httpx._main``: ``httpx/__init__.py`` (0.28.1) imports its command-line client inside
  ``try: from ._main import main / except ImportError`` and defines a stub ``main`` otherwise.
  pydantic-ai imports httpx (``pydantic_ai._http``, as the legacy client type) and ketch's wire
  uses it, and the CLI client pulls in click, ``rich.console`` and Pygments' lexers: about 80 modules,
  40-80 ms of CPU, for a command ketch never runs. :func:`quiet_imports` puts ``None`` in
  ``sys.modules['httpx._main']`` before httpx is first imported, so that import fails at once and
  httpx takes its own fallback. ``httpx.main`` is then that stub (it says the CLI is unavailable);
  nothing else changes. Rich is imported when ketch's renderer warms up, after the session is ready.

:data:`PINNED` names the versions this was written against; ``tests/test_sdk_pins.py`` fails when
the installed ones differ or when the upstream source no longer has the shape relied on here, so an
upgrade re-reads this module first.
"""

from __future__ import annotations

import sys

PINNED = {"pydantic-ai-slim": "2.68.0", "httpx": "0.28.1"}
"""Distribution → the exact version the patches here were written against (pyproject pins them)."""

_SKIPPED = ("httpx._main",)
"""Modules made to fail their import (their importer falls back, see the module docstring)."""


def quiet_imports() -> None:
    """Keep the modules of :data:`_SKIPPED` from loading (call before httpx is imported; a no-op
    for a module already imported, and idempotent)."""
    for name in _SKIPPED:
        if name.rpartition(".")[0] not in sys.modules:
            sys.modules.setdefault(name, None)  # type: ignore[arg-type]


__all__ = ["PINNED", "quiet_imports"]
