"""What storing one agent step costs the store, at 10 and at 1,000 messages of history.

A step of an agent loop hands the store the whole history (the SDK's list, new objects only at
its end); when pruning rewrote a few older messages in place the history's prefix changed too.
Three ways of storing that step are timed (CPU ms, median of 40 steps, on a temporary store):

- **rewrite**: the whole history replaced (``replace_history``), what ketch did on every step
  once pruning had started (about 35 ms a step at 900 steps in issue 17);
- **writer, append**: ``HistoryWriter.commit`` when only the step's two new messages are new;
- **writer, pruned**: the same when pruning also changed two older tool results in place.

The writer's figures should not grow with the history (they are compared at 10 and 1,000
messages: under 2x). Run: ``.venv/bin/python bench/store_step.py``.
"""

from __future__ import annotations

import dataclasses
import os
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
os.environ.setdefault("PYDANTIC_AI_NO_BANNER", "1")

from resume import make_step  # noqa: E402  (the same realistic messages as the resume bench)

from ketch.state.history_writer import HistoryWriter  # noqa: E402
from ketch.state.store import Store  # noqa: E402

STEPS = 40
LENGTHS = (10, 1000)


def _history(rng: random.Random, length: int) -> list:
    history: list = []
    n = 0
    while len(history) < length:
        messages, _ = make_step(rng, n)
        history += messages
        n += 1
    return history[:length]


def _pruned(history: list, n: int) -> list:
    """Two older tool results (not the newest ones) become placeholders, in place."""
    out = list(history)
    older = [i for i, m in enumerate(out[:-2]) if m.kind == "request" and hasattr(m.parts[0], "tool_call_id")]
    for i in (older[n % len(older)], older[(n + len(older) // 2) % len(older)]):
        message = out[i]
        out[i] = dataclasses.replace(message, parts=[dataclasses.replace(message.parts[0], content=f"(pruned {n})")])
    return out


def _time(store: Store, length: int, how: str) -> float:
    """One step on top of a stored history of ``length`` messages, timed; median of ``STEPS``."""
    rng = random.Random(length)
    base = _history(rng, length)
    costs = []
    for n in range(STEPS):
        sid = store.create_session("/bench", "m", "build")
        writer = HistoryWriter(store, sid)
        writer.commit(base)
        step, events = make_step(rng, 10_000 + n)
        history = [*base, *step]
        if how == "writer, pruned":
            history = _pruned(history, n)
        with store.lock:  # the set-up's pages leave the log first: its checkpoint is not the step's cost
            store.connection.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        cpu = time.process_time()
        if how == "rewrite":
            store.replace_history(sid, history)
            store.append_step(sid, [], events)
        else:
            writer.commit(history, events)
        costs.append((time.process_time() - cpu) * 1000)
    return statistics.median(costs)


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp, Store.open(Path(tmp) / "ketch.db") as store:
        results = {(how, length): _time(store, length, how) for how in ("rewrite", "writer, append", "writer, pruned")
                   for length in LENGTHS}
    print(f"{'store cost of one step (cpu ms, median of ' + str(STEPS) + ')':<48}" + "".join(f"{n:>10} msgs" for n in LENGTHS))
    for how in ("rewrite", "writer, append", "writer, pruned"):
        row = "".join(f"{results[(how, n)]:>12.2f} ms" for n in LENGTHS)
        ratio = results[(how, LENGTHS[-1])] / max(results[(how, LENGTHS[0])], 1e-6)
        print(f"{how:<48}{row}   x{ratio:.1f}")


if __name__ == "__main__":
    main()
