"""Operators' view of the queue: job listings with strict filters, bulk retry and cancel,
deleting a job, queue statistics and pause, live workers.

Every function takes an async connection pool and the store (the storage seam); the API and
the CLI share them. Filters are checked here, once: an unknown state or a malformed value
is an :class:`~tickwork.errors.InvalidInput` naming the field, never an unfiltered answer.
"""

from __future__ import annotations

import enum
import logging
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, TypeVar
from uuid import UUID

from psycopg_pool import AsyncConnectionPool

from tickwork.db.driver_errors import retrying_deadlocks_async
from tickwork.db.store import AsyncConn, Row, Store
from tickwork.db.store.jobs import JobListFilters, JobSearch
from tickwork.definitions import reruns
from tickwork.errors import (
    EnqueueError,
    InvalidField,
    InvalidInput,
    JobNotFoundError,
    JobStateError,
    RerunRefused,
)
from tickwork.limits import LISTING_VALUE_BYTES
from tickwork.queue import rows as decode
from tickwork.queue.enqueue import (
    check_max_attempts,
    check_priority,
    check_queue,
    check_timeout,
)
from tickwork.types import AuditEvent, Execution, Job, JobState

MAX_PAGE = 500
DEFAULT_PAGE = 50
MAX_BULK = 10_000
"""Jobs one bulk retry or cancel may touch; narrow the filter for more."""
MAX_COUNT = MAX_BULK
"""A listing's count stops here ("10,000+"): what one bulk action may take is what is worth
counting exactly, and a count over the history costs what it reads."""
SEARCH_WINDOW = 20_000
"""Jobs one page of a text search looks through at most (newest first, under the other
filters): a search costs what this many rows cost, however few match."""
MAX_SEARCH_TEXT = 200
"""Characters a text search may hold."""
THROUGHPUT_WINDOW = 300.0
"""Seconds over which a queue's recent throughput is counted."""
log = logging.getLogger("tickwork.queue")

WORKER_STALE_AFTER = 120.0
"""A worker not seen for this long is not listed as live."""
OPERATIONS = ("retry", "cancel")
"""Operator actions on jobs (the store's ``job_retry`` and ``job_cancel``)."""
ALLOWED_FROM = {"retry": ["DEAD_LETTER", "FAILED"], "cancel": ["PENDING", "FAILED", "RUNNING"]}
"""The states each action applies to (the statements hold the same rule)."""
DELETABLE = ["PENDING", "FAILED", "SUCCEEDED", "CANCELLED", "DEAD_LETTER"]
"""The states a job may be deleted from: any but RUNNING (``job_delete`` holds the rule)."""
MAX_JOB_ID = 2**63 - 1
"""The largest job id (PostgreSQL's ``bigint``)."""


FILTER_FIELDS = (
    "states",
    "queue",
    "task",
    "schedule",
    "created_from",
    "created_to",
    "finished_from",
    "finished_to",
)
"""The fields of :class:`JobFilter`."""
EVERY_JOB = (
    "an empty filter selects every job: give at least one of state, queue, task, schedule,"
    " created_from, created_to, finished_from, finished_to, or all: true to act on every job"
)


@dataclass(frozen=True, slots=True)
class JobFilter:
    """Which jobs to list or act on; every field is optional."""

    states: list[JobState] | None = None
    """Any of these states."""
    queue: str | None = None
    """Exactly this queue."""
    task: str | None = None
    """Exactly this task name."""
    schedule: str | None = None
    """Made by this stored schedule (by name)."""
    created_from: datetime | None = None
    """Created at or after."""
    created_to: datetime | None = None
    """Created before."""
    finished_from: datetime | None = None
    """Finished at or after."""
    finished_to: datetime | None = None
    """Finished before."""

    @property
    def empty(self) -> bool:
        """True when it selects every job (no field set)."""
        return all(getattr(self, f) is None for f in FILTER_FIELDS)

    def statement_filters(self, schedule_id: int | None) -> JobListFilters:
        """What the listing statements select on (the schedule by its id)."""
        return JobListFilters(
            states=[s.value for s in self.states] if self.states else None,
            queue=self.queue,
            task=self.task,
            schedule_id=schedule_id,
            created_from=self.created_from,
            created_to=self.created_to,
            finished_from=self.finished_from,
            finished_to=self.finished_to,
        )

    @classmethod
    def parse(
        cls,
        *,
        state: list[str] | None = None,
        queue: str | None = None,
        task: str | None = None,
        schedule: str | None = None,
        created_from: datetime | None = None,
        created_to: datetime | None = None,
        finished_from: datetime | None = None,
        finished_to: datetime | None = None,
    ) -> JobFilter:
        """A filter from raw request values; an unknown state is refused, not ignored."""
        states = parse_choices("state", state, JobState, "a job state")
        if queue is not None:
            check_queue(queue)
        check_range("created", created_from, created_to)
        check_range("finished", finished_from, finished_to)
        return cls(
            states, queue, task, schedule, created_from, created_to, finished_from, finished_to
        )


