"""The scheduler tick: turns every due fire time of every schedule into a PENDING job.

Data flow, one transaction per tick: lock the due schedules (``FOR UPDATE SKIP LOCKED``),
work out in Python which fire times to run (cron, time zone and misfire policy, on the
database clock), insert one job per fire time (``ON CONFLICT (schedule_id, fire_time) DO
NOTHING``), and store the next fire time. A retried tick, a second scheduler process or a
failover can therefore never create a second job for a fire time, and because
``next_run_at`` lives in the database a restart loses nothing.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any
from uuid import UUID

from psycopg_pool import AsyncConnectionPool

from tickwork.db.store import Store
from tickwork.db.store.schedules import ScheduleFields
from tickwork.errors import ScheduleError
from tickwork.queue.admin import WORKER_STALE_AFTER
from tickwork.queue.enqueue import encode_args
from tickwork.queue.options import TaskOptions
from tickwork.schedule.cron import CronSchedule
from tickwork.schedule.records import Misfire, Overlap, ScheduleSpec, job_options, task_targets
from tickwork.services.leases import LeaseManager, Role
from tickwork.services.periodic import run_periodically

log = logging.getLogger("tickwork.scheduler")

DEFAULT_TICK_INTERVAL = 30.0
DEFAULT_DUE_BATCH = 100
ON_TIME_GRACE = timedelta(seconds=60)
"""Under the SKIP misfire policy a fire time this late still runs; older ones are skipped."""


@dataclass(frozen=True, slots=True)
class Fired:
    """One job a tick created."""

    schedule: str
    fire_time: datetime
    job_id: int


@dataclass(frozen=True, slots=True)
class TickResult:
    """What one scheduler tick did."""

    fired: list[Fired] = field(default_factory=list)
    """Jobs created, per schedule and fire time."""
    missed: int = 0
    """Fire times passed over by the misfire policy (at least this many: a long downtime is
    not enumerated to its start)."""
    overlapped: int = 0
    """Fire times skipped because the schedule's previous job had not finished."""


FIRST_LOOKBACK = timedelta(hours=1)


def fire_times_to_run(
    cron: CronSchedule,
    next_run_at: datetime,
    now: datetime,
    misfire: Misfire,
    misfire_limit: int,
) -> tuple[list[datetime], int]:
    """The due fire times (``next_run_at`` up to ``now``) this tick runs, and how many it
    passes over, by the misfire policy. Only the latest fire times matter, so after a long
    downtime the search looks back from ``now`` in growing windows instead of enumerating
    every missed minute since ``next_run_at``."""
    want = misfire_limit if misfire is Misfire.ALL else 1
    earliest = next_run_at - timedelta(microseconds=1)  # next_run_at itself is due
    window = FIRST_LOOKBACK
    while True:
        start = max(earliest, now - window)
        due = cron.fire_times(start, now)
        if len(due) >= want or start == earliest:
            break
        window *= 8
    chosen = due[-want:]
    if misfire is Misfire.SKIP:
        chosen = [t for t in chosen if now - t <= ON_TIME_GRACE]
    return chosen, len(due) - len(chosen)


