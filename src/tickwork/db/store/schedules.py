"""Statements of ``sql/schedules.sql``."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass
from datetime import datetime
from typing import Any
from uuid import UUID

from tickwork.db.store.runner import AsyncConn, Row, Runner


@dataclass(frozen=True, slots=True)
class ScheduleFields:
    """What defines a stored schedule, as its statements take it."""

    task: str
    args: str
    """The job's arguments, as JSON text."""
    cron: str
    timezone: str
    queue: str | None
    priority: int | None
    misfire: str
    misfire_limit: int
    overlap: str
    task_queue: str | None
    """The task's registration (``task_*``): what its jobs take when the schedule does not
    say (all None for a task the writing process does not register)."""
    task_priority: int | None
    task_max_attempts: int | None
    task_timeout: float | None


def _stored(
    name: str, fields: ScheduleFields, enabled: bool, next_run_at: datetime, actor: str
) -> dict[str, Any]:
    """The parameters of an operator's write of a schedule (create, edit)."""
    return asdict(fields) | {
        "name": name,
        "enabled": enabled,
        "next_run_at": next_run_at,
        "actor": actor,
    }


class ScheduleStatements(Runner):
    """One method per statement of ``sql/schedules.sql``."""

    async def schedule_upsert(
        self,
        conn: AsyncConn,
        *,
        name: str,
        fields: ScheduleFields,
        next_run_at: datetime,
        origin: str,
        defined_by: Sequence[UUID],
        stale_after: float,
    ) -> Row:
        """Write a code-defined schedule by name, keeping its next fire time unless cron or
        time zone changed, recorded as defined by the workers ``defined_by`` and the others
        still live (seen within ``stale_after`` seconds); its row."""
        params = asdict(fields) | {
            "name": name,
            "next_run_at": next_run_at,
            "origin": origin,
            "defined_by": list(defined_by),
            "stale_after": stale_after,
        }
        return (await self._rows(conn, "schedule_upsert", params))[0]

    async def schedule_retarget(
        self,
        conn: AsyncConn,
        *,
        tasks: Sequence[str],
        queues: Sequence[str],
        priorities: Sequence[int],
        max_attempts: Sequence[int],
        timeouts: Sequence[float | None],
    ) -> None:
        """Give the operator-stored schedules of ``tasks`` those tasks' registration (the
        other sequences, one item per task), where it differs."""
        await self._rows(
            conn,
            "schedule_retarget",
            {
                "tasks": list(tasks),
                "queues": list(queues),
                "priorities": list(priorities),
                "max_attempts": list(max_attempts),
                "timeouts": list(timeouts),
            },
        )

    async def schedule_now(self, conn: AsyncConn) -> datetime:
        """The database's clock."""
        now: datetime = (await self._rows(conn, "schedule_now", {}))[0]["now"]
        return now

    async def schedule_next_due(
        self, conn: AsyncConn, *, invalid: Sequence[int] = ()
    ) -> tuple[datetime | None, datetime]:
        """The earliest next fire time of the schedules the scheduler fires (None: none),
        leaving out the ids ``invalid``, and the database's clock."""
        row = (await self._rows(conn, "schedule_next_due", {"invalid": list(invalid)}))[0]
        return row["next_run_at"], row["db_now"]

    async def schedule_due_lock(
        self, conn: AsyncConn, *, limit: int, holder: str | None = None
    ) -> list[Row]:
        """Lock up to ``limit`` due schedules (enabled, not paused), skipping those another
        tick holds; their rows, each with ``db_now``, earliest due first. With ``holder``:
        none unless it holds the SCHEDULER lease on the database's clock."""
        return await self._rows(conn, "schedule_due_lock", {"limit": limit, "holder": holder})

    async def schedule_active_job(self, conn: AsyncConn, *, schedule_id: int) -> bool:
        """Whether a job of the schedule is still pending, awaiting retry or running."""
        active: bool = (
            await self._rows(conn, "schedule_active_job", {"schedule_id": schedule_id})
        )[0]["active"]
        return active

    async def schedule_fire(
        self,
        conn: AsyncConn,
        *,
        queue: str,
        task: str,
        args: str,
        priority: int,
        max_attempts: int,
        timeout: float | None,
        schedule_name: str,
        schedule_id: int,
        fire_times: Sequence[datetime],
    ) -> list[Row]:
        """Enqueue one job per fire time (``args``: JSON text) unless that fire time already
        has its job, and wake the queue's workers; rows ``id, fire_time, notified`` of the
        jobs created, by fire time."""
        return await self._rows(
            conn,
            "schedule_fire",
            {
                "queue": queue,
                "task": task,
                "args": args,
                "priority": priority,
                "max_attempts": max_attempts,
                "timeout": timeout,
                "schedule_name": schedule_name,
                "schedule_id": schedule_id,
                "fire_times": list(fire_times),
            },
        )

    async def schedule_advance(
        self,
        conn: AsyncConn,
        *,
        schedule_id: int,
        next_run_at: datetime,
        last_fire_at: datetime | None,
    ) -> None:
        """Store a schedule's next fire time, and its last fire time when one ran."""
        await self._rows(
            conn,
            "schedule_advance",
            {"schedule_id": schedule_id, "next_run_at": next_run_at, "last_fire_at": last_fire_at},
        )

    async def schedule_get(self, conn: AsyncConn, *, name: str) -> Row | None:
        """One schedule's row, or None."""
        found = await self._rows(conn, "schedule_get", {"name": name})
        return found[0] if found else None

    async def schedule_list(self, conn: AsyncConn) -> list[Row]:
        """Every schedule's row, by name."""
        return await self._rows(conn, "schedule_list", {})

    async def schedule_set_paused(
        self, conn: AsyncConn, *, name: str, paused: bool, actor: str
    ) -> list[Row]:
        """Pause or resume a schedule; its row when it exists."""
        return await self._rows(
            conn, "schedule_set_paused", {"name": name, "paused": paused, "actor": actor}
        )

    async def schedule_set_enabled(
        self, conn: AsyncConn, *, name: str, enabled: bool, next_run_at: datetime | None, actor: str
    ) -> list[Row]:
        """Enable or disable a schedule (``next_run_at``: its next fire when enabled)."""
        return await self._rows(
            conn,
            "schedule_set_enabled",
            {"name": name, "enabled": enabled, "next_run_at": next_run_at, "actor": actor},
        )

    async def schedule_trigger(
        self,
        conn: AsyncConn,
        *,
        name: str,
        actor: str,
        queue: str | None,
        priority: int | None,
        max_attempts: int | None,
        timeout: float | None,
    ) -> list[Row]:
        """Enqueue a schedule's job now (off its cron); the job's row when it exists."""
        return await self._rows(
            conn,
            "schedule_trigger",
            {
                "name": name,
                "actor": actor,
                "queue": queue,
                "priority": priority,
                "max_attempts": max_attempts,
                "timeout": timeout,
            },
        )

    async def schedule_create(
        self,
        conn: AsyncConn,
        *,
        name: str,
        fields: ScheduleFields,
        enabled: bool,
        next_run_at: datetime,
        actor: str,
    ) -> Row | None:
        """Store an operator's schedule, audited; its row, or None when the name is taken."""
        params = _stored(name, fields, enabled, next_run_at, actor)
        found = await self._rows(conn, "schedule_create", params)
        return found[0] if found else None

    async def schedule_edit(
        self,
        conn: AsyncConn,
        *,
        name: str,
        fields: ScheduleFields,
        enabled: bool,
        next_run_at: datetime,
        actor: str,
        changes: str,
    ) -> Row | None:
        """Replace an operator-stored schedule's definition (its next fire time
        ``next_run_at`` only when cron or time zone changed or it is enabled again), audited
        with ``changes`` (JSON text); its row, or None when no such schedule of origin "api"
        exists."""
        params = _stored(name, fields, enabled, next_run_at, actor) | {"changes": changes}
        found = await self._rows(conn, "schedule_edit", params)
        return found[0] if found else None

    async def schedule_delete(
        self, conn: AsyncConn, *, name: str, actor: str, stale_after: float
    ) -> Row | None:
        """Delete a schedule, audited: one stored by an operator always, one defined in code
        only when no live worker (seen within ``stale_after`` seconds) defines it; its row
        ``name, origin``, or None when nothing was deleted."""
        found = await self._rows(
            conn, "schedule_delete", {"name": name, "actor": actor, "stale_after": stale_after}
        )
        return found[0] if found else None

    async def schedule_definers(
        self, conn: AsyncConn, *, name: str, stale_after: float
    ) -> list[Row]:
        """The live workers (seen within ``stale_after`` seconds) that define a code schedule;
        rows ``id, host, pid``, oldest first."""
        return await self._rows(
            conn, "schedule_definers", {"name": name, "stale_after": stale_after}
        )
