"""Turning enqueue calls into validated rows, and joining the caller's transaction.

Everything here is pure except the two connection adapters, which only unwrap a caller's
psycopg, SQLAlchemy or Django object to the underlying psycopg connection; they never begin, commit
or roll back anything.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import psycopg

from tickwork.config import (
    DEFAULT_MAX_ATTEMPTS,
    DEFAULT_PRIORITY,
    DEFAULT_QUEUE,
    DEFAULT_TASK_TIMEOUT,
    MAX_MAX_ATTEMPTS,
    MAX_PRIORITY,
    MIN_PRIORITY,
    QUEUE_NAME,
)
from tickwork.db.driver_errors import DriverError
from tickwork.db.store.jobs import JobRow
from tickwork.errors import EnqueueError
from tickwork.limits import MAX_JSON_BYTES, MAX_JSON_DEPTH, json_refusal, too_deep

MAX_UNIQUE_KEY_LENGTH = 512
DEFAULT_CREATED_BY = "app"


@dataclass(slots=True)  # not frozen: one is built per job, and a frozen __init__ costs 4x more
class JobSpec:
    """One job to enqueue with :meth:`App.enqueue_many`; unset options take the task's."""

    task: str
    """Registered task name."""
    args: Mapping[str, Any] = field(default_factory=dict)
    """Keyword arguments for the task; must be JSON-serialisable."""
    queue: str | None = None
    """Queue to put the job on."""
    priority: int | None = None
    """Higher runs first, between -100 and 100."""
    max_attempts: int | None = None
    """Attempts before dead-lettering."""
    run_at: datetime | None = None
    """Earliest start (time-zone aware); now when unset."""
    timeout: float | None = None
    """Seconds one attempt may run."""
    unique_key: str | None = None
    """Dedupes against jobs with this key that may still run."""


def unregistered_row(
    spec: JobSpec,
    created_by: str = DEFAULT_CREATED_BY,
    defaults: Mapping[str, Any] | None = None,
) -> JobRow:
    """A job of a task this process does not define, for a worker that does: its arguments
    cannot be checked against the handler here (only that they are a mapping; they travel
    beside the row). The options it leaves unset take ``defaults`` (what a worker recorded
    its task gives its jobs: queue, priority, max_attempts, timeout), else those of a task
    registered without options (queue ``default``, ...)."""
    if not isinstance(spec.task, str) or not spec.task.strip():
        raise EnqueueError("task", spec.task, "must be a task name")
    check_args_mapping(spec.args)
    given = defaults or {}

    def pick(value: Any, name: str, default: Any) -> Any:
        return value if value is not None else given.get(name, default)

    return JobRow(
        queue=check_queue(pick(spec.queue, "queue", DEFAULT_QUEUE)),
        task=spec.task,
        priority=check_priority(pick(spec.priority, "priority", DEFAULT_PRIORITY)),
        max_attempts=check_max_attempts(
            pick(spec.max_attempts, "max_attempts", DEFAULT_MAX_ATTEMPTS)
        ),
        run_at=check_run_at(spec.run_at),
        timeout=check_timeout(pick(spec.timeout, "timeout", DEFAULT_TASK_TIMEOUT)),
        unique_key=check_unique_key(spec.unique_key),
        created_by=created_by,
    )


def encode_args(args: Mapping[str, Any]) -> str:
    """JSON text of the arguments, or an error naming the argument that cannot be encoded or
    is beyond the size and depth limits (:mod:`tickwork.limits`)."""
    check_args_mapping(args)
    try:
        text = json.dumps(dict(args), allow_nan=False, separators=(",", ":"))
    except RecursionError:
        raise EnqueueError("args", args, "is nested too deep to encode") from None
    except (TypeError, ValueError) as exc:
        for key, value in args.items():
            try:
                json.dumps(value, allow_nan=False)
            except (TypeError, ValueError) as inner:
                raise EnqueueError(
                    f"args.{key}", value, f"is not JSON-serialisable: {inner}"
                ) from None
        raise EnqueueError("args", args, f"is not JSON-serialisable: {exc}") from None
    refusal = json_refusal(text, args)
    if refusal is not None:
        raise EnqueueError("args", args, refusal)
    return text


def check_args_mapping(args: Any) -> Mapping[str, Any]:
    if type(args) is not dict and not isinstance(args, Mapping):  # a dict, without the ABC check
        raise EnqueueError("args", args, "must be a mapping of argument names to values")
    return args


def check_queue(queue: Any) -> str:
    if not isinstance(queue, str) or not QUEUE_NAME.match(queue):
        raise EnqueueError("queue", queue, "must be 1-128 characters of letters, digits, _.:-")
    return queue