class Scheduler:
    """Materialises due schedules; run its :meth:`run_once` from one or many processes."""

    def __init__(
        self,
        pool: AsyncConnectionPool[Any],
        store: Store,
        task_options: Callable[[str], TaskOptions | None],
        *,
        batch: int = DEFAULT_DUE_BATCH,
    ) -> None:
        self.pool = pool
        self.store = store
        self.task_options = task_options
        self.batch = batch

    async def sync(self, specs: list[ScheduleSpec], *, defined_by: UUID | None = None) -> None:
        """Upsert code-defined schedules by name (their next fire time from database now),
        each with what its jobs take from the task's registration, and recorded as defined by
        the worker ``defined_by``; then bring operator-stored schedules of the tasks this
        process registers up to date with those tasks' registration."""
        async with self.pool.connection() as conn:
            now = await self.store.schedule_now(conn)
            for spec in specs:
                fields = ScheduleFields(
                    task=spec.task,
                    args=encode_args(spec.args),
                    cron=spec.cron.expression,
                    timezone=spec.cron.timezone,
                    queue=spec.queue,
                    priority=spec.priority,
                    misfire=spec.misfire.value,
                    misfire_limit=spec.misfire_limit,
                    overlap=spec.overlap.value,
                    **task_targets(self.task_options(spec.task)),
                )
                await self.store.schedule_upsert(
                    conn,
                    name=spec.name,
                    fields=fields,
                    next_run_at=spec.cron.next_after(now),
                    origin="code",
                    defined_by=[defined_by] if defined_by is not None else [],
                    stale_after=WORKER_STALE_AFTER,
                )
            stored = await self.store.schedule_list(conn)
            known = {
                row["task"]: options
                for row in stored
                if row["origin"] == "api" and (options := self.task_options(row["task"]))
            }
            if known:
                await self.store.schedule_retarget(
                    conn,
                    tasks=list(known),
                    queues=[options.queue for options in known.values()],
                    priorities=[options.priority for options in known.values()],
                    max_attempts=[options.max_attempts for options in known.values()],
                    timeouts=[options.timeout for options in known.values()],
                )

    async def run_once(self) -> TickResult:
        """One tick: every due schedule, in one transaction."""
        fired: list[Fired] = []
        missed = overlapped = 0
        async with self.pool.connection() as conn, conn.transaction():
            due = await self.store.schedule_due_lock(conn, limit=self.batch)
            for row in due:
                now: datetime = row["db_now"]
                try:
                    cron = CronSchedule.parse(row["cron"], row["timezone"])
                except ScheduleError as exc:
                    log.error(
                        "schedule has an invalid definition; left alone",
                        extra={"schedule": row["name"], "error": str(exc)},
                    )
                    continue
                times, passed_over = fire_times_to_run(
                    cron, row["next_run_at"], now, Misfire(row["misfire"]), row["misfire_limit"]
                )
                if (
                    times
                    and Overlap(row["overlap"]) is Overlap.SKIP
                    and await self.store.schedule_active_job(conn, schedule_id=row["id"])
                ):
                    overlapped += len(times)
                    times = []
                created = (
                    await self.store.schedule_fire(
                        conn,
                        task=row["task"],
                        args=json.dumps(row["args"]),
                        schedule_name=row["name"],
                        schedule_id=row["id"],
                        fire_times=times,
                        **job_options(self.task_options(row["task"]), row),
                    )
                    if times
                    else []
                )
                fired.extend(Fired(row["name"], c["fire_time"], c["id"]) for c in created)
                missed += passed_over
                await self.store.schedule_advance(
                    conn,
                    schedule_id=row["id"],
                    next_run_at=cron.next_after(now),
                    last_fire_at=times[-1] if times else None,
                )
        for item in fired:
            log.info(
                "schedule fired",
                extra={
                    "schedule": item.schedule,
                    "job_id": item.job_id,
                    "fire_time": item.fire_time.isoformat(),
                },
            )
        return TickResult(fired, missed, overlapped)


class SchedulerService:
    """The scheduler tick behind the SCHEDULER lease: any number of processes run this, the
    lease holder ticks, and the tick itself is idempotent should two ever overlap."""

    def __init__(self, scheduler: Scheduler, leases: LeaseManager, *, interval: float) -> None:
        self.scheduler = scheduler
        self.leases = leases
        self.interval = interval

    async def run_once(self) -> TickResult | None:
        """Tick if this process holds the SCHEDULER lease; None when it does not."""
        if not self.leases.holds(Role.SCHEDULER):
            return None
        return await self.scheduler.run_once()

    async def run(self, stop: asyncio.Event) -> None:
        """Tick on the interval while the lease is held, until ``stop`` is set (the process's
        lease manager, run by its host, competes for the lease)."""
        await run_periodically(
            self.run_once, interval=self.interval, stop=stop, log=log, name="scheduler tick"
        )
