"""The watchdog: reclaims jobs whose attempt's lease expired (crashed or stalled workers).

Safe to run in any number of processes at once: the reclaim statement skips rows another
watchdog or a completing worker holds, and only touches attempts still RUNNING.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass, field
from typing import Any

from psycopg_pool import AsyncConnectionPool

from tickwork.db.store import Store
from tickwork.services.periodic import run_periodically

log = logging.getLogger("tickwork.watchdog")


@dataclass(frozen=True, slots=True)
class ReclaimResult:
    """What one watchdog pass did."""

    reclaimed: list[tuple[int, int, str]] = field(default_factory=list)
    """``(job id, execution id, new job state)`` per reclaimed attempt."""

    @property
    def count(self) -> int:
        """Number of attempts reclaimed."""
        return len(self.reclaimed)


class Watchdog:
    """Marks expired executions TIMED_OUT and returns their jobs to PENDING or DEAD_LETTER."""

    def __init__(
        self,
        pool: AsyncConnectionPool[Any],
        store: Store,
        *,
        actor: str,
        interval: float,
        batch: int,
    ) -> None:
        self.pool = pool
        self.store = store
        self.actor = actor
        self.interval = interval
        self.batch = batch

    async def run_once(self) -> ReclaimResult:
        """Reclaim expired attempts, a batch at a time, until none is left."""
        reclaimed: list[tuple[int, int, str]] = []
        while True:
            async with self.pool.connection() as conn:
                found = await self.store.execution_reclaim_expired(
                    conn, limit=self.batch, actor=self.actor
                )
            for row in found:
                log.warning(
                    "reclaimed job after lease expiry",
                    extra={
                        "job_id": row["job_id"],
                        "execution_id": row["execution_id"],
                        "state": row["state"],
                    },
                )
                reclaimed.append((row["job_id"], row["execution_id"], row["state"]))
            if len(found) < self.batch:
                return ReclaimResult(reclaimed)

    async def run(self, stop: asyncio.Event) -> None:
        """Run passes on the interval (with jitter) until ``stop`` is set."""
        await run_periodically(
            self.run_once, interval=self.interval, stop=stop, log=log, name="watchdog pass"
        )
