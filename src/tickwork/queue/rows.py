"""Rows of the job-path tables decoded into the core types."""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from typing import TYPE_CHECKING, Any

from tickwork.db.loaders import DECODE_DEPTH, Undecodable, loads, too_deep_to_decode
from tickwork.limits import LISTING_VALUE_BYTES, too_deep
from tickwork.types import (
    AuditEvent,
    ErrorInfo,
    Execution,
    ExecutionState,
    Job,
    JobState,
    Progress,
    from_row,
)

if TYPE_CHECKING:
    from tickwork.db.store.jobs import JobRow

Row = dict[str, Any]


UNDECODABLE_ERROR = "tickwork.Undecodable"
"""The type of the error of an attempt that ended because its job's row could not be decoded,
and of a stored error that could not be."""


def json_kind(value: Any) -> str:
    """The JSON name of ``value``'s type, with its article (``an array``)."""
    if isinstance(value, dict):
        return "an object"
    if isinstance(value, list):
        return "an array"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, bool):
        return "a boolean"
    return "null" if value is None else "a number"


def call_args(value: Any) -> dict[str, Any]:
    """A job's stored ``args`` as the keyword arguments of its handler; an
    :class:`Undecodable` (which is a dict) when they cannot be: undecoded, or not an object.
    JSON null stands for no arguments."""
    if value is None:
        return {}
    if isinstance(value, dict):
        return value
    return Undecodable(_not_an_object(value))


def _not_an_object(value: Any) -> str:
    return f"must be a JSON object, not {json_kind(value)}"


def error_info(value: Any) -> ErrorInfo | None:
    """The ``error`` JSON column as :class:`ErrorInfo` (one that cannot be read as one says
    why, as an error of type ``tickwork.Undecodable``)."""
    if not value:
        return None
    if isinstance(value, Undecodable) or not isinstance(value, dict):
        why = value.reason if isinstance(value, Undecodable) else _not_an_object(value)
        return ErrorInfo(UNDECODABLE_ERROR, f"the stored error could not be decoded: {why}", "")
    return ErrorInfo(
        type=str(value.get("type", "")),
        message=str(value.get("message", "")),
        traceback=str(value.get("traceback", "")),
    )


def progress(value: Any) -> Progress | None:
    """The ``progress`` JSON column as :class:`Progress` (None when never reported)."""
    if not isinstance(value, dict) or not isinstance(value.get("current"), int | float):
        return None
    total, message, at = value.get("total"), value.get("message"), value.get("at")
    output = value.get("output")
    return Progress(
        current=float(value["current"]),
        total=float(total) if isinstance(total, int | float) else None,
        message=message if isinstance(message, str) else None,
        attempt=int(value.get("attempt") or 0),
        at=datetime.fromisoformat(at) if isinstance(at, str) else None,
        output={k: str(v) for k, v in output.items()} if isinstance(output, dict) else None,
    )


def job(row: Row) -> Job:
    """A ``jobs`` row (plus ``error`` and ``duplicate``, and ``omitted`` in a listing) as a
    :class:`Job`. ``args`` or ``result`` that could not be decoded (or ``args`` that are not
    an object) are shown as ``{"undecodable": why}`` and named in ``omitted``."""
    args = call_args(row["args"])
    result = row["result"]
    omitted = tuple(row.get("omitted") or ())
    if isinstance(args, Undecodable):
        omitted = (*omitted, "args")
    if isinstance(result, Undecodable):
        omitted = (*omitted, "result")
    return Job(
        id=row["id"],
        queue=row["queue"],
        task=row["task"],
        args=args,
        state=JobState(row["state"]),
        priority=row["priority"],
        attempts=row["attempts"],
        max_attempts=row["max_attempts"],
        run_at=row["run_at"],
        timeout=seconds(row["timeout"]),
        created_at=row["created_at"],
        created_by=row["created_by"],
        unique_key=row["unique_key"],
        result=result,
        cancel_requested_at=row["cancel_requested_at"],
        finished_at=row["finished_at"],
        error=error_info(row.get("error")),
        schedule_id=row.get("schedule_id"),
        fire_time=row.get("fire_time"),
        duplicate=bool(row.get("duplicate", False)),
        omitted=omitted,
        progress=progress(row.get("progress")),
        trace_context=row.get("trace_context"),
    )


def summarised(found: Job) -> Job:
    """:func:`servable`, and arguments larger than a listing shows left out too (for the
    answer to an enqueue: the caller sent them)."""
    found = servable(found)
    if "args" in found.omitted or len(json.dumps(found.args)) <= LISTING_VALUE_BYTES:
        return found
    return replace(found, args={}, omitted=(*found.omitted, "args"))


def servable(found: Job) -> Job:
    """``found`` with any value nested too deep to be served (one stored before the limits
    of :mod:`tickwork.limits`) left out and named in ``omitted``, so a read never fails on
    it."""
    deep = [name for name in ("args", "result") if too_deep(getattr(found, name))]
    if not deep:
        return found
    return replace(
        found,
        args={} if "args" in deep else found.args,
        result=None if "result" in deep else found.result,
        omitted=(*found.omitted, *deep),
    )


@dataclass(frozen=True, slots=True)
class Undecoded:
    """A claimed job whose row could not be decoded: its attempt cannot start."""

    job_id: int
    """The job."""
    execution_id: int
    """The attempt the claim started."""
    message: str
    """Why (``args could not be decoded: ...``), for the attempt's error."""