@dataclass(frozen=True, slots=True)
class Page:
    """One page of a listing, newest first."""

    items: list[Any]
    next_cursor: int | None
    """Pass as ``before_id`` for the next page; None on the last page."""
    total: Total | None = None
    """How many match in all, when the listing was asked to count."""


@dataclass(frozen=True, slots=True)
class Total:
    """A bounded count: ``count`` exact unless ``capped`` (then more than ``count`` match)."""

    count: int
    capped: bool


@dataclass(frozen=True, slots=True)
class BulkResult:
    """What a bulk retry or cancel did."""

    matched: int
    """Jobs the filter selected."""
    changed: list[int]
    """Ids of the jobs the operation changed (others were in a state it does not apply to)."""
    refused: list[int] = field(default_factory=list)
    """Ids of runs of deleted definitions a retry left as they are (never retried: see
    :mod:`tickwork.definitions.reruns`)."""


@dataclass(frozen=True, slots=True)
class QueueStats:
    """One queue as operators see it."""

    name: str
    paused: bool
    pending: int
    running: int
    failed: int
    succeeded: int
    cancelled: int
    dead_letter: int
    oldest_pending_seconds: float | None
    """Age of the oldest runnable job (None when nothing is waiting)."""
    finished_last_5_minutes: int
    unserved: list[UnservedTask] = field(default_factory=list)
    """Tasks with waiting jobs here that no live worker claims (none has both the task and
    this queue): they wait until one starts."""


@dataclass(frozen=True, slots=True)
class UnservedTask:
    """Jobs of one task waiting in a queue that no live worker claims (none has the task)."""

    task: str
    jobs: int
    """Jobs waiting (PENDING, or FAILED awaiting a retry)."""
    oldest_seconds: float
    """How long the oldest of them has been due (0 when none is due yet)."""

    def describe(self, queue: str) -> str:
        """One line for operators."""
        jobs = f"{self.jobs:,} job{'' if self.jobs == 1 else 's'}"
        verb = "waits" if self.jobs == 1 else "wait"
        return (
            f"{jobs} of task {self.task} {verb} in queue {queue}: no live worker claims"
            " that task from that queue (start one whose app defines it, on that queue)"
        )


@dataclass(frozen=True, slots=True)
class WorkerInfo:
    """A live worker process."""

    id: UUID
    host: str
    pid: int
    queues: list[str]
    tasks: list[str]
    """Tasks its executor claims (jobs of other tasks wait for a worker that has them)."""
    concurrency: int
    in_flight: int
    started_at: datetime
    last_seen_at: datetime


E = TypeVar("E", bound=enum.Enum)


def parse_choices(field: str, values: list[str] | None, kind: type[E], noun: str) -> list[E] | None:
    """Repeated or comma-separated names of ``kind`` members (any case); an unknown one is
    refused naming ``field``, never ignored. None when no value was given."""
    if not values:
        return None
    chosen = []
    for value in values:
        for part in value.split(","):
            try:
                chosen.append(kind(part.strip().upper()))
            except ValueError:
                known = ", ".join(str(k.value) for k in kind)
                raise InvalidInput(field, part, f"is not {noun} ({known})") from None
    return chosen