def check_priority(priority: Any) -> int:
    if isinstance(priority, bool) or not isinstance(priority, int):
        raise EnqueueError("priority", priority, "must be an integer")
    if not MIN_PRIORITY <= priority <= MAX_PRIORITY:
        raise EnqueueError(
            "priority", priority, f"must be between {MIN_PRIORITY} and {MAX_PRIORITY}"
        )
    return priority


def check_max_attempts(max_attempts: Any) -> int:
    if isinstance(max_attempts, bool) or not isinstance(max_attempts, int):
        raise EnqueueError("max_attempts", max_attempts, "must be an integer")
    if not 1 <= max_attempts <= MAX_MAX_ATTEMPTS:
        raise EnqueueError(
            "max_attempts", max_attempts, f"must be between 1 and {MAX_MAX_ATTEMPTS}"
        )
    return max_attempts


def check_timeout(timeout: Any) -> float | None:
    if timeout is None:
        return None
    if isinstance(timeout, bool) or not isinstance(timeout, int | float):
        raise EnqueueError("timeout", timeout, "must be a number of seconds or None")
    if not math.isfinite(timeout) or timeout <= 0:
        raise EnqueueError("timeout", timeout, "must be a positive, finite number of seconds")
    return float(timeout)


def check_run_at(run_at: Any) -> datetime | None:
    if run_at is None:
        return None
    if not isinstance(run_at, datetime):
        raise EnqueueError("run_at", run_at, "must be a datetime")
    if run_at.tzinfo is None or run_at.utcoffset() is None:
        raise EnqueueError("run_at", run_at, "must be time-zone aware (a naive time is ambiguous)")
    try:  # stored in UTC, so it must exist in UTC too, or the job could never be read back
        run_at.astimezone(UTC)
    except OverflowError:
        raise EnqueueError("run_at", run_at.isoformat(), "is outside years 1-9999 in UTC") from None
    return run_at


def check_unique_key(unique_key: Any) -> str | None:
    if unique_key is None:
        return None
    if not isinstance(unique_key, str) or not unique_key:
        raise EnqueueError("unique_key", unique_key, "must be a non-empty string or None")
    if len(unique_key) > MAX_UNIQUE_KEY_LENGTH:
        raise EnqueueError(
            "unique_key", unique_key, f"must be at most {MAX_UNIQUE_KEY_LENGTH} characters"
        )
    return unique_key


@dataclass(frozen=True, slots=True)
class InsertPlan:
    """How a batch is enqueued: the rows sent, their arguments, and how results map back."""

    many: bool
    """Sent as a batch (the store's ``job_insert_many``); else one job (``job_insert``)."""
    args: str
    """The arguments as JSON text: one job's object, or a batch's array (one per sent row)."""
    sent: list[JobRow]
    """The rows sent, in order (a key repeated within the batch is sent once)."""
    sent_args: list[dict[str, Any]]
    """The arguments of each sent row as they will be stored (decoded from what was sent)."""
    position: list[int]
    """For each input row, the index of the row sent for it."""
    shared: JobRow | None = None
    """The one row every job of a batch shares, when they do and it has no unique key (the
    usual batch: every job sent as given, none can be a duplicate)."""


