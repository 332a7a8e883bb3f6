"""The scheduler: turns every due fire time of every schedule into a PENDING job.

Data flow, one transaction per pass: lock the due schedules (``FOR UPDATE SKIP LOCKED``),
work out in Python which fire times to run (cron, time zone and misfire policy, on the
database clock), insert one job per fire time (``ON CONFLICT (schedule_id, fire_time) DO
NOTHING``), and store the next fire time. A retried pass, a second scheduler process or a
failover can therefore never create a second job for a fire time, and because
``next_run_at`` lives in the database a restart loses nothing.

When (:class:`SchedulerService`): after each pass the lease holder reads the earliest next
fire time and sleeps until then (measured on the database's clock), or until a schedule
written by any process wakes it (NOTIFY), or at most the tick interval (the fallback should
a notification be lost). So a healthy scheduler passes at every fire time and the tick bounds
only how late a lost wake-up or a failover can make one.

Which fire times (:func:`fire_times_to_run`): a due fire time at most ``catch_up`` late is
one a live scheduler is merely serving late (a lost wake-up, a failover): every one gets its
job. A schedule whose oldest due fire time is later than that went unwatched (downtime: no
scheduler ran, or the schedule was paused): its misfire policy decides over the window.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any
from uuid import UUID

import psycopg
from psycopg_pool import AsyncConnectionPool

from tickwork.db.driver_errors import CONNECTION_ERRORS
from tickwork.db.loaders import Undecodable
from tickwork.db.store import Store
from tickwork.db.store.schedules import ScheduleFields
from tickwork.errors import ScheduleError
from tickwork.queue.admin import WORKER_STALE_AFTER
from tickwork.queue.enqueue import encode_args
from tickwork.queue.options import TaskOptions
from tickwork.queue.rows import call_args
from tickwork.schedule.cron import CronSchedule
from tickwork.schedule.records import Misfire, Overlap, ScheduleSpec, job_options, task_targets
from tickwork.services.leases import LeaseManager, Role
from tickwork.services.periodic import raise_if_cancelled
from tickwork.worker.listener import Listener

log = logging.getLogger("tickwork.scheduler")

DEFAULT_TICK_INTERVAL = 30.0
DEFAULT_DUE_BATCH = 100
ON_TIME_GRACE = timedelta(seconds=60)
"""Under the SKIP misfire policy, after downtime, a fire time this late still runs; older
ones are skipped."""
DEFAULT_CATCH_UP = timedelta(seconds=75)
"""How late a due fire time may be and still count as served late rather than missed: the
default tick (30 s) + lease time to live (30 s) + heartbeat (15 s) (:func:`catch_up_window`)."""
LEASE_POLL = 1.0
"""Seconds between a non-holder's looks at its (local) lease: a process that wins the
SCHEDULER lease starts passing within this."""
BUSY_WAIT = 0.01
"""Seconds before passing again when a schedule is due that the last pass did not take
(another pass holds its lock until it commits): a short wait, not a spin."""
FIRST_RETRY = 0.5
"""Seconds before a pass that met a database error is tried again (doubling, up to the
tick interval)."""


def catch_up_window(interval: float, lease_ttl: float, lease_heartbeat: float) -> timedelta:
    """The longest a live fleet can leave a fire time unserved: a lost wake-up waits for the
    next tick (``interval``); a dead holder's lease expires (``lease_ttl``) and another
    process wins it at its next heartbeat (``lease_heartbeat``). A fire time later than that
    was missed (downtime)."""
    return timedelta(seconds=interval + lease_ttl + lease_heartbeat)


@dataclass(frozen=True, slots=True)
class Fired:
    """One job a tick created."""

    schedule: str
    fire_time: datetime
    job_id: int


@dataclass(frozen=True, slots=True)
class TickResult:
    """What one scheduler pass did."""

    fired: list[Fired] = field(default_factory=list)
    """Jobs created, per schedule and fire time."""
    missed: int = 0
    """Fire times passed over by the misfire policy (at least this many: a long downtime is
    not enumerated to its start)."""
    overlapped: int = 0
    """Fire times skipped because the schedule's previous job had not finished."""
    more: bool = False
    """The pass took as many schedules as it takes at once: more may be due."""


