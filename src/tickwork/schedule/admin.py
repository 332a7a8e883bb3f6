"""Schedules stored by operators: create, edit and delete (schedules defined in code are
changed in the code; operators may still pause, resume, enable and trigger them, and delete
one that no live process defines any more)."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Any

from psycopg_pool import AsyncConnectionPool

from tickwork.config import DEFINITION_SCHEDULE_PREFIX, SCHEDULE_NAME
from tickwork.db.store import Store
from tickwork.db.store.schedules import ScheduleFields
from tickwork.errors import ConflictError, NotFoundError, ScheduleError
from tickwork.queue.admin import WORKER_STALE_AFTER
from tickwork.queue.enqueue import check_priority, check_queue, encode_args
from tickwork.queue.options import TaskOptions
from tickwork.schedule.cron import MIN_INTERVAL, CronSchedule
from tickwork.schedule.records import StoredSchedule, job_options, task_targets

CheckTask = Callable[[str, Mapping[str, Any]], TaskOptions]
"""Refuses a task name this process does not know, or arguments that do not fit it; returns
the task's registration (what its jobs take from it)."""

FIELDS = (
    "task", "args", "cron", "timezone", "queue", "priority", "misfire", "misfire_limit",
    "overlap", "enabled",
)  # fmt: skip


def _checked(
    definition: Mapping[str, Any], check_task: CheckTask, min_interval: float | None
) -> tuple[ScheduleFields, CronSchedule]:
    """The stored fields of a definition, every field checked, with the task's registration
    (``task_*``); and its cron schedule (no two fire times less than ``min_interval`` seconds
    apart; None: a cron kept as stored, not checked again)."""
    options = check_task(definition["task"], definition["args"])
    cron = CronSchedule.parse(definition["cron"], definition["timezone"])
    if min_interval is not None:
        cron.check_interval(min_interval)
    if definition["queue"] is not None:
        check_queue(definition["queue"])
    if definition["priority"] is not None:
        check_priority(definition["priority"])
    fields = ScheduleFields(
        task=definition["task"],
        args=encode_args(definition["args"]),
        cron=definition["cron"],
        timezone=definition["timezone"],
        queue=definition["queue"],
        priority=definition["priority"],
        misfire=definition["misfire"],
        misfire_limit=definition["misfire_limit"],
        overlap=definition["overlap"],
        **task_targets(options),
    )
    return fields, cron


def check_schedule_name(name: Any) -> str:
    """A name that may stand in a URL path and a log line (:data:`SCHEDULE_NAME`)."""
    if not isinstance(name, str) or not SCHEDULE_NAME.match(name):
        raise ScheduleError(
            "name", name, "must be 1-200 characters of letters, digits and _.:<>@+- (no spaces)"
        )
    if name.startswith(DEFINITION_SCHEDULE_PREFIX):
        raise ScheduleError(
            "name", name, f"may not start with {DEFINITION_SCHEDULE_PREFIX!r} (definitions' own)"
        )
    return name


def _not_a_definitions(origin: str, name: str) -> None:
    """A definition's schedule is changed through its definition (edit, pause, delete);
    operators may still pause, resume and trigger it here."""
    if origin == "definition":
        raise ConflictError(
            f"schedule {name!r} belongs to a definition; change, enable, disable or delete "
            "it through /api/definitions (pause, resume and trigger work here too)"
        )


async def get(pool: AsyncConnectionPool[Any], store: Store, name: str) -> StoredSchedule:
    """One stored schedule."""
    async with pool.connection() as conn:
        found = await store.schedule_get(conn, name=name)
    if found is None:
        raise NotFoundError("schedule", name)
    return StoredSchedule.from_row(found)


async def list_all(pool: AsyncConnectionPool[Any], store: Store) -> list[StoredSchedule]:
    """Every stored schedule, by name."""
    async with pool.connection() as conn:
        return [StoredSchedule.from_row(r) for r in await store.schedule_list(conn)]


async def create(
    pool: AsyncConnectionPool[Any],
    store: Store,
    definition: Mapping[str, Any],
    *,
    check_task: CheckTask,
    actor: str,
    min_interval: float = MIN_INTERVAL,
) -> StoredSchedule:
    """Store a new schedule; its first fire time is the first after the database's now.
    ``min_interval``: seconds between two fire times at least (``scheduler.min_interval``)."""
    check_schedule_name(definition["name"])
    fields, cron = _checked(definition, check_task, min_interval)
    async with pool.connection() as conn:
        now = await store.schedule_now(conn)
        found = await store.schedule_create(
            conn,
            name=definition["name"],
            fields=fields,
            enabled=definition["enabled"],
            next_run_at=cron.next_after(now),
            actor=actor,
        )
    if found is None:
        raise ConflictError(f"schedule {definition['name']!r} already exists")
    return StoredSchedule.from_row(found)


