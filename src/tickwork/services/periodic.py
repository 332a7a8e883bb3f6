"""The one loop every background service runs: ``run_once`` on an interval with jitter."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
from collections.abc import Awaitable, Callable
from typing import Any

from tickwork.db.driver_errors import CONNECTION_ERRORS

DEFAULT_JITTER = 0.1
"""Each wait is the interval times a random factor in [1 - jitter, 1 + jitter], so services
of many processes do not fire in step."""


async def run_periodically(
    run_once: Callable[[], Awaitable[Any]],
    *,
    interval: float | Callable[[], float],
    stop: asyncio.Event,
    log: logging.Logger,
    name: str,
    jitter: float = DEFAULT_JITTER,
) -> None:
    """Call ``run_once`` every ``interval`` seconds (a callable: asked before each wait) until
    ``stop`` is set (or the task is cancelled). A database error is logged and the next pass
    comes on schedule; anything else propagates."""
    while not stop.is_set():
        try:
            await run_once()
        except CONNECTION_ERRORS as exc:
            log.error(f"{name} failed", extra={"error": str(exc)})
        raise_if_cancelled()
        seconds = interval() if callable(interval) else interval
        await wait_for_stop(stop, seconds * random.uniform(1 - jitter, 1 + jitter))


async def wait_for_stop(stop: asyncio.Event, delay: float) -> bool:
    """Wait ``delay`` seconds or until ``stop`` is set, whichever comes first; True if set."""
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(stop.wait(), delay)
    return stop.is_set()


def raise_if_cancelled() -> None:
    """Raise :class:`asyncio.CancelledError` if the running task was cancelled and the
    cancellation never reached it.

    On Python 3.11, ``asyncio.wait_for`` drops a cancellation that arrives while the awaited
    thing is completing (the connection pool waits for a free connection that way), so a
    service loop cancelled at that moment would carry on as if nothing had happened.
    """
    task = asyncio.current_task()
    if task is not None and task.cancelling():
        raise asyncio.CancelledError