FIRST_LOOKBACK = timedelta(hours=1)


def fire_times_to_run(
    cron: CronSchedule,
    next_run_at: datetime,
    now: datetime,
    misfire: Misfire,
    misfire_limit: int,
    catch_up: timedelta = DEFAULT_CATCH_UP,
) -> tuple[list[datetime], int]:
    """The due fire times (``next_run_at`` up to ``now``) this pass runs, and how many it
    passes over. While the oldest (``next_run_at``) is at most ``catch_up`` late, the
    scheduler was live and every one runs; otherwise it was down and the misfire policy
    decides. Only the latest fire times matter then, so after a long downtime the search
    looks back from ``now`` in growing windows instead of enumerating every missed minute
    since ``next_run_at``."""
    if now - next_run_at <= catch_up:
        return cron.fire_times(next_run_at - timedelta(microseconds=1), now), 0
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
        catch_up: timedelta = DEFAULT_CATCH_UP,
    ) -> None:
        self.pool = pool
        self.store = store
        self.task_options = task_options
        self.batch = batch
        self.catch_up = catch_up
        """How late a fire time may be and still run whatever the misfire policy."""
        self._invalid: dict[int, tuple[str, str]] = {}  # id -> (cron, timezone) that fail

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

    async def run_once(self, *, holder: str | None = None) -> TickResult:
        """One pass: every due schedule (up to ``batch``), in one transaction. ``holder``: the
        pass is the SCHEDULER lease holder's, and finds nothing due unless the database
        still counts that lease live when the pass starts (its jobs are never created after
        the lease ended, whatever delayed the pass on its way)."""
        fired: list[Fired] = []
        missed = overlapped = 0
        async with self.pool.connection() as conn, conn.transaction():
            due = await self.store.schedule_due_lock(conn, limit=self.batch, holder=holder)
            for row in due:
                now: datetime = row["db_now"]
                cron = self._parse(row)
                if cron is None:
                    continue
                times, passed_over = fire_times_to_run(
                    cron,
                    row["next_run_at"],
                    now,
                    Misfire(row["misfire"]),
                    row["misfire_limit"],
                    self.catch_up,
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
        # a full batch may leave more due (not if it was all schedules that do not parse)
        more = len(due) >= self.batch and any(row["id"] not in self._invalid for row in due)
        return TickResult(fired, missed, overlapped, more=more)

    def _parse(self, row: dict[str, Any]) -> CronSchedule | None:
        """The schedule's cron, or None for a stored definition that does not parse, or whose
        args cannot be decoded or are not an object (left alone; logged once per
        definition)."""
        definition = (row["cron"], row["timezone"])
        try:
            cron = CronSchedule.parse(*definition)
        except ScheduleError as exc:
            if self._invalid.get(row["id"]) != definition:
                log.error(
                    "schedule has an invalid definition; left alone",
                    extra={"schedule": row["name"], "error": str(exc)},
                )
            self._invalid[row["id"]] = definition
            return None
        args = call_args(row["args"])
        if isinstance(args, Undecodable):  # stored by SQL: no job could run with them
            if self._invalid.get(row["id"]) != definition:
                log.error(
                    "schedule's args cannot be decoded; left alone",
                    extra={"schedule": row["name"], "error": args.reason},
                )
            self._invalid[row["id"]] = definition
            return None
        self._invalid.pop(row["id"], None)
        return cron

    async def next_due(self) -> float | None:
        """Seconds from the database's now to the earliest next fire time (0 when one is
        due already), None when no schedule is to fire; schedules that do not parse are
        left out."""
        async with self.pool.connection() as conn:
            earliest, now = await self.store.schedule_next_due(conn, invalid=list(self._invalid))
        return None if earliest is None else max(0.0, (earliest - now).total_seconds())


class SchedulerService:
    """The scheduler behind the SCHEDULER lease: any number of processes run this, the lease
    holder passes, and a pass is idempotent should two ever overlap.

    The holder passes at each next fire time (on the database's clock), when a schedule is
    written anywhere (NOTIFY on the schema's ``schedules`` channel: :meth:`wake`, called by
    the process's worker's LISTEN connection, or with ``connect`` a LISTEN connection of its
    own while it holds the lease), and at least every ``interval`` seconds."""

    def __init__(
        self,
        scheduler: Scheduler,
        leases: LeaseManager,
        *,
        interval: float,
        connect: Callable[[], Awaitable[psycopg.AsyncConnection[Any]]] | None = None,
    ) -> None:
        self.scheduler = scheduler
        self.leases = leases
        self.interval = interval
        self._connect = connect
        self._wake = asyncio.Event()
        self.listening = asyncio.Event()
        """Set while the holder's LISTEN connection is up."""
        self.passes = 0
        """Passes made (each with its next wait worked out)."""

    def wake(self) -> None:
        """Pass now (a schedule changed; it may be due before the planned wake-up)."""
        self._wake.set()

    async def run_once(self) -> TickResult | None:
        """Pass if this process holds the SCHEDULER lease; None when it does not."""
        if not self.leases.holds(Role.SCHEDULER):
            return None
        return await self.scheduler.run_once(holder=self.leases.holder_id)

    async def pass_and_wait(self) -> float:
        """One pass, if this process holds the lease; the seconds to wait before the next:
        until the earliest next fire time, at most the tick interval (a non-holder looks at
        its lease again within :data:`LEASE_POLL`)."""
        result = await self.run_once()
        if result is None:
            return min(self.interval, LEASE_POLL)
        until = 0.0 if result.more else await self.scheduler.next_due()
        if until == 0.0 and not result.more and not result.fired:
            # due, yet this pass took nothing: another pass holds it (or it came due since)
            until = BUSY_WAIT
        self.passes += 1
        return self.interval if until is None else min(until, self.interval)

    async def run(self, stop: asyncio.Event) -> None:
        """Pass until ``stop`` is set (the process's lease manager, run by its host, competes
        for the lease); listen for schedule changes while holding the lease."""
        listener: asyncio.Task[None] | None = None
        retry = FIRST_RETRY
        try:
            while not stop.is_set():
                self._wake.clear()  # a change during the pass wakes the next one at once
                holds = self.leases.holds(Role.SCHEDULER)
                if holds and listener is None and self._connect is not None:
                    listener = asyncio.create_task(self._listen(stop), name="tickwork-sched")
                elif not holds and listener is not None:  # the lease went to another
                    await _cancelled(listener)
                    listener = None
                    self.listening.clear()
                try:
                    delay = await self.pass_and_wait()
                    retry = FIRST_RETRY
                except CONNECTION_ERRORS as exc:
                    log.error("scheduler pass failed", extra={"error": str(exc)})
                    delay, retry = retry, min(retry * 2, max(self.interval, FIRST_RETRY))
                raise_if_cancelled()
                await _first(stop, self._wake, delay)
        finally:
            if listener is not None:
                await _cancelled(listener)

    async def _listen(self, stop: asyncio.Event) -> None:
        assert self._connect is not None
        channel = self.scheduler.store.channel("schedules")

        def connected() -> None:
            self.listening.set()
            self._wake.set()  # what was written while not listening was not heard

        await Listener(
            self._connect,
            [channel],
            on_notify=lambda _channel, _payload: self._wake.set(),
            on_connected=connected,
            on_lost=self.listening.clear,
        ).run(stop)


async def _cancelled(task: asyncio.Task[None]) -> None:
    """Cancel ``task`` and wait for it to end."""
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)


async def _first(stop: asyncio.Event, wake: asyncio.Event, delay: float) -> None:
    """Wait ``delay`` seconds, or until ``stop`` or ``wake`` is set."""
    if delay <= 0 or stop.is_set() or wake.is_set():
        await asyncio.sleep(0)  # let others run between passes
        return
    waits = [asyncio.ensure_future(stop.wait()), asyncio.ensure_future(wake.wait())]
    try:
        await asyncio.wait(waits, timeout=delay, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for waiting in waits:
            waiting.cancel()
