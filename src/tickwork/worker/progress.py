"""Progress reported by running handlers (``ctx.progress``): held in memory, written in batches.

A handler may report as often as it likes, from the event loop or from a worker thread; only
the latest report of each attempt is kept, and the worker writes what is pending every
:data:`PROGRESS_INTERVAL` seconds in one statement (``job_progress_many``), and once more
when the attempt ends, so a report costs no round trip of its own.
"""

from __future__ import annotations

import math
import threading
from typing import Any

from tickwork.limits import cut, storable

PROGRESS_INTERVAL = 0.5
"""Seconds between the worker's writes of pending progress reports."""
MAX_PROGRESS_MESSAGE = 500
"""Characters of a progress message that are stored (the rest is cut)."""


def progress_value(
    current: float,
    total: float | None,
    message: str | None,
    attempt: int,
    output: dict[str, str] | None = None,
) -> dict[str, Any]:
    """One report as stored; refuses what cannot be (naming the argument)."""
    for name, number in (("current", current), ("total", total)):
        if number is None and name == "total":
            continue
        if isinstance(number, bool) or not isinstance(number, int | float):
            raise TypeError(f"progress {name} must be a number, not {type(number).__name__}")
        if not math.isfinite(number) or number < 0:
            raise ValueError(f"progress {name} must be a finite number >= 0, not {number!r}")
    if message is not None and not isinstance(message, str):
        raise TypeError(f"progress message must be a string, not {type(message).__name__}")
    value: dict[str, Any] = {
        "current": current,
        "total": total,
        "message": None if message is None else storable(cut(message, MAX_PROGRESS_MESSAGE)),
        "attempt": attempt,
    }
    if output is not None:  # a running script's output so far (its runtime bounds it)
        value["output"] = output
    return value


class ProgressBuffer:
    """The latest unwritten report of each attempt; safe to fill from any thread."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._pending: dict[int, dict[str, Any]] = {}  # execution id -> report

    def report(self, job_id: int, execution_id: int, value: dict[str, Any]) -> None:
        """Keep ``value`` as the attempt's latest report (replacing an unwritten one)."""
        with self._lock:
            self._pending[execution_id] = {
                "job_id": job_id,
                "execution_id": execution_id,
                "progress": value,
            }

    def take(self, execution_id: int | None = None) -> list[dict[str, Any]]:
        """Remove and return the pending reports (of one attempt, or of all)."""
        with self._lock:
            if execution_id is None:
                taken, self._pending = list(self._pending.values()), {}
                return taken
            one = self._pending.pop(execution_id, None)
            return [] if one is None else [one]

    def put_back(self, reports: list[dict[str, Any]]) -> None:
        """Return reports whose write failed, unless a newer one came in meanwhile."""
        with self._lock:
            for r in reports:
                self._pending.setdefault(r["execution_id"], r)