def check_range(
    name: str,
    start: datetime | None,
    end: datetime | None,
    *,
    fields: tuple[str, str] | None = None,
) -> None:
    """``<name>_from`` and ``<name>_to`` (or the two ``fields`` named) are zone-aware and in
    order."""
    first, last = fields or (f"{name}_from", f"{name}_to")
    if start is not None and start.tzinfo is None:
        raise InvalidInput(first, start.isoformat(), "must carry a time zone offset")
    if end is not None and end.tzinfo is None:
        raise InvalidInput(last, end.isoformat(), "must carry a time zone offset")
    if start is not None and end is not None and end <= start:
        raise InvalidInput(last, end.isoformat(), f"must be after {first}")


BUCKETS: dict[str, float] = {"minute": 60.0, "hour": 3600.0, "day": 86400.0}
"""The bucket sizes of charts (seconds); what they sum is counted per minute."""
MAX_BUCKETS = 10_000
"""Buckets one chart request may span (a month of minutes is 43,200: ask by hour)."""


async def chart_range(
    conn: AsyncConn, store: Store, start: datetime | None, end: datetime | None, bucket: str
) -> tuple[datetime, datetime, float]:
    """A chart's ``from`` and ``to`` (default: the 24 hours to now, database clock) and its
    bucket in seconds, checked: a known bucket, zone-aware times in order, at most
    :data:`MAX_BUCKETS` buckets."""
    if bucket not in BUCKETS:
        raise InvalidInput("bucket", bucket, f"must be one of {', '.join(BUCKETS)}")
    step = BUCKETS[bucket]
    check_range("", start, end, fields=("from", "to"))
    end = end or await store.schedule_now(conn)
    start = start or end - timedelta(days=1)
    check_range("", start, end, fields=("from", "to"))  # a from after the default to
    if (end - start).total_seconds() / step > MAX_BUCKETS:
        raise InvalidInput(
            "from",
            start.isoformat(),
            f"spans more than {MAX_BUCKETS:,} {bucket}s: ask by a larger bucket",
        )
    return start, end, step


def check_limit(limit: int) -> int:
    if not 1 <= limit <= MAX_PAGE:
        raise InvalidInput("limit", limit, f"must be between 1 and {MAX_PAGE}")
    return limit


async def _schedule_id(pool: AsyncConnectionPool[Any], store: Store, name: str) -> int | None:
    """The id of the stored schedule called ``name``; None when there is none."""
    async with pool.connection() as conn:
        found = await store.schedule_get(conn, name=name)
    return None if found is None else int(found["id"])


async def _job_list(
    pool: AsyncConnectionPool[Any],
    store: Store,
    where: JobFilter,
    schedule_id: int | None,
    *,
    limit: int,
    before_id: int | None,
    value_cap: int,
    search: JobSearch | None = None,
) -> list[Row]:
    """The rows of the jobs ``where`` selects (its schedule as ``schedule_id``)."""
    async with pool.connection() as conn:
        return await store.job_list(
            conn,
            filters=where.statement_filters(schedule_id),
            before_id=before_id,
            limit=limit,
            value_cap=value_cap,
            search=search,
        )


def search_words(text: str | None) -> str | None:
    """The words of a text search, checked (None: no search)."""
    if text is None or not text.strip():
        return None
    text = text.strip()
    if len(text) > MAX_SEARCH_TEXT:
        raise InvalidInput("q", text[:40] + "...", f"is longer than {MAX_SEARCH_TEXT} characters")
    if any(ord(c) < 32 for c in text):
        raise InvalidInput("q", text, "holds a control character")
    return text


def _pattern(text: str) -> str:
    """An ILIKE pattern matching ``text`` anywhere, its wildcards taken literally."""
    escaped = text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    return f"%{escaped}%"


