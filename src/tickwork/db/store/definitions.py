"""Statements of ``sql/definitions.sql``."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass
from datetime import datetime
from typing import Any

from tickwork.db.store.runner import AsyncConn, Row, Runner


@dataclass(frozen=True, slots=True)
class DefinitionFields:
    """What an operator writes of a definition, as its statements take it (JSON as text)."""

    name: str
    description: str
    spec: str
    queue: str
    cron: str | None
    timezone: str
    exec_timeout: float
    max_attempts: int
    backoff: str
    loop: str | None
    enabled: bool


@dataclass(frozen=True, slots=True)
class DefinitionSchedule:
    """A definition's schedule row: what the scheduler fires."""

    name: str
    task: str
    args: str
    """The jobs' arguments (the definition's snapshot), as JSON text."""
    cron: str
    timezone: str
    enabled: bool
    next_run_at: datetime
    queue: str
    priority: int
    max_attempts: int
    timeout: float


class DefinitionStatements(Runner):
    """One method per statement of ``sql/definitions.sql``."""

    async def definition_create(
        self, conn: AsyncConn, *, kind: str, fields: DefinitionFields, actor: str
    ) -> Row | None:
        """Store a new definition, audited; its row, or None when the name is taken."""
        params: dict[str, Any] = asdict(fields) | {"kind": kind, "actor": actor}
        rows = await self._rows(conn, "definition_create", params)
        return rows[0] if rows else None

    async def definition_get(self, conn: AsyncConn, *, id: int) -> Row | None:
        """One definition's row."""
        rows = await self._rows(conn, "definition_get", {"id": id})
        return rows[0] if rows else None

    async def definition_get_locked(self, conn: AsyncConn, *, id: int) -> Row | None:
        """One definition's row, locked until the transaction ends."""
        rows = await self._rows(conn, "definition_get_locked", {"id": id})
        return rows[0] if rows else None

    async def definition_lock_shared(self, conn: AsyncConn, *, ids: Sequence[int]) -> list[Row]:
        """The rows of those of these definitions that exist, held FOR SHARE (an edit or a
        delete waits) until the transaction ends."""
        return await self._rows(conn, "definition_lock_shared", {"ids": list(ids)})

    async def definition_runs_retryable(
        self, conn: AsyncConn, *, job_ids: Sequence[int], tasks: Sequence[str]
    ) -> list[Row]:
        """Rows ``job_id, queue, definition_id, version`` of those of these jobs that run a
        definition (``tasks``) and a retry may send back; ids the arguments do not hold as
        numbers are None."""
        return await self._rows(
            conn, "definition_runs_retryable", {"job_ids": list(job_ids), "tasks": list(tasks)}
        )

    async def definition_find(self, conn: AsyncConn, *, name: str) -> int | None:
        """The id of the definition of this name."""
        rows = await self._rows(conn, "definition_find", {"name": name})
        return rows[0]["id"] if rows else None

    async def definition_list(
        self,
        conn: AsyncConn,
        *,
        kind: str | None,
        enabled: bool | None,
        name_like: str | None,
        after: int,
        limit: int,
    ) -> list[Row]:
        """A page of definitions by id after ``after``, filtered."""
        params = {
            "kind": kind,
            "enabled": enabled,
            "name_like": name_like,
            "after": after,
            "limit": limit,
        }
        return await self._rows(conn, "definition_list", params)

    async def definition_update(
        self,
        conn: AsyncConn,
        *,
        id: int,
        fields: DefinitionFields,
        event: str,
        changed: str,
        actor: str,
    ) -> Row | None:
        """Write an edit one version on, audited as ``event`` with the ``changed`` field
        names (JSON text); the new row."""
        params: dict[str, Any] = asdict(fields) | {
            "id": id,
            "event": event,
            "changed": changed,
            "actor": actor,
        }
        rows = await self._rows(conn, "definition_update", params)
        return rows[0] if rows else None

    async def definition_delete(self, conn: AsyncConn, *, id: int, actor: str) -> Row | None:
        """Delete a definition and its schedule, audited; ``id, name`` of what was deleted."""
        rows = await self._rows(conn, "definition_delete", {"id": id, "actor": actor})
        return rows[0] if rows else None

    async def definition_webhook_set(
        self, conn: AsyncConn, *, id: int, hash: bytes | None, event: str, actor: str
    ) -> Row | None:
        """Set (or, with None, remove) the webhook token's hash, audited; the row, or None
        when there is no such definition."""
        params = {"id": id, "hash": hash, "event": event, "actor": actor}
        rows = await self._rows(conn, "definition_webhook_set", params)
        return rows[0] if rows else None

    async def definition_activity_record(
        self, conn: AsyncConn, *, id: int, succeeded: bool, duration: float
    ) -> None:
        """Count one ended attempt of a run in its minute and the definition's counters."""
        params = {"id": id, "succeeded": succeeded, "duration": duration}
        await self._rows(conn, "definition_activity_record", params)

    async def definition_activity_list(
        self, conn: AsyncConn, *, id: int, start: datetime, end: datetime, step: float
    ) -> list[Row]:
        """The definition's activity from ``start`` to ``end`` in buckets of ``step``
        seconds."""
        params = {"id": id, "start": start, "end": end, "step": step}
        return await self._rows(conn, "definition_activity_list", params)

    async def definition_activity_prune(
        self, conn: AsyncConn, *, older_than: float, limit: int
    ) -> int:
        """Delete up to ``limit`` activity buckets older than ``older_than`` seconds; how
        many."""
        params = {"older_than": older_than, "limit": limit}
        return len(await self._rows(conn, "definition_activity_prune", params))

    async def definition_schedule_put(
        self, conn: AsyncConn, *, schedule: DefinitionSchedule
    ) -> None:
        """Write a definition's schedule row (its next fire time kept unless its cron or
        time zone changed, or it is enabled again)."""
        await self._rows(conn, "definition_schedule_put", asdict(schedule))

    async def definition_schedule_drop(self, conn: AsyncConn, *, name: str) -> None:
        """Remove a definition's schedule row."""
        await self._rows(conn, "definition_schedule_drop", {"name": name})

    async def definition_run_audit(
        self, conn: AsyncConn, *, id: int, job_id: int, version: int, event: str, actor: str
    ) -> None:
        """Record a run made by an operator or a webhook."""
        params = {"id": id, "job_id": job_id, "version": version, "event": event, "actor": actor}
        await self._rows(conn, "definition_run_audit", params)