def claimed(rows: list[tuple[Any, ...]]) -> tuple[list[tuple[Job, int, float]], list[Undecoded]]:
    """``job_claim``'s rows (read by position, see the statement) as (job, execution id,
    seconds the job waited after it was due), and the rows whose arguments could not be
    decoded, or are not an object (those jobs cannot run: the worker dead-letters them).
    The arguments of all jobs are decoded in one JSON parse; only when that fails, finds
    arguments that are not an object, or one nests deeper than the connections' loader
    decodes (:func:`~tickwork.db.loaders.loads`), is each row decoded alone, by its rules."""
    if not rows:
        return [], []
    joined = ",".join([row[3] for row in rows])
    try:
        all_args = json.loads("[" + joined + "]")
    except (RecursionError, ValueError):
        all_args = None
    if (
        all_args is None
        or not all([type(args) is dict for args in all_args])
        or (  # decoded here, but not by every reader: the rule is the same for all
            joined.count("[") + joined.count("{") > DECODE_DEPTH
            and any([too_deep_to_decode(row[3]) is not None for row in rows])
        )
    ):
        all_args = [call_args(loads(row[3])) for row in rows]
    undecoded = [
        Undecoded(row[0], row[17], f"args could not be decoded: {args.reason}")
        for row, args in zip(rows, all_args, strict=True)
        if isinstance(args, Undecodable)
    ]
    if not all([row[8] is None or math.isfinite(row[8]) for row in rows]):
        # NaN or infinity, stored by SQL: as on the job's page, no limit (a NaN deadline
        # would sit among the event loop's timers, which it cannot be ordered with)
        rows = [(*row[:8], seconds(row[8]), *row[9:]) for row in rows]
    if undecoded:
        kept = [i for i, args in enumerate(all_args) if not isinstance(args, Undecodable)]
        rows, all_args = [rows[i] for i in kept], [all_args[i] for i in kept]
    running = JobState.RUNNING
    found = [
        (
            Job(
                row[0],
                row[1],
                row[2],
                args,
                running,
                row[4],
                row[5],
                row[6],
                row[7],
                row[8],
                row[9],
                row[10],
                row[11],
                row[12],
                row[13],
                row[14],
                None,
                row[15],
                row[16],
            ),
            row[17],
            row[18],
        )
        for row, args in zip(rows, all_args, strict=True)
    ]
    for (job, _, _), row in zip(found, rows, strict=True):
        if row[19] is not None:  # traced enqueues only: most rows carry none
            job.trace_context = row[19]
    return found, undecoded


def seconds(value: float | None) -> float | None:
    """A stored ``timeout``, where infinity and NaN (stored by SQL: the column's check lets
    both pass) are no limit, as no JSON number can say either."""
    return value if value is None or math.isfinite(value) else None


def stored_job(document: dict[str, Any]) -> Job:
    """A job row sent back as JSON (``to_jsonb``, its JSON columns as text), as a
    :class:`Job`."""
    row = dict(document)
    for name in ("args", "result", "progress"):
        if isinstance(row.get(name), str):
            row[name] = loads(row[name])
    for name in ("run_at", "created_at", "cancel_requested_at", "finished_at", "fire_time"):
        if row.get(name) is not None:
            row[name] = datetime.fromisoformat(row[name])
    return job(row)


def duplicate_job(document: dict[str, Any]) -> Job:
    """The existing job that holds the ``unique_key`` an enqueue asked for."""
    return replace(stored_job(document), duplicate=True)


def inserted_job(sent: JobRow, job_id: int, args: dict[str, Any], created_at: datetime) -> Job:
    """The job an enqueue created, from what was sent and the id and time it was given."""
    made = Job(  # positional (id, queue, task, args, state, priority, attempts, max_attempts,
        # run_at, timeout, created_at, created_by, unique_key): one per enqueued job, so cheap
        job_id,
        sent.queue,
        sent.task,
        args,
        JobState.PENDING,
        sent.priority,
        0,
        sent.max_attempts,
        created_at if sent.run_at is None else sent.run_at,
        sent.timeout,
        created_at,
        sent.created_by,
        sent.unique_key,
    )
    made.trace_context = sent.trace_context
    return made


def inserted_jobs(
    sent: JobRow, job_ids: Sequence[int], args: Sequence[dict[str, Any]], created_at: datetime
) -> list[Job]:
    """:func:`inserted_job` of each id and arguments, for jobs that share one row ``sent``
    (the usual batch: its columns read once, not once per job)."""
    queue, task, priority, max_attempts = sent.queue, sent.task, sent.priority, sent.max_attempts
    run_at = created_at if sent.run_at is None else sent.run_at
    timeout, created_by, unique_key = sent.timeout, sent.created_by, sent.unique_key
    pending = JobState.PENDING
    made = [
        Job(
            job_id,
            queue,
            task,
            job_args,
            pending,
            priority,
            0,
            max_attempts,
            run_at,
            timeout,
            created_at,
            created_by,
            unique_key,
        )
        for job_id, job_args in zip(job_ids, args, strict=True)
    ]
    if sent.trace_context is not None:  # traced enqueues only: set after, not per job
        for job in made:
            job.trace_context = sent.trace_context
    return made


def execution(row: Row) -> Execution:
    """An ``executions`` row as an :class:`Execution`."""
    return from_row(
        Execution, row, state=ExecutionState(row["state"]), error=error_info(row["error"])
    )


def audit_event(row: Row) -> AuditEvent:
    """An ``audit_events`` row as an :class:`AuditEvent` (metadata that is not an object,
    or could not be decoded, as ``{"undecodable": why}``)."""
    metadata = row["metadata"]
    if isinstance(metadata, dict):
        return from_row(AuditEvent, row)
    return from_row(AuditEvent, row, metadata=Undecodable(_not_an_object(metadata)))
