"""ketch as a Harbor agent: ``harbor run -a ketch.harbor:Ketch``.

May import: nothing.
Harbor (the optional ``ketch[harbor]`` extra, Python 3.12+) and ``ketch`` itself for its version:
the agent drives the ``ketch`` command installed in the task's environment, never ketch's
modules. ``import ketch`` never imports this package, and importing this package imports Harbor
only when ``Ketch`` is asked for.
"""

from __future__ import annotations

from typing import Any


def __getattr__(name: str) -> Any:
    if name == "Ketch":
        from ketch.harbor.agent import Ketch

        return Ketch
    raise AttributeError(f"module 'ketch.harbor' has no attribute {name!r}")


__all__ = ["Ketch"]