async def list_jobs(
    pool: AsyncConnectionPool[Any],
    store: Store,
    where: JobFilter,
    *,
    limit: int = DEFAULT_PAGE,
    before_id: int | None = None,
    count: bool = False,
    text: str | None = None,
) -> Page:
    """Jobs matching ``where``, newest first, a page at a time; with ``count``, how many
    match in all, counted up to :data:`MAX_COUNT` (``total``; the one read of the history a
    listing makes, so only when asked).

    ``text``: only jobs whose id, task, unique key, creator, arguments, result or an
    attempt's error hold it (any case; ``#42``: job 42 only). One page of a search looks through the
    :data:`SEARCH_WINDOW` newest jobs the filters select (older than ``before_id``) at most:
    a page may hold fewer matches than ``limit`` and still have a next one, where the search
    goes on. A count counts the filters' matches, not the text's."""
    limit = check_limit(limit)
    words = search_words(text)
    schedule_id = None
    if where.schedule is not None:
        schedule_id = await _schedule_id(pool, store, where.schedule)
        if schedule_id is None:  # a schedule that does not exist: nothing can match
            return Page([], None, Total(0, False) if count else None)
    filters = where.statement_filters(schedule_id)
    total = None
    if count:
        async with pool.connection() as conn:
            n, _ = await store.job_window(conn, filters=filters, before_id=None, cap=MAX_COUNT + 1)
        total = Total(min(n, MAX_COUNT), n > MAX_COUNT)
    search = None
    window_end = None  # where the next page of a search goes on when this one found too few
    if words is not None:
        async with pool.connection() as conn:
            seen, floor_id = await store.job_window(
                conn, filters=filters, before_id=before_id, cap=SEARCH_WINDOW
            )
        if seen == SEARCH_WINDOW:  # older jobs are left for the next page
            window_end = floor_id
        floor = floor_id if window_end else None
        if words.startswith("#") and words[1:].isdigit():  # "#42": job 42 only
            search = JobSearch(words[1:], None, floor)
        else:
            search = JobSearch(words, _pattern(words), floor)
    found = await _job_list(
        pool,
        store,
        where,
        schedule_id,
        limit=limit,
        before_id=before_id,
        value_cap=LISTING_VALUE_BYTES,
        search=search,
    )
    jobs = [decode.servable(decode.job(r)) for r in found]
    return Page(jobs, jobs[-1].id if len(jobs) == limit else window_end, total)


async def bulk(
    pool: AsyncConnectionPool[Any],
    store: Store,
    operation: str,
    where: JobFilter,
    actor: str,
    *,
    every: bool = False,
) -> BulkResult:
    """Retry (``operation="retry"``) or cancel every job matching ``where`` (at most
    :data:`MAX_BULK`; more is refused rather than done in part). An empty filter is refused
    (:class:`InvalidField` naming ``all``) unless ``every`` says every job is meant: a
    request that lost its filter on the way must not act on the whole queue."""
    if operation not in OPERATIONS:
        raise InvalidInput("operation", operation, "must be retry or cancel")
    if where.empty and not every:
        raise InvalidField("all", EVERY_JOB)
    schedule_id = None
    if where.schedule is not None:
        schedule_id = await _schedule_id(pool, store, where.schedule)
        if schedule_id is None:  # a schedule that does not exist: nothing can match
            return BulkResult(0, [])
    found = await _job_list(
        pool, store, where, schedule_id, limit=MAX_BULK + 1, before_id=None, value_cap=0
    )  # ids are enough
    if len(found) > MAX_BULK:
        raise InvalidInput(
            "filter", "matches more than 10,000 jobs", "narrow it (one bulk call has a limit)"
        )
    ids = [r["id"] for r in found]
    if not ids:
        return BulkResult(0, [])
    found_rows, refused = await _change(pool, store, operation, ids, actor)
    changed = sorted(r["id"] for r in found_rows if r["state"] is not None)
    return BulkResult(len(ids), changed, sorted(refused))


async def _change(
    pool: AsyncConnectionPool[Any],
    store: Store,
    operation: str,
    job_ids: list[int],
    actor: str,
) -> tuple[list[Row], dict[int, int | None]]:
    """Retry or cancel these jobs in one statement; rows ``id, previous_state, state`` per job
    found (``state`` None where the operation does not apply), and the runs of deleted
    definitions a retry refused (job id: definition id; they have no row).

    A retry runs each definition's run with the definition as it is now, holding those
    definitions until it commits (:mod:`tickwork.definitions.reruns`): the definitions are
    locked before the jobs. The statement locks its jobs in id order; one locking the same
    jobs in another order can still meet it, so a run the database aborts to break a
    deadlock is run again."""

    async def run() -> tuple[list[Row], dict[int, int | None]]:
        async with pool.connection() as conn:
            if operation == "cancel":
                return await store.job_cancel(conn, job_ids=job_ids, actor=actor), {}
            async with conn.transaction():
                rerun = await reruns.plan(conn, store, job_ids)
                kept = [i for i in job_ids if i not in rerun.refused]
                found = (
                    await store.job_retry(conn, job_ids=kept, actor=actor, reruns=rerun.reruns)
                    if kept
                    else []
                )
                return found, rerun.refused

    return await retrying_deadlocks_async(run, operation=operation)


