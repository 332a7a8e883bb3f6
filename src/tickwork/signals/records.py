"""Signals, their delivery to reactors, and the contexts reactors run in."""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import psycopg

from tickwork.types import from_row


class SignalStatus(enum.StrEnum):
    """Where a signal is."""

    PENDING = "PENDING"
    """Waiting for its debounce deadline (``process_after``); emits may still squash into it."""
    PROCESSING = "PROCESSING"
    """Taken up by the processor; stays so while a reactor's retry is due (``next_retry_at``)."""
    COMPLETED = "COMPLETED"
    """Every routed reactor completed or is DEAD (or none was routed, or it was cancelled)."""
    DEAD = "DEAD"
    """A processor stopped while handling it more than ``max_retries`` times; an operator may
    retry it."""


class DeliveryStatus(enum.StrEnum):
    """Where one reactor is with one signal."""

    PENDING = "PENDING"
    """Being handled right now."""
    COMPLETED = "COMPLETED"
    """Handled (its writes committed with this record); never run again for this signal."""
    FAILED = "FAILED"
    """Raised; retried at ``next_retry_at``."""
    DEAD = "DEAD"
    """Raised more than ``max_retries`` times; not retried."""


@dataclass(frozen=True, slots=True)
class Signal:
    """A persistent record that something happened in the domain."""

    id: int
    """Primary key."""
    signal_type: str
    """What happened, e.g. ``RESULT_SET_CHANGED``."""
    entity_type: str | None
    """The kind of entity that changed, e.g. ``Order``."""
    entity_id: str | None
    """Its id."""
    aggregate_key: str | None
    """The squash key (with the type), e.g. ``series:8``; None for zero-window types."""
    payload: Any
    """Optional context from the latest emit (replaced on squash: read current state)."""
    organisation_id: str | None
    """The tenant it concerns (routing for organisation-scoped reactors); None if unknown."""
    status: SignalStatus
    """Where it is."""
    created_at: datetime
    """First emit."""
    process_after: datetime
    """Debounce deadline: not processed before."""
    updated_at: datetime | None
    """Last squash."""
    claimed_at: datetime | None
    """When a processor last took it up."""
    processed_at: datetime | None
    """When it completed (or died)."""
    error_message: str | None
    """Why it is not simply COMPLETED (dead reactors, a retry due, a recovery)."""
    retry_count: int
    """Times a processor was found to have stopped while handling it."""
    max_retries: int
    """Retries allowed (reactor failures and processor recoveries)."""
    next_retry_at: datetime | None
    """When the earliest failed reactor is due again."""

    @classmethod
    def from_row(cls, row: dict[str, Any]) -> Signal:
        """A ``signals`` row."""
        return from_row(cls, row, status=SignalStatus(row["status"]))


@dataclass(frozen=True, slots=True)
class Delivery:
    """One reactor's handling of one signal."""

    reactor_name: str
    status: DeliveryStatus
    dry_run: bool
    """Completed in dry-run mode (nothing it wrote was kept)."""
    processed_at: datetime | None
    error_message: str | None
    retry_count: int
    next_retry_at: datetime | None

    @classmethod
    def from_row(cls, row: dict[str, Any]) -> Delivery:
        """A ``signal_reactor_status`` row."""
        return from_row(cls, row, status=DeliveryStatus(row["status"]))


@dataclass(frozen=True, slots=True)
class ReactorContext:
    """What a reactor's handler or sweep is given.

    ``conn`` is in a transaction that commits together with the framework's record of the
    run (a signal handler's COMPLETED delivery), so "enqueue a job from a reactor" with
    ``app.enqueue_async(..., conn=ctx.conn)`` happens exactly once. Never commit or roll it
    back yourself.

    Dry-run contract: when ``dry_run`` is True the transaction is rolled back after the
    handler returns (nothing written through ``conn`` is kept) and the reactor must not
    cause side effects of its own - no email, no HTTP call that changes anything, no other
    connection's writes. It may read, compute and log what it would do. The run is recorded
    as a dry run.
    """

    conn: psycopg.AsyncConnection[Any]
    """The transaction to write in."""
    dry_run: bool
    """Cause no side effects (see above)."""
    organisations: frozenset[str]
    """The effective organisation set (meaningful for organisation-scoped reactors; a
    scoped sweep must apply it to its own selection)."""
    config: dict[str, Any] = field(default_factory=dict)
    """The reactor's own configuration keys."""