def insert_plan(rows: Sequence[JobRow], args: Sequence[Mapping[str, Any]]) -> InsertPlan:
    """One job alone (the cheapest form), or a batch otherwise; ``args[i]`` are the
    arguments of ``rows[i]``.

    Arguments are encoded once, as the text the statement takes; they are checked by that
    encoding (an argument that cannot be encoded is named by :func:`encode_args`), and the
    arguments the returned jobs carry are decoded from the same text, in one call.
    """
    if len(rows) == 1:
        args_json = encode_args(args[0])
        return InsertPlan(False, args_json, [rows[0]], [json.loads(args_json)], [0])
    first = rows[0]
    shared = first if rows.count(first) == len(rows) else None  # by identity: see JobRow
    if shared is not None and shared.unique_key is None:
        # the usual batch (one shared row, no key): every row is sent, in order
        sent: list[JobRow] = rows if isinstance(rows, list) else list(rows)
        sent_args: list[Mapping[str, Any]] = args if isinstance(args, list) else list(args)
        position = list(range(len(rows)))
    else:
        shared = None  # a key repeated within the batch is sent once
        sent = []
        sent_args = []
        position = []
        first_by_key: dict[str, int] = {}
        for row, job_args in zip(rows, args, strict=True):
            key = row.unique_key
            # A single statement cannot upsert the same key twice; a repeat would dedupe anyway.
            if key is not None:
                if key in first_by_key:
                    position.append(first_by_key[key])
                    continue
                first_by_key[key] = len(sent)
            position.append(len(sent))
            sent.append(row)
            sent_args.append(job_args)
    # The arguments as one C-encoded JSON array (the store sends every other column as one
    # typed array, or as one value when every job has the same).
    try:
        args_json = json.dumps(sent_args, allow_nan=False, separators=(",", ":"))
    except (TypeError, ValueError, RecursionError):
        for job_args in sent_args:
            encode_args(job_args)  # raises, naming the argument
        # each job's arguments encode on their own: some are mappings other than dicts
        sent_args = [dict(job_args) for job_args in sent_args]
        args_json = json.dumps(sent_args, allow_nan=False, separators=(",", ":"))
    # One job's arguments are at most the batch's text, and a job nested deeper than the
    # limit holds that many containers besides its own mapping: only a batch that could hold
    # a job over a limit has its jobs checked one by one (which raises, naming the argument).
    # The common batch of flat arguments is ruled out by counting brackets (C speed).
    containers = args_json.count("[") + args_json.count("{") - len(sent) - 1
    if len(args_json) > MAX_JSON_BYTES or (
        containers >= MAX_JSON_DEPTH and too_deep(sent_args, MAX_JSON_DEPTH + 1)
    ):
        for job_args in sent_args:
            encode_args(job_args)
    return InsertPlan(True, args_json, sent, json.loads(args_json), position, shared)


def sync_connection(conn: Any) -> psycopg.Connection[Any]:
    """The psycopg connection behind ``conn`` (psycopg, SQLAlchemy Session or Connection,
    Django's connection)."""
    if isinstance(conn, psycopg.Connection):
        return conn
    if type(conn).__module__.startswith("sqlalchemy"):
        if hasattr(conn, "get_bind") and hasattr(conn, "connection"):  # Session
            conn = conn.connection()
        driver = getattr(getattr(conn, "connection", None), "driver_connection", None)
        if isinstance(driver, psycopg.Connection):
            return driver
        raise EnqueueError(
            "conn",
            conn,
            "must use the psycopg driver (postgresql+psycopg://) to join its transaction",
        )
    if type(conn).__module__.startswith("django."):  # a DatabaseWrapper: django.db.connection
        conn.ensure_connection()
        if isinstance(conn.connection, psycopg.Connection):
            return conn.connection
        raise EnqueueError(
            "conn", conn, "must be a Django connection using psycopg 3 (pip install psycopg)"
        )
    raise EnqueueError(
        "conn",
        conn,
        "must be a psycopg Connection, a SQLAlchemy Session/Connection or a Django connection",
    )


@contextmanager
def callers_transaction(conn: Any) -> Iterator[psycopg.Connection[Any]]:
    """:func:`sync_connection`, for a statement run in the caller's transaction. On Django's
    connection it is a query as Django's own are: refused in an ``atomic()`` block already
    marked for rollback (``TransactionManagementError``), and when it fails inside
    ``atomic()`` the transaction is marked for rollback, as Django marks it when one of its
    own writes fails: Django's next query in the block is refused naming the cause, and the
    block rolls back instead of committing."""
    joined = sync_connection(conn)
    if not type(conn).__module__.startswith("django."):
        yield joined
        return
    from django.db import transaction

    conn.validate_no_broken_transaction()
    try:
        yield joined
    except DriverError:
        with transaction.mark_for_rollback_on_error(using=conn.alias):
            raise


async def async_connection(conn: Any) -> psycopg.AsyncConnection[Any]:
    """The psycopg async connection behind ``conn`` (psycopg, SQLAlchemy AsyncSession or
    AsyncConnection)."""
    if isinstance(conn, psycopg.AsyncConnection):
        return conn
    if type(conn).__module__.startswith("sqlalchemy"):
        if hasattr(conn, "get_bind") and hasattr(conn, "connection"):  # AsyncSession
            conn = await conn.connection()
        if hasattr(conn, "get_raw_connection"):
            raw = await conn.get_raw_connection()
            driver = getattr(raw, "driver_connection", None)
            if isinstance(driver, psycopg.AsyncConnection):
                return driver
        raise EnqueueError(
            "conn",
            conn,
            "must use the async psycopg driver (postgresql+psycopg://) to join its transaction",
        )
    raise EnqueueError(
        "conn",
        conn,
        "must be a psycopg AsyncConnection or a SQLAlchemy AsyncSession/AsyncConnection",
    )