async def act(
    pool: AsyncConnectionPool[Any],
    store: Store,
    operation: str,
    job_ids: list[int],
    actor: str,
) -> dict[int, str | None]:
    """Retry or cancel these jobs in one statement. For each job found: its new state, or
    None when the operation does not apply to its state or a retry refused it (a run of a
    deleted definition); missing ids are left out."""
    found, refused = await _change(pool, store, operation, job_ids, actor)
    return {r["id"]: r["state"] for r in found} | dict.fromkeys(refused)


async def change_job(
    pool: AsyncConnectionPool[Any], store: Store, operation: str, job_id: int, actor: str
) -> Job:
    """Retry or cancel one job (``operation``); the job as it is now. Raises
    :class:`JobNotFoundError`, or :class:`JobStateError` naming the state the job was in
    when the operation does not apply to it. A retry of a definition's run runs the
    definition as it is now; :class:`RerunRefused` when it was deleted."""
    found, refused = await _change(pool, store, operation, [job_id], actor)
    if job_id in refused:
        raise RerunRefused(job_id, refused[job_id])
    if not found:
        raise JobNotFoundError(job_id)
    if found[0]["state"] is None:
        raise JobStateError(job_id, found[0]["previous_state"], operation, ALLOWED_FROM[operation])
    return await get_job(pool, store, job_id)


@dataclass(frozen=True, slots=True)
class DeletedJob:
    """What deleting a job removed."""

    id: int
    state: JobState
    """The state the job was in."""
    executions: int
    """Its attempts' rows deleted with it."""


def check_job_id(job_id: int) -> int:
    """A job id as the jobs table can hold one (1 to :data:`MAX_JOB_ID`), or
    :class:`InvalidInput` naming ``job_id``."""
    if isinstance(job_id, bool) or not isinstance(job_id, int) or not 1 <= job_id <= MAX_JOB_ID:
        raise InvalidInput("job_id", job_id, f"must be a whole number from 1 to {MAX_JOB_ID}")
    return job_id


async def delete_job(
    pool: AsyncConnectionPool[Any], store: Store, job_id: int, actor: str
) -> DeletedJob:
    """Delete a job that is not RUNNING, with its attempts; audited as ``job.deleted`` by
    ``actor`` (the event outlives the job: ``GET /api/audit?target_type=job&target_id=``).
    Raises :class:`JobNotFoundError`, or :class:`JobStateError` naming the state when the job
    is RUNNING (cancel it first: once its attempt ends it may be deleted). The statement
    decides on the row as it is when locked, so a claim racing the delete wins or loses
    whole: the job runs and is refused, or is deleted and never claimed."""
    check_job_id(job_id)
    async with pool.connection() as conn:
        found = await store.job_delete(conn, job_id=job_id, actor=actor)
    if found is None:
        raise JobNotFoundError(job_id)
    if not found["deleted"]:
        raise JobStateError(job_id, found["state"], "delete", DELETABLE)
    return DeletedJob(job_id, JobState(found["state"]), found["executions"])


async def get_job(pool: AsyncConnectionPool[Any], store: Store, job_id: int) -> Job:
    """One job with its state, attempts, result and last error."""
    async with pool.connection() as conn:
        found = await store.job_get(conn, job_id=job_id)
        if found is None:
            raise await _not_found(conn, store, job_id)
    return decode.job(found)


async def _not_found(conn: AsyncConn, store: Store, job_id: int) -> JobNotFoundError:
    """The error for a job that is not there, naming who deleted it and when if an operator
    did (its audit trail outlives it; retention's deletes are not audited)."""
    events = await store.audit_list_for_target(conn, target_type="job", target_id=str(job_id))
    deleted = [e for e in events if e["event_type"] == "job.deleted"]
    if not deleted:
        return JobNotFoundError(job_id)
    return JobNotFoundError(
        job_id, deleted_by=deleted[-1]["actor"], deleted_at=deleted[-1]["occurred_at"]
    )


