"""Keeping the cyclic garbage collector out of code that builds many long-lived objects."""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["collector_paused"]


@contextmanager
def collector_paused() -> Iterator[None]:
    """Keep the cyclic garbage collector out of building (or rebuilding) a long history.

    Loading or pruning a history allocates thousands of containers and frees almost none, so
    collector passes in the middle (a full one walks every object the process has) find nothing.
    Merely pausing would not save them: the first allocation after re-enabling starts a
    young-generation pass over everything built meanwhile. So at the end the new objects are
    moved straight to the oldest generation (``gc.freeze`` then ``gc.unfreeze``, which does no
    traversal), where a long-lived history belongs; full collections still examine them, as
    they would anyway. Reference counting frees everything as usual throughout. Nothing is
    changed if the collector was off, and objects the process froze itself are never unfrozen:
    the move is skipped then.
    """
    collecting = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if collecting:
            if gc.get_freeze_count() == 0:
                gc.freeze()
                gc.unfreeze()
            gc.enable()
