"""Statements of ``sql/jobs.sql``, and ``execution_list_for_job`` (a job's attempts, as
operators read them)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass
from datetime import datetime
from typing import Any

from tickwork.db.store.runner import AsyncConn, Conn, Row, Runner


@dataclass(frozen=True, slots=True)
class Rerun:
    """A definition's run that a retry sends back with its definition as it is now."""

    job_id: int
    """The run's job."""
    fields: str
    """The definition's fields for a run (JSON text), put over the run's own arguments."""
    queue: str
    """The definition's runtime's queue now (a script's language may have changed)."""


# not frozen: a frozen __init__ costs more, and rows are built per job; compared by identity
# (eq=False), so list.count(row) tells in C whether a batch shares one row
@dataclass(slots=True, eq=False)
class JobRow:
    """A validated job's columns but its arguments, ready to insert (internal; never changed
    after it is built, so jobs with the same options share one: a task's jobs that set no
    option of their own are one object, see ``Task.row``). The arguments travel beside it."""

    queue: str
    task: str
    priority: int
    max_attempts: int
    run_at: datetime | None
    timeout: float | None
    unique_key: str | None
    created_by: str
    trace_context: str | None = None
    """The enqueuer's W3C trace context, when it traces (ops/tracing.py)."""


INSERT_MANY_COLUMNS = (
    "queue",
    "task",
    "priority",
    "max_attempts",
    "run_at",
    "timeout",
    "unique_key",
    "created_by",
    "trace_context",
)
"""The columns job_insert_many takes as one array each (or one value for all)."""


def _insert_params(job: JobRow, args: str) -> dict[str, Any]:
    return {
        "queue": job.queue,
        "task": job.task,
        "args": args,
        "priority": job.priority,
        "max_attempts": job.max_attempts,
        "run_at": job.run_at,
        "timeout": job.timeout,
        "unique_key": job.unique_key,
        "created_by": job.created_by,
        "trace_context": job.trace_context,
    }


def _insert_many_params(jobs: Sequence[JobRow], args: str) -> dict[str, Any]:
    params: dict[str, Any] = {"args": args}
    if jobs.count(jobs[0]) == len(jobs):  # the usual batch: one row shared by every job
        for column in INSERT_MANY_COLUMNS:
            params[column], params[column + "_all"] = [], getattr(jobs[0], column)
        return params
    for column in INSERT_MANY_COLUMNS:
        values = [getattr(job, column) for job in jobs]
        first = values[0]
        # the same value for every job travels once (see job_insert_many). Equal values
        # store the same (1 and 1.0 as float8), except datetimes: == ignores `fold`, so the
        # two 02:30s of a DST change in one zone compare equal; run_at must be the very object.
        if column == "run_at":
            same = all(v is first for v in values)
        else:
            same = values.count(first) == len(values)
        if same:
            params[column], params[column + "_all"] = [], first
        else:
            params[column], params[column + "_all"] = values, None
    return params


def insert_many_statement(jobs: Sequence[JobRow]) -> str:
    """The statement that enqueues the batch ``jobs``: ``job_insert_many``, or
    ``job_insert_many_keyless`` when no job has a unique key (no upsert to pay for)."""
    first = jobs[0]
    if jobs.count(first) == len(jobs):  # one shared row (by identity: eq=False)
        keyless = first.unique_key is None
    else:
        keyless = all(job.unique_key is None for job in jobs)
    return "job_insert_many_keyless" if keyless else "job_insert_many"


@dataclass(frozen=True, slots=True)
class JobListFilters:
    """What ``job_list`` and ``job_window`` select on; None: not filtering on it."""

    states: list[str] | None
    queue: str | None
    task: str | None
    schedule_id: int | None
    created_from: datetime | None
    created_to: datetime | None
    finished_from: datetime | None
    finished_to: datetime | None


@dataclass(frozen=True, slots=True)
class JobSearch:
    """Words searched for in a listing, through ids ``floor_id`` and up: ``text`` matched
    whole against the id, ``pattern`` (ILIKE) against the rest (None: the id only)."""

    text: str
    pattern: str | None
    floor_id: int | None


