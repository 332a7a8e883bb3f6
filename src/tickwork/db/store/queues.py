"""Statements of ``sql/queues.sql``, and the workers' statements operators read
(``worker_list``, ``worker_known_tasks`` of ``sql/workers.sql``)."""

from __future__ import annotations

from tickwork.db.store.runner import AsyncConn, Row, Runner


class QueueStatements(Runner):
    """One method per statement of ``sql/queues.sql``, and what operators read of workers."""

    async def queue_stats(self, conn: AsyncConn, *, window: float) -> list[Row]:
        """Per queue holding jobs or a stored pause state, by name: jobs by state, the age of
        the oldest runnable job, jobs finished in the last ``window`` seconds, ``paused``."""
        return await self._rows(conn, "queue_stats", {"window": window})

    async def queue_set_paused(
        self, conn: AsyncConn, *, name: str, paused: bool, actor: str
    ) -> None:
        """Pause or resume a queue (stored, audited; resuming wakes its workers)."""
        await self._rows(conn, "queue_set_paused", {"name": name, "paused": paused, "actor": actor})

    async def queue_unserved(self, conn: AsyncConn, *, stale_after: float) -> list[Row]:
        """Rows ``queue, task, jobs, oldest_seconds`` of waiting jobs no worker seen within
        ``stale_after`` seconds claims (none has both the queue and the task)."""
        return await self._rows(conn, "queue_unserved", {"stale_after": stale_after})

    async def worker_list(self, conn: AsyncConn, *, stale_after: float) -> list[Row]:
        """Live workers (not stopped, seen within ``stale_after`` seconds), oldest first, with
        their attempts ``in_flight``."""
        return await self._rows(conn, "worker_list", {"stale_after": stale_after})

    async def worker_known_tasks(self, conn: AsyncConn, *, seen_within: float) -> list[Row]:
        """Rows ``task, options`` of the tasks of workers seen within ``seen_within`` seconds
        (stopped or not), with the options the most recently seen of them recorded."""
        return await self._rows(conn, "worker_known_tasks", {"seen_within": seen_within})
