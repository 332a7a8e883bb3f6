"""Statements of ``sql/workers.sql`` on the processes' CPU and memory samples, and the
pruning of old worker records."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from datetime import datetime
from uuid import UUID

from tickwork.db.store.runner import AsyncConn, Row, Runner


@dataclass(frozen=True, slots=True)
class WorkerSample:
    """One sample of a process's CPU and memory."""

    worker_id: UUID
    host: str
    pid: int
    roles: str
    cpu_percent: float
    rss_bytes: int
    children_rss_bytes: int


class WorkerMetricStatements(Runner):
    """One method per statement of ``worker_metrics``."""

    async def worker_metrics_record(self, conn: AsyncConn, *, sample: WorkerSample) -> None:
        """Store one sample."""
        await self._rows(conn, "worker_metrics_record", asdict(sample))

    async def worker_metrics_list(
        self,
        conn: AsyncConn,
        *,
        worker_id: UUID | None,
        start: datetime | None,
        end: datetime | None,
        before_id: int | None,
        limit: int,
    ) -> list[Row]:
        """Samples, newest first, filtered."""
        params = {
            "worker_id": worker_id,
            "start": start,
            "end": end,
            "before_id": before_id,
            "limit": limit,
        }
        return await self._rows(conn, "worker_metrics_list", params)

    async def worker_metrics_prune(self, conn: AsyncConn, *, older_than: float, limit: int) -> int:
        """Delete up to ``limit`` samples older than ``older_than`` seconds; how many."""
        params = {"older_than": older_than, "limit": limit}
        return len(await self._rows(conn, "worker_metrics_prune", params))

    async def worker_prune(self, conn: AsyncConn, *, older_than: float, limit: int) -> int:
        """Delete up to ``limit`` worker records not seen for ``older_than`` seconds."""
        params = {"older_than": older_than, "limit": limit}
        return len(await self._rows(conn, "worker_prune", params))
