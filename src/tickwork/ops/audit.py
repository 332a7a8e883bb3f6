"""The audit trail as operators read it: filtered, newest first, a page at a time."""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import psycopg
from psycopg_pool import AsyncConnectionPool

from tickwork.db.store import Store
from tickwork.queue import rows as decode
from tickwork.queue.admin import DEFAULT_PAGE, Page, check_limit, check_range


@dataclass(frozen=True, slots=True)
class AuditFilter:
    """Which events to list; every field is optional."""

    actor: str | None = None
    """Exactly this actor ("user:ada@example.com", "worker:<id>", "scheduler", ...)."""
    event_type: str | None = None
    """Exactly this event type ("job.retried", "queue.paused", ...)."""
    target_type: str | None = None
    """"job", "queue", "schedule", "user", ..."""
    target_id: str | None = None
    """The target's id or name."""
    occurred_from: datetime | None = None
    """At or after."""
    occurred_to: datetime | None = None
    """Before."""

    def __post_init__(self) -> None:
        check_range("occurred", self.occurred_from, self.occurred_to)


async def audit_append(
    conn: psycopg.AsyncConnection[Any],
    store: Store,
    actor: str,
    event_type: str,
    target_type: str,
    target_id: str,
    metadata: dict[str, Any],
) -> None:
    """Append one event on ``conn`` (in the caller's transaction when it has one)."""
    await store.audit_append(
        conn,
        actor=actor,
        event_type=event_type,
        target_type=target_type,
        target_id=target_id,
        metadata=json.dumps(metadata),
    )


async def list_events(
    pool: AsyncConnectionPool[Any],
    store: Store,
    where: AuditFilter,
    *,
    limit: int = DEFAULT_PAGE,
    before_id: int | None = None,
) -> Page:
    """Audit events matching ``where``, newest first."""
    checked = check_limit(limit)
    async with pool.connection() as conn:
        found = await store.audit_list(
            conn,
            actor=where.actor,
            event_type=where.event_type,
            target_type=where.target_type,
            target_id=where.target_id,
            occurred_from=where.occurred_from,
            occurred_to=where.occurred_to,
            limit=checked,
            before_id=before_id,
        )
    events = [decode.audit_event(r) for r in found]
    return Page(events, events[-1].id if len(events) == limit else None)