@dataclass(frozen=True, slots=True)
class TimelineEntry:
    """One moment of a job's life: its creation, an attempt's claim and end, or an event of
    its audit trail (an operator's action, the watchdog's reclaim, a dead letter)."""

    at: datetime
    """When (database time)."""
    event: str
    """``job.created``, ``attempt.claimed``, ``attempt.succeeded`` (``.failed``,
    ``.timed_out``, ``.cancelled``, ``.released``), or an audit event type (``job.retried``,
    ``job.cancel_requested``, ``job.cancelled``, ``job.dead_lettered``, ``job.reclaimed``,
    ...)."""
    actor: str
    """Who or what: ``user:...``, ``worker:<id>``, ``watchdog:<id>``, the enqueuer."""
    attempt: int | None = None
    """The attempt it concerns, when one does."""
    detail: dict[str, Any] = field(default_factory=dict)
    """What else there is to say: an attempt's error (type and message), an audit event's
    metadata."""


def timeline(job: Job, attempts: list[Execution], events: list[AuditEvent]) -> list[TimelineEntry]:
    """The job's life in time order (at equal times: created, claimed, then what ended):
    its row, its attempts' transitions and its audit events, merged. The job path records
    claims and outcomes in execution rows, not in the audit trail (a write less per
    transition); this is where the two meet."""
    entries: list[tuple[datetime, int, TimelineEntry]] = [
        (job.created_at, 0, TimelineEntry(job.created_at, "job.created", job.created_by))
    ]
    for e in attempts:
        worker = f"worker:{e.worker_id}"
        claimed = TimelineEntry(e.started_at, "attempt.claimed", worker, e.attempt)
        entries.append((e.started_at, 1, claimed))
        if e.finished_at is not None:
            detail = {} if e.error is None else {"error": f"{e.error.type}: {e.error.message}"}
            ended = TimelineEntry(
                e.finished_at, f"attempt.{e.state.value.lower()}", worker, e.attempt, detail
            )
            entries.append((e.finished_at, 2, ended))
    for a in events:
        entries.append(
            (
                a.occurred_at,
                2,
                TimelineEntry(a.occurred_at, a.event_type, a.actor, None, a.metadata),
            )
        )
    entries.sort(key=lambda entry: (entry[0], entry[1]))
    return [entry for _, _, entry in entries]


async def job_timeline(
    pool: AsyncConnectionPool[Any], store: Store, job_id: int
) -> list[TimelineEntry]:
    """:func:`timeline` of one job, read from the database."""
    job = await get_job(pool, store, job_id)
    return timeline(
        job, await executions(pool, store, job_id), await job_audit(pool, store, job_id)
    )


async def job_audit(pool: AsyncConnectionPool[Any], store: Store, job_id: int) -> list[AuditEvent]:
    """The audit trail of one job, oldest first."""
    async with pool.connection() as conn:
        found = await store.audit_list_for_target(conn, target_type="job", target_id=str(job_id))
    return [decode.audit_event(r) for r in found]


async def executions(pool: AsyncConnectionPool[Any], store: Store, job_id: int) -> list[Execution]:
    """Every attempt of a job, oldest first."""
    async with pool.connection() as conn:
        found = await store.execution_list_for_job(conn, job_id=job_id)
    return [decode.execution(r) for r in found]


async def queue_stats(pool: AsyncConnectionPool[Any], store: Store) -> list[QueueStats]:
    """Every queue that holds jobs or has a stored pause state."""
    async with pool.connection() as conn:
        found = await store.queue_stats(conn, window=THROUGHPUT_WINDOW)
    async with pool.connection() as conn:
        waiting = await store.queue_unserved(conn, stale_after=WORKER_STALE_AFTER)
    unserved: dict[str, list[UnservedTask]] = {}
    for u in waiting:
        unserved.setdefault(u["queue"], []).append(
            UnservedTask(u["task"], u["jobs"], u["oldest_seconds"])
        )
    return [
        QueueStats(
            name=r["name"],
            paused=r["paused"],
            pending=r["pending"],
            running=r["running"],
            failed=r["failed"],
            succeeded=r["succeeded"],
            cancelled=r["cancelled"],
            dead_letter=r["dead_letter"],
            oldest_pending_seconds=None
            if r["oldest_pending_seconds"] is None
            else float(r["oldest_pending_seconds"]),
            finished_last_5_minutes=r["finished_recently"],
            unserved=unserved.get(r["name"], []),
        )
        for r in found
    ]