async def edit(
    pool: AsyncConnectionPool[Any],
    store: Store,
    name: str,
    changes: Mapping[str, Any],
    *,
    check_task: CheckTask,
    actor: str,
    min_interval: float = MIN_INTERVAL,
) -> StoredSchedule:
    """Change some fields of an operator-stored schedule (a changed cron fires no more often
    than every ``min_interval`` seconds)."""
    current = await get(pool, store, name)
    _not_a_definitions(current.origin, name)
    if current.origin != "api":
        raise ConflictError(
            f"schedule {name!r} is defined in code; change it there (operators may pause, "
            "resume, enable, disable and trigger it)"
        )
    merged = {field: getattr(current, field) for field in FIELDS} | dict(changes)
    fields, cron = _checked(merged, check_task, min_interval if "cron" in changes else None)
    async with pool.connection() as conn:
        now = await store.schedule_now(conn)
        found = await store.schedule_edit(
            conn,
            name=name,
            fields=fields,
            enabled=merged["enabled"],
            next_run_at=cron.next_after(now),
            actor=actor,
            changes=json.dumps({"fields": sorted(changes)}),
        )
    if found is None:  # deleted, or its origin changed, since it was read
        raise NotFoundError("schedule", name)
    return StoredSchedule.from_row(found)


async def delete(pool: AsyncConnectionPool[Any], store: Store, name: str, *, actor: str) -> None:
    """Delete a schedule; the jobs it made stay as history. One defined in code only when no
    live worker defines it (its code is gone: nothing else can remove it); one that live code
    defines is refused, naming those workers, since their next start would write it back."""
    async with pool.connection() as conn:
        deleted = await store.schedule_delete(
            conn, name=name, actor=actor, stale_after=WORKER_STALE_AFTER
        )
    if deleted is not None:
        return
    _not_a_definitions((await get(pool, store, name)).origin, name)  # 404 for an unknown name
    async with pool.connection() as conn:
        definers = await store.schedule_definers(conn, name=name, stale_after=WORKER_STALE_AFTER)
    workers = ", ".join(f"{w['host']} pid {w['pid']}" for w in definers) or "a live worker"
    raise ConflictError(
        f"schedule {name!r} is defined by code that is running ({workers}); remove it from "
        "that code and restart those workers, then delete it (pause or disable it meanwhile)"
    )


async def set_paused(
    pool: AsyncConnectionPool[Any], store: Store, name: str, paused: bool, *, actor: str
) -> StoredSchedule:
    """Pause (or resume) a stored schedule, audited; the state survives restarts."""
    async with pool.connection() as conn:
        found = await store.schedule_set_paused(conn, name=name, paused=paused, actor=actor)
    if not found:
        raise NotFoundError("schedule", name)
    return StoredSchedule.from_row(found[0])


async def set_enabled(
    pool: AsyncConnectionPool[Any], store: Store, name: str, enabled: bool, *, actor: str
) -> StoredSchedule:
    """Enable (or disable) a stored schedule, audited. Re-enabled, it goes on from its next
    fire time after now: the disabled window is not made up for."""
    async with pool.connection() as conn:
        row = await store.schedule_get(conn, name=name)
        if row is None:
            raise NotFoundError("schedule", name)
        _not_a_definitions(row["origin"], name)
        next_run_at = CronSchedule.parse(row["cron"], row["timezone"]).next_after(row["db_now"])
        found = await store.schedule_set_enabled(
            conn, name=name, enabled=enabled, next_run_at=next_run_at, actor=actor
        )
    if not found:  # deleted since it was read
        raise NotFoundError("schedule", name)
    return StoredSchedule.from_row(found[0])


async def trigger(
    pool: AsyncConnectionPool[Any],
    store: Store,
    name: str,
    *,
    registered: Callable[[str], TaskOptions | None],
    actor: str,
) -> int:
    """Enqueue one job of a stored schedule now, outside its cron, audited; the job's id.
    ``registered``: this process's registration of a task, for a schedule stored without
    its task's options."""
    async with pool.connection() as conn:
        row = await store.schedule_get(conn, name=name)
        if row is None:
            raise NotFoundError("schedule", name)
        options = job_options(registered(row["task"]), row)
        found = await store.schedule_trigger(
            conn,
            name=name,
            actor=actor,
            queue=options["queue"],
            priority=options["priority"],
            max_attempts=options["max_attempts"],
            timeout=options["timeout"],
        )
    if not found:  # deleted since it was read
        raise NotFoundError("schedule", name)
    job_id: int = found[0]["id"]
    return job_id
