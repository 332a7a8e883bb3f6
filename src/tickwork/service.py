"""The one loop every background service runs: ``run_once`` on an interval with jitter."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
from collections.abc import Awaitable, Callable
from typing import Any

import psycopg

DEFAULT_JITTER = 0.1
"""Each wait is the interval times a random factor in [1 - jitter, 1 + jitter], so services
of many processes do not fire in step."""


async def run_periodically(
    run_once: Callable[[], Awaitable[Any]],
    *,
    interval: float,
    stop: asyncio.Event,
    log: logging.Logger,
    name: str,
    jitter: float = DEFAULT_JITTER,
) -> None:
    """Call ``run_once`` every ``interval`` seconds until ``stop`` is set. A database error
    is logged and the next pass comes on schedule; anything else propagates."""
    while not stop.is_set():
        try:
            await run_once()
        except (psycopg.Error, OSError) as exc:
            log.error(f"{name} failed", extra={"error": str(exc)})
        delay = interval * random.uniform(1 - jitter, 1 + jitter)
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), delay)