FINISHED_STATES = ("SUCCEEDED", "FAILED", "DEAD_LETTER", "CANCELLED")
"""The states a chart of finished work counts arrivals in (FAILED: an attempt failed and its
retry is due)."""


async def throughput(
    pool: AsyncConnectionPool[Any],
    store: Store,
    *,
    queue: str | None = None,
    start: datetime | None = None,
    end: datetime | None = None,
    bucket: str = "hour",
) -> dict[str, Any]:
    """Finished work per queue from ``start`` to ``end`` (default: the last 24 hours), in
    buckets of a ``minute``, an ``hour`` or a ``day``: jobs that succeeded, were
    dead-lettered or cancelled, and attempts that failed with a retry due; and the totals.
    Read from the per-minute rollups (kept ``retention.throughput_after``), never the jobs."""
    if queue is not None:
        check_queue(queue)
    async with pool.connection() as conn:
        start, end, step = await chart_range(conn, store, start, end, bucket)
        rows = await store.tally_throughput(
            conn, subject="job", name=queue, start=start, end=end, step=step
        )
    buckets: dict[tuple[datetime, str], dict[str, Any]] = {}
    for r in rows:
        row = buckets.setdefault(
            (r["bucket"], r["name"]),
            {"at": r["bucket"], "queue": r["name"]} | {s.lower(): 0 for s in FINISHED_STATES},
        )
        if r["state"] in FINISHED_STATES:
            row[r["state"].lower()] += r["n"]
    found = list(buckets.values())
    return {
        "start": start,
        "end": end,
        "bucket": bucket,
        "queue": queue,
        "buckets": found,
    } | {s.lower(): sum(b[s.lower()] for b in found) for s in FINISHED_STATES}


async def set_queue_paused(
    pool: AsyncConnectionPool[Any], store: Store, name: str, paused: bool, actor: str
) -> None:
    """Pause or resume a queue; the state is stored, so it survives restarts."""
    check_queue(name)
    async with pool.connection() as conn:
        await store.queue_set_paused(conn, name=name, paused=paused, actor=actor)


TASKS_SEEN_WITHIN = 86400.0
"""A task counts as known to the fleet while a worker that defines it was seen this recently."""


async def known_tasks(conn: AsyncConn, store: Store) -> dict[str, dict[str, Any]]:
    """Tasks the workers seen within :data:`TASKS_SEEN_WITHIN` define (stopped or not), with
    what each gives its jobs (queue, priority, max_attempts, timeout), as the most recently
    seen of those workers recorded it."""
    found = await store.worker_known_tasks(conn, seen_within=TASKS_SEEN_WITHIN)
    return {r["task"]: recorded_options(r["options"]) for r in found}


RECORDED_OPTION_CHECKS = (
    ("queue", check_queue),
    ("priority", check_priority),
    ("max_attempts", check_max_attempts),
    ("timeout", check_timeout),
)


def recorded_options(options: Any) -> dict[str, Any]:
    """The options a worker recorded for a task, keeping only the values an enqueue accepts:
    a row written by another release (other limits) or by hand can neither fail an enqueue
    or a schedule nor put a value the jobs table refuses into a stored schedule."""
    if not isinstance(options, dict):
        return {}
    kept: dict[str, Any] = {}
    for name, check in RECORDED_OPTION_CHECKS:
        if name in options:
            try:
                kept[name] = check(options[name])
            except EnqueueError:
                log.warning("a worker recorded an option tickwork refuses", extra={"option": name})
    return kept


async def list_workers(pool: AsyncConnectionPool[Any], store: Store) -> list[WorkerInfo]:
    """Worker processes that are running now."""
    async with pool.connection() as conn:
        found = await store.worker_list(conn, stale_after=WORKER_STALE_AFTER)
    return [
        WorkerInfo(
            id=r["id"],
            host=r["host"],
            pid=r["pid"],
            queues=list(r["queues"]),
            tasks=list(r["tasks"]),
            concurrency=r["concurrency"],
            in_flight=r["in_flight"],
            started_at=r["started_at"],
            last_seen_at=r["last_seen_at"],
        )
        for r in found
    ]
