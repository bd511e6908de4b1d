"""A headless run's own ceilings: ``--max-cost USD`` and ``--time-limit SECONDS``.

The step limit lives in the session (one turn's model requests); these two watch the whole
run from outside it. When one is reached, the running command is killed and the turn is
cancelled the ordinary way (what it did stays stored), then its ``turn_finished`` is reported
with the limit as its reason, after a warning notice saying which limit and what was spent.
"""

from __future__ import annotations

import asyncio
import dataclasses
import math
import time
from dataclasses import dataclass, field
from typing import Any

from ketch.protocol import events as ev
from ketch.protocol.exceptions import ConfigError


def checked_limits(max_cost: Any, time_limit: Any) -> tuple[float | None, float | None]:
    """The two limits as given on the command line: each a finite number above zero, or None."""
    out: list[float | None] = []
    for flag, value in (("--max-cost", max_cost), ("--time-limit", time_limit)):
        if value is None:
            out.append(None)
            continue
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value <= 0:
            raise ConfigError(f"{flag} must be a number above zero, not {value!r}")
        out.append(float(value))
    return out[0], out[1]


@dataclass
class RunLimits:
    """Ends the session's turn when the run's cost or wall time reaches its ceiling."""

    session: Any
    max_cost: float | None = None
    time_limit: float | None = None
    reached: str = ""
    """``cost_limit`` or ``time_limit`` once one was reached ('' before)."""
    detail: str = ""
    _timer: asyncio.TimerHandle | None = field(default=None, repr=False)
    _started: float = field(default_factory=time.monotonic, repr=False)

    def start(self) -> None:
        """Arm the clock (call inside the running loop, before the turn starts)."""
        if self.max_cost is not None and getattr(self.session, "cost_usd", None) is None:
            raise ConfigError(
                f"--max-cost needs a model whose price is known, and {getattr(self.session, 'model_ref', 'this model')} "
                "has none (its cost would stay unknown, so the ceiling could never be checked)")
        if self.time_limit is not None:
            self._timer = asyncio.get_running_loop().call_later(self.time_limit, self._stop, "time_limit",
                                                                f"the time limit of {self.time_limit:g} s was reached")

    def stop_clock(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def watch(self, event: ev.AgentEvent) -> ev.AgentEvent:
        """``event`` as the run reports it: a usage past the ceiling stops the turn; the turn's
        end after a stop carries the limit as its reason."""
        if isinstance(event, ev.TurnStarted) and self.reached:  # reached before the turn (during --compact)
            self.session.cancel_turn()
        if isinstance(event, ev.Usage) and self.max_cost is not None and not self.reached:
            spent = event.session_cost_usd
            if spent is None:  # the price went unknown mid-run (a model switch): fail closed
                self._stop("cost_limit", "the cost became unknown, so the --max-cost ceiling cannot be checked")
            elif spent >= self.max_cost:
                self._stop("cost_limit", f"the cost ceiling of ${self.max_cost:g} was reached (spent ${spent:.4f})")
        if isinstance(event, ev.TurnFinished) and self.reached and event.reason in ("cancelled", "interrupted"):
            return dataclasses.replace(event, reason=self.reached)  # type: ignore[arg-type]
        return event

    def notice(self, finished: ev.TurnFinished) -> ev.Notice:
        """The warning that goes out just before ``finished``, the limited turn's end."""
        return ev.Notice(level="warning", text=f"Stopped: {self.detail}.", session_id=finished.session_id,
                         turn_id=finished.turn_id)

    def _stop(self, reason: str, detail: str) -> None:
        if self.reached:
            return
        self.reached, self.detail = reason, detail
        self.stop_clock()
        self.session.interrupt_command()
        self.session.cancel_turn()
