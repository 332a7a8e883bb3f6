"""The rollup pass: folds the tallies the write path appends (one row per statement that
finished, retried, cancelled or pruned work) into per-name totals and per-minute throughput,
so the periodic reads (queue stats, ``/metrics``, signal stats, charts) cost what the live
work costs, never the history (tables and reasons: ``db/migrations/0015_tallies.sql``).

Reads are exact whether or not a pass has run: they add the tallies not folded yet. The pass
only keeps that remainder small. Safe in any number of processes at once (SKIP LOCKED).
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from psycopg_pool import AsyncConnectionPool

from tickwork.db.store import Store
from tickwork.services.periodic import run_periodically

log = logging.getLogger("tickwork.rollups")

ROLLUP_INTERVAL = 10.0
"""Seconds between passes: at 20,000 finished jobs/s in batches of 500, about 400 tallies."""
ROLLUP_BATCH = 10_000


class Rollups:
    """Folds appended tallies into totals and minutes."""

    def __init__(
        self, pool: AsyncConnectionPool[Any], store: Store, *, interval: float = ROLLUP_INTERVAL
    ) -> None:
        self.pool = pool
        self.store = store
        self.interval = interval

    async def run_once(self) -> int:
        """Fold every tally visible now; how many."""
        folded = 0
        while True:
            async with self.pool.connection() as conn:
                done = await self.store.tally_fold(conn, limit=ROLLUP_BATCH)
            folded += done
            if done < ROLLUP_BATCH:
                return folded

    async def run(self, stop: asyncio.Event) -> None:
        """Run passes on the interval (with jitter) until ``stop`` is set."""
        await run_periodically(
            self.run_once, interval=self.interval, stop=stop, log=log, name="rollup pass"
        )


async def recount(pool: AsyncConnectionPool[Any], store: Store) -> int:
    """Make the totals of finished work again from the jobs and signals tables: a full count,
    for after states were written by hand (SQL that bypasses tickwork's statements is not
    tallied). New tallies wait for it. How many finished jobs and settled signals it found."""
    async with pool.connection() as conn, conn.transaction():
        await store.tally_recount_lock(conn)  # first: see tally_recount_lock
        while await store.tally_fold(conn, limit=ROLLUP_BATCH) == ROLLUP_BATCH:
            pass  # the arrivals kept in the minutes
        await store.tally_recount_clear(conn)
        counted = await store.tally_recount(conn)
    log.info("recounted finished work", extra={"counted": counted})
    return counted
