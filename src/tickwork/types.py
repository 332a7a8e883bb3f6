"""Core value types: jobs, executions and their states. Imports nothing internal."""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, TypeVar
from uuid import UUID

RecordT = TypeVar("RecordT")


def from_row(cls: type[RecordT], row: Mapping[str, Any], **converted: Any) -> RecordT:
    """A record (a dataclass) read from a row: each field from the column of its name, or from
    ``converted`` where the column's value needs converting (an enum from its name, say).
    Fields the row does not have keep their defaults; columns no field names are ignored."""
    names: Mapping[str, Any] = getattr(cls, "__dataclass_fields__")  # noqa: B009 (typed)
    given = {name: row[name] for name in names if name in row}
    return cls(**(given | converted))


class JobState(enum.StrEnum):
    """Where a job is in its lifecycle."""

    PENDING = "PENDING"
    """Waiting to be claimed once ``run_at`` has passed."""
    RUNNING = "RUNNING"
    """Claimed by a worker; exactly one execution is live."""
    SUCCEEDED = "SUCCEEDED"
    """The last attempt returned normally. Terminal."""
    FAILED = "FAILED"
    """The last attempt failed and a retry is due at ``run_at`` (backoff)."""
    CANCELLED = "CANCELLED"
    """Cancelled while pending, or when a cancel-requested attempt completed. Terminal."""
    DEAD_LETTER = "DEAD_LETTER"
    """Attempts exhausted; waits for an operator's manual retry."""

    @property
    def is_final(self) -> bool:
        """True when no worker will touch the job again without an operator."""
        return self in (JobState.SUCCEEDED, JobState.CANCELLED, JobState.DEAD_LETTER)


class ExecutionState(enum.StrEnum):
    """The outcome of one attempt."""

    RUNNING = "RUNNING"
    """The attempt holds a lease and is in progress."""
    SUCCEEDED = "SUCCEEDED"
    """The handler returned."""
    FAILED = "FAILED"
    """The handler raised or exceeded its timeout."""
    CANCELLED = "CANCELLED"
    """The handler was interrupted because the job's cancel was requested."""
    TIMED_OUT = "TIMED_OUT"
    """The lease expired (worker died or stalled); the watchdog reclaimed the job."""
    RELEASED = "RELEASED"
    """The worker shut down before the attempt finished and handed the job back."""


@dataclass(frozen=True, slots=True)
class ErrorInfo:
    """What went wrong in an attempt."""

    type: str
    """Qualified exception type name."""
    message: str
    """``str()`` of the exception."""
    traceback: str = ""
    """Formatted traceback, empty when there is none (for example a lease expiry)."""


@dataclass(frozen=True, slots=True)
class Progress:
    """What a running handler last reported of its progress (``ctx.progress``)."""

    current: float
    """Work done so far, in the handler's own unit (items, bytes, percent...)."""
    total: float | None = None
    """Work in all, when the handler knows it."""
    message: str | None = None
    """A short note (``"resizing 3 of 10"``)."""
    attempt: int = 0
    """The attempt that reported it."""
    at: datetime | None = None
    """When it was stored (database clock)."""
    output: dict[str, str] | None = None
    """A running script's output so far: the last 4 kB of ``stdout`` and ``stderr``."""

    @property
    def fraction(self) -> float | None:
        """``current / total`` (at most 1), or None without a total."""
        if not self.total:
            return None
        return min(self.current / self.total, 1.0)


@dataclass(slots=True)  # not frozen: a frozen __init__ costs 5x more, per job, on hot paths
class Job:
    """A queued unit of work, as stored in the ``jobs`` table: a snapshot taken when it was
    read or enqueued. Changing its fields changes nothing stored (use ``app.cancel``,
    ``app.retry`` and friends)."""

    id: int
    """Primary key."""
    queue: str
    """Queue the job is claimed from."""
    task: str
    """Registered task name."""
    args: dict[str, Any]
    """Keyword arguments passed to the task."""
    state: JobState
    """Lifecycle state."""
    priority: int
    """Higher runs first among runnable jobs of a queue."""
    attempts: int
    """Attempts started so far."""
    max_attempts: int
    """Attempts allowed before the job is dead-lettered."""
    run_at: datetime
    """Not claimed before this instant (database clock)."""
    timeout: float | None
    """Seconds one attempt may run; ``None`` means no limit."""
    created_at: datetime
    """When the job was enqueued."""
    created_by: str
    """Who or what enqueued the job."""
    unique_key: str | None = None
    """Deduplication key while the job is pending, failed-awaiting-retry or running."""
    result: Any = None
    """JSON return value of the succeeding attempt."""
    cancel_requested_at: datetime | None = None
    """When a cancel was requested for the running attempt."""
    finished_at: datetime | None = None
    """When the job reached SUCCEEDED, CANCELLED or DEAD_LETTER."""
    error: ErrorInfo | None = None
    """Error of the most recent failed attempt, if any."""
    schedule_id: int | None = None
    """The schedule this job was materialised from, if any."""
    fire_time: datetime | None = None
    """The schedule's fire time this job stands for."""
    duplicate: bool = False
    """True when an enqueue returned this existing job because of ``unique_key``."""
    omitted: tuple[str, ...] = ()
    """Fields this snapshot leaves out (``args`` empty, ``result`` None): too large for a
    listing, or nested too deep to be served; reading the job itself returns what it can.
    A stored value that cannot be decoded at all is ``{"undecodable": why}`` and named here."""
    progress: Progress | None = None
    """What its handler last reported with ``ctx.progress`` (kept once the job finishes)."""
    trace_context: str | None = None
    """The W3C trace context (``traceparent``) of the span that enqueued it, when the
    enqueuer traced with OpenTelemetry; its runs link to that span."""


@dataclass(frozen=True, slots=True)
class Execution:
    """One attempt of a job; carries the lease."""

    id: int
    """Primary key."""
    job_id: int
    """The job this attempt belongs to."""
    attempt: int
    """1-based attempt number."""
    worker_id: UUID
    """The worker process that claimed it."""
    state: ExecutionState
    """Outcome so far."""
    started_at: datetime
    """Claim time (database clock)."""
    lease_expires_at: datetime
    """The watchdog reclaims the job after this instant unless the lease is renewed."""
    finished_at: datetime | None = None
    """When the attempt's outcome was recorded."""
    error: ErrorInfo | None = None
    """Why the attempt did not succeed."""


@dataclass(frozen=True, slots=True)
class AuditEvent:
    """One appended record of who changed what."""

    id: int
    """Primary key."""
    occurred_at: datetime
    """Database time of the change."""
    actor: str
    """Who or what caused it (``user:...``, ``worker:<uuid>``, ``watchdog:<uuid>``, ``app``)."""
    event_type: str
    """Dotted event name, e.g. ``job.cancelled``."""
    target_type: str
    """Kind of object changed, e.g. ``job``."""
    target_id: str
    """Its identifier."""
    metadata: dict[str, Any] = field(default_factory=dict)
    """Event-specific details."""


@dataclass(frozen=True, slots=True)
class Leader:
    """Who holds a lease, per the database."""

    name: str
    """The role."""
    holder: str
    """Holder id of the process that holds (or last held) it."""
    acquired_at: datetime
    """When this holder took it."""
    renewed_at: datetime
    """Its last renewal."""
    expires_at: datetime
    """Until when it is held unless renewed."""
    live: bool
    """False once ``expires_at`` has passed: anyone may take it over."""
