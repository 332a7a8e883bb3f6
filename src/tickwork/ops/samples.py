"""The processes' CPU and memory samples (``worker_metrics``), as operators read them."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any
from uuid import UUID

from psycopg_pool import AsyncConnectionPool

from tickwork.db.store import Store
from tickwork.queue.admin import check_limit, check_range


@dataclass(frozen=True, slots=True)
class Sample:
    """One sample of one process."""

    id: int
    worker_id: UUID
    host: str
    pid: int
    roles: str
    sampled_at: datetime
    cpu_percent: float
    rss_bytes: int
    children_rss_bytes: int


async def page(
    pool: AsyncConnectionPool[Any],
    store: Store,
    *,
    worker_id: UUID | None = None,
    start: datetime | None = None,
    end: datetime | None = None,
    before_id: int | None = None,
    limit: int = 100,
) -> tuple[list[Sample], int | None]:
    """Samples, newest first (of one worker, in a time range); and the cursor of the next
    page (None on the last)."""
    check_limit(limit)
    check_range("", start, end, fields=("from", "to"))
    async with pool.connection() as conn:
        rows = await store.worker_metrics_list(
            conn, worker_id=worker_id, start=start, end=end, before_id=before_id, limit=limit + 1
        )
    found = [Sample(**r) for r in rows[:limit]]
    return found, (found[-1].id if len(rows) > limit else None)
