"""The jobs table vacuumed by its dead rows, so claims stay as cheap as the live work.

A claim reads ``jobs_runnable_idx`` from the head of its range. Every job claimed since the
last vacuum leaves its entry there (the row's old version is dead, its index entry stays
until a vacuum removes it), and every claim steps over all of them: after 250,000 jobs, a
claim of 50 read 1,860 index pages instead of 57. The server's autovacuum comes a minute
apart at best and waits for a fifth of the table to be dead, so at a few thousand jobs a
second claims slow down until the worker falls behind the work (the pickup latency under a
5,000 jobs/s load went from milliseconds to seconds within 20 seconds, with autovacuum on or
off).

The retention leader checks the table's dead rows every second and vacuums it when they
pass ``retention.vacuum_dead_rows``. A vacuum reads every index of the table, so on a large
table it is not cheap: after a vacuum that took ``t`` seconds the next waits at least
``t * (1 / VACUUM_DUTY - 1)``, which keeps the vacuums to a share of the time whatever the
table's size.
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import psycopg
from psycopg_pool import AsyncConnectionPool

from tickwork.config import RetentionSettings
from tickwork.db.store import Store

log = logging.getLogger("tickwork.retention")

VACUUM_CHECK_INTERVAL = 1.0
"""Seconds between two looks at the jobs table's dead rows."""
VACUUM_DUTY = 0.25
"""At most this share of the time is spent vacuuming by dead rows."""


Connect = Callable[[], Awaitable[psycopg.AsyncConnection[Any]]]
"""Opens a connection of its own (the caller closes it)."""


@contextlib.asynccontextmanager
async def vacuum_connection(
    pool: AsyncConnectionPool[Any], connect: Connect | None
) -> AsyncIterator[psycopg.AsyncConnection[Any]]:
    """A connection to vacuum on: one of its own from ``connect``, without the pool's
    ``statement_timeout`` (a vacuum of a large table may rightly take longer, and one cut
    short loses its work), else the pool's."""
    if connect is None:
        async with pool.connection() as conn:
            yield conn
        return
    conn = await connect()
    try:
        yield conn
    finally:
        await conn.close()


@dataclass(frozen=True, slots=True)
class VacuumResult:
    """What one look at the jobs table did."""

    dead_rows: int
    """Dead rows in the table by the server's statistics (-1: not looked, resting)."""
    vacuumed: bool = False
    """Whether the table was vacuumed."""
    seconds: float = 0.0
    """How long the vacuum took."""


class JobVacuum:
    """Vacuums the jobs table whenever its dead rows pass a threshold."""

    def __init__(
        self,
        pool: AsyncConnectionPool[Any],
        store: Store,
        settings: RetentionSettings,
        *,
        clock: Callable[[], float] = time.monotonic,
        connect: Connect | None = None,
    ) -> None:
        self.pool = pool
        self.connect = connect
        """Where the vacuum itself runs (:func:`vacuum_connection`)."""
        self.store = store
        self.threshold = settings.vacuum_dead_rows
        self.enabled = settings.vacuum != "never" and self.threshold > 0
        self._clock = clock
        self._rest_until = 0.0

    async def run_once(self) -> VacuumResult:
        """Vacuum the jobs table if it holds ``threshold`` dead rows (and the last vacuum's
        rest is over)."""
        if not self.enabled or self._clock() < self._rest_until:
            return VacuumResult(-1)
        async with self.pool.connection() as conn:
            dead = await self.store.job_dead_rows(conn)
        if dead < self.threshold:
            return VacuumResult(dead)
        started = self._clock()
        async with vacuum_connection(self.pool, self.connect) as conn:
            await self.store.job_vacuum(conn)
        ended = self._clock()
        seconds = ended - started
        self._rest_until = ended + seconds * (1 / VACUUM_DUTY - 1)
        log.debug("vacuumed the jobs table", extra={"dead_rows": dead, "seconds": seconds})
        return VacuumResult(dead, vacuumed=True, seconds=seconds)
