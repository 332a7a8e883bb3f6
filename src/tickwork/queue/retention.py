"""Retention: finished jobs (and their executions) are deleted after a window, so the tables
the claim and the watchdog work on stay the size of the live work, not of all history.

SUCCEEDED and CANCELLED jobs go after ``retention.finished_after``; DEAD_LETTER ones after
``retention.dead_letter_after`` (longer: an operator may still retry them); definitions'
activity after ``retention.activity_after``, the processes' samples after
``retention.worker_metrics_after`` (with the records of workers gone that long), the
throughput minutes after ``retention.throughput_after`` and audit events after
``retention.audit_after``. Jobs that may still run are never deleted. Safe in any number of
processes at once (SKIP LOCKED).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

from psycopg_pool import AsyncConnectionPool

from tickwork.config import RetentionSettings
from tickwork.db.store import Store
from tickwork.queue.admin import TASKS_SEEN_WITHIN
from tickwork.queue.vacuum import Connect, vacuum_connection

log = logging.getLogger("tickwork.retention")


@dataclass(frozen=True, slots=True)
class PruneResult:
    """What one retention pass deleted."""

    deleted: int
    """Jobs deleted (their executions went with them)."""
    vacuumed: bool = False
    """Whether the pass vacuumed the job tables."""


class Retention:
    """Deletes finished jobs past their retention window, a batch at a time."""

    def __init__(
        self,
        pool: AsyncConnectionPool[Any],
        store: Store,
        settings: RetentionSettings,
        *,
        connect: Connect | None = None,
    ) -> None:
        self.pool = pool
        self.connect = connect
        """Where a vacuum runs (:func:`~tickwork.queue.vacuum.vacuum_connection`)."""
        self.store = store
        self.settings = settings
        self._vacuum: bool | None = (
            None if settings.vacuum == "auto" else settings.vacuum == "always"
        )

    async def run_once(self) -> PruneResult:
        """Delete everything past its window now."""
        deleted = 0
        async with self.pool.connection() as conn:
            # Operators may change the windows at run time (app settings); they win.
            stored = await self.store.app_setting_list(conn)
        override = {r["key"]: r["value"] for r in stored}
        finished_after = override.get("retention.finished_after", self.settings.finished_after)
        dead_letter_after = override.get(
            "retention.dead_letter_after", self.settings.dead_letter_after
        )
        while True:
            async with self.pool.connection() as conn:
                pruned = await self.store.job_prune_finished(
                    conn,
                    finished_after=finished_after,
                    dead_letter_after=dead_letter_after,
                    limit=self.settings.batch,
                )
            deleted += pruned
            if pruned < self.settings.batch:
                break
        if deleted:
            log.info("deleted finished jobs past retention", extra={"deleted": deleted})
        await self._prune_history(override)
        vacuumed = await self._maybe_vacuum()
        return PruneResult(deleted, vacuumed)

    async def _prune_history(self, override: dict[str, Any]) -> None:
        """What is kept only as history: definitions' activity, the processes' samples and
        records, the throughput minutes and the audit trail, each past its window (an app
        setting when operators set one)."""
        prunes = (  # (setting, statement, the shortest window it may have)
            ("activity_after", self.store.definition_activity_prune, 0.0),
            ("worker_metrics_after", self.store.worker_metrics_prune, 0.0),
            # a worker's record names the tasks an API may enqueue by name for a day
            ("worker_metrics_after", self.store.worker_prune, TASKS_SEEN_WITHIN),
            ("throughput_after", self.store.tally_minutes_prune, 0.0),
            ("audit_after", self.store.audit_prune, 0.0),
        )
        for name, prune, floor in prunes:
            window = override.get(f"retention.{name}", getattr(self.settings, name))
            window = max(window, floor)
            pruned = self.settings.batch
            while pruned >= self.settings.batch:
                async with self.pool.connection() as conn:
                    pruned = await prune(conn, older_than=window, limit=self.settings.batch)

    async def _maybe_vacuum(self) -> bool:
        async with self.pool.connection() as conn:
            if self._vacuum is None:
                self._vacuum = not await self.store.health_autovacuum(conn)
                if self._vacuum:
                    log.warning("the server's autovacuum is off: retention vacuums the job tables")
            if not self._vacuum:
                return False
        async with vacuum_connection(self.pool, self.connect) as conn:
            await self.store.job_tables_vacuum(conn)
        return True
