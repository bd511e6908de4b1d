"""Keeping the cyclic garbage collector out of code that builds many long-lived objects."""

from __future__ import annotations

import gc
from collections.abc import Callable, Iterator
from contextlib import contextmanager

__all__ = ["collector_paused", "pause_collector", "tune_for_long_sessions"]

YOUNG_THRESHOLD = 20_000
"""Net container allocations between young-generation passes while a session runs (CPython's
default is 700)."""


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
    resume = pause_collector()
    try:
        yield
    finally:
        resume()


def pause_collector() -> Callable[[], None]:
    """:func:`collector_paused` for a pause that no one block spans: the collector stops now,
    and the returned function (idempotent) ends the pause as the block's end would.

    An interactive start is one (``frontends.interactive``): from the arguments to the session
    being ready, the UI, the configuration and the core are imported in three threads, and
    about 140 passes ran meanwhile, a full one among them: about 2 % of a start's instructions
    (callgrind), for nothing to free."""
    collecting = gc.isenabled()
    gc.disable()
    ended = False

    def resume() -> None:
        nonlocal ended
        if ended:
            return
        ended = True
        if collecting:
            if gc.get_freeze_count() == 0:
                gc.freeze()
                gc.unfreeze()
            gc.enable()

    return resume


def tune_for_long_sessions() -> None:
    """Let the young generation grow to :data:`YOUNG_THRESHOLD` before the collector runs.

    A step of a long turn builds the next request from the whole history: tens of thousands of
    short-lived containers (lists of messages, request dicts), all freed by reference counting once
    the request is sent. At CPython's default of 700 the collector ran dozens of times inside every
    step, and each pass promoted the step's still-live temporaries, so on a 1,000-step turn the
    oldest generation filled up every ~17 steps and a full collection over the whole process
    (~220 ms) followed; ``bench/long_session.py`` measured about 2.5 ms of a median step and 12 ms
    of a mean one in the collector. At 20,000 a step's temporaries are freed before a pass is due.
    Cyclic garbage waits a little longer (at most that many net allocations). Process-wide, set
    when a session is built; a threshold the process set higher, or 0 (automatic collection off),
    is left as it is."""
    young, middle, old = gc.get_threshold()
    if 0 < young < YOUNG_THRESHOLD:
        gc.set_threshold(YOUNG_THRESHOLD, middle, old)