class JobStatements(Runner):
    """One method per statement of ``sql/jobs.sql``."""

    async def job_get(self, conn: AsyncConn, *, job_id: int) -> Row | None:
        """The row of one job (``job_row`` columns), or None."""
        found = await self._rows(conn, "job_get", {"job_id": job_id})
        return found[0] if found else None

    async def job_insert(self, conn: AsyncConn, *, job: JobRow, args: str) -> Row:
        """Enqueue one job (``args``: its arguments as JSON text); the answer row: ``id``,
        ``existing`` (the whole job holding its unique key as a document, else None),
        ``created_at``."""
        return (await self._rows(conn, "job_insert", _insert_params(job, args)))[0]

    def job_insert_sync(self, conn: Conn, *, job: JobRow, args: str) -> Row:
        """:meth:`job_insert` on a sync connection."""
        return self._rows_sync(conn, "job_insert", _insert_params(job, args))[0]

    async def job_insert_many(self, conn: AsyncConn, *, jobs: Sequence[JobRow], args: str) -> Row:
        """Enqueue a batch in input order (``args``: their arguments as one JSON array); the
        answer row: ``ids`` of the new jobs, ``duplicates`` (the whole jobs holding a key sent,
        as documents), ``created_at``. A batch without unique keys runs as
        :meth:`job_insert_many_keyless`."""
        if insert_many_statement(jobs) == "job_insert_many_keyless":
            return await self.job_insert_many_keyless(conn, jobs=jobs, args=args)
        return (await self._rows(conn, "job_insert_many", _insert_many_params(jobs, args)))[0]

    def job_insert_many_sync(self, conn: Conn, *, jobs: Sequence[JobRow], args: str) -> Row:
        """:meth:`job_insert_many` on a sync connection."""
        if insert_many_statement(jobs) == "job_insert_many_keyless":
            return self.job_insert_many_keyless_sync(conn, jobs=jobs, args=args)
        return self._rows_sync(conn, "job_insert_many", _insert_many_params(jobs, args))[0]

    async def job_insert_many_keyless(
        self, conn: AsyncConn, *, jobs: Sequence[JobRow], args: str
    ) -> Row:
        """:meth:`job_insert_many` of a batch in which no job has a unique key, without the
        upsert (a key given anyway is stored, and a live one fails the statement)."""
        params = _insert_many_params(jobs, args)
        return (await self._rows(conn, "job_insert_many_keyless", params))[0]

    def job_insert_many_keyless_sync(self, conn: Conn, *, jobs: Sequence[JobRow], args: str) -> Row:
        """:meth:`job_insert_many_keyless` on a sync connection."""
        params = _insert_many_params(jobs, args)
        return self._rows_sync(conn, "job_insert_many_keyless", params)[0]

    async def job_cancel(self, conn: AsyncConn, *, job_ids: Sequence[int], actor: str) -> list[Row]:
        """Cancel these jobs (a RUNNING one: request it); rows ``id, previous_state, state``
        per job found, ``state`` None where cancelling does not apply."""
        return await self._rows(conn, "job_cancel", {"job_ids": list(job_ids), "actor": actor})

    async def job_retry(
        self,
        conn: AsyncConn,
        *,
        job_ids: Sequence[int],
        actor: str,
        reruns: Sequence[Rerun] = (),
    ) -> list[Row]:
        """Send these DEAD_LETTER or FAILED jobs back to PENDING now; rows ``id,
        previous_state, state`` per job found, ``state`` None where retrying does not apply.
        Each of ``reruns`` gets its definition's current fields and queue as it goes back."""
        return await self._rows(
            conn,
            "job_retry",
            {
                "job_ids": list(job_ids),
                "actor": actor,
                "rerun_ids": [r.job_id for r in reruns],
                "rerun_fields": [r.fields for r in reruns],
                "rerun_queues": [r.queue for r in reruns],
            },
        )

    async def job_delete(self, conn: AsyncConn, *, job_id: int, actor: str) -> Row | None:
        """Delete this job with its executions unless it is RUNNING (audited); the row ``id,
        state, deleted, executions`` (the state it was in), or None when there is no such
        job."""
        found = await self._rows(conn, "job_delete", {"job_id": job_id, "actor": actor})
        return found[0] if found else None

    async def job_list(
        self,
        conn: AsyncConn,
        *,
        filters: JobListFilters,
        before_id: int | None,
        limit: int,
        value_cap: int,
        search: JobSearch | None = None,
    ) -> list[Row]:
        """Up to ``limit`` jobs the filters (and ``search``) select, newest first, older than
        ``before_id``; arguments and results over ``value_cap`` bytes of JSON left out (NULL,
        named in ``omitted``)."""
        params = asdict(filters) | {"before_id": before_id, "limit": limit, "value_cap": value_cap}
        words: dict[str, Any] = {"pattern": None, "text": None, "floor_id": None}
        if search is not None:
            words = {"pattern": search.pattern, "text": search.text, "floor_id": search.floor_id}
        return await self._rows(conn, "job_list", params | words)

    async def job_due_queues(self, conn: AsyncConn) -> list[str]:
        """The queues holding a job due now, not paused."""
        return [r["queue"] for r in await self._rows(conn, "job_due_queues", {})]

    async def job_window(
        self, conn: AsyncConn, *, filters: JobListFilters, before_id: int | None, cap: int
    ) -> tuple[int, int | None]:
        """How many of the newest ``cap`` jobs the filters select (older than ``before_id``)
        there are, and the oldest id among them (None when none)."""
        params = asdict(filters) | {"before_id": before_id, "cap": cap}
        found = (await self._rows(conn, "job_window", params))[0]
        return int(found["n"]), found["floor_id"]

    async def execution_list_for_job(self, conn: AsyncConn, *, job_id: int) -> list[Row]:
        """Every attempt (execution row) of one job, oldest first."""
        return await self._rows(conn, "execution_list_for_job", {"job_id": job_id})
