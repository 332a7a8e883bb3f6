"""Operators' view of signals: strict listing, one signal with its deliveries, stats, stuck
signals, retry and cancel, and the reactors with their switches (for the admin API and CLI)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from psycopg_pool import AsyncConnectionPool

from tickwork.db.driver_errors import DuplicateKey
from tickwork.db.store import Store
from tickwork.errors import (
    InvalidInput,
    NoLeaseHolderError,
    NotFoundError,
    SignalSupersededError,
)
from tickwork.queue.admin import DEFAULT_PAGE, Page, check_limit, check_range, parse_choices
from tickwork.signals.control import PublishedControl, RuntimeControl, Switches, Tiered
from tickwork.signals.reactor import Reactors
from tickwork.signals.records import Delivery, Signal, SignalStatus

FAILED = "FAILED"
"""A status filter that is no signal status: a signal with a reactor that failed."""


def _split(values: list[str] | None) -> list[str]:
    """Status filters given repeated or comma-separated, as one list."""
    return [part.strip() for value in values or [] for part in value.split(",")]


@dataclass(frozen=True, slots=True)
class SignalFilter:
    """Which signals to list; every field optional."""

    statuses: list[SignalStatus] | None = None
    failed: bool = False
    """Also the signals with a reactor that failed: FAILED awaiting its retry, or DEAD (what
    ``status=FAILED`` asks for)."""
    signal_type: str | None = None
    aggregate_key: str | None = None
    organisation_id: str | None = None
    created_from: datetime | None = None
    created_to: datetime | None = None

    @classmethod
    def parse(
        cls,
        *,
        status: list[str] | None = None,
        signal_type: str | None = None,
        aggregate_key: str | None = None,
        organisation_id: str | None = None,
        created_from: datetime | None = None,
        created_to: datetime | None = None,
    ) -> SignalFilter:
        """A filter from raw values; an unknown status is refused, not ignored (a signal type
        is checked by :func:`check_signal_type`, which needs the database)."""
        asked = _split(status)
        failed = any(s.upper() == FAILED for s in asked)
        statuses = parse_choices(
            "status",
            [s for s in asked if s.upper() != FAILED] or None,
            SignalStatus,
            "a signal status or FAILED",
        )
        if failed and statuses is None:
            statuses = []
        check_range("created", created_from, created_to)
        return cls(
            statuses,
            failed,
            signal_type,
            aggregate_key,
            organisation_id,
            created_from,
            created_to,
        )


@dataclass(frozen=True, slots=True)
class SignalDetail:
    """A signal with its per-reactor delivery."""

    signal: Signal
    deliveries: list[Delivery]


@dataclass(frozen=True, slots=True)
class StatsRow:
    status: SignalStatus
    signal_type: str
    count: int
    oldest_created_at: datetime | None
    """Of the oldest live (PENDING, PROCESSING) signal; None for the settled statuses, which
    are counted from the rollups."""


@dataclass(frozen=True, slots=True)
class ReactorView:
    """A registered reactor with its switches and last sweep."""

    name: str
    handles: list[str]
    sweep_cron: str | None
    organisation_scoped: bool
    enabled: Tiered[bool]
    dry_run: Tiered[bool]
    organisations: Tiered[frozenset[str]]
    last_sweep: dict[str, Any] | None


async def check_signal_type(
    pool: AsyncConnectionPool[Any], store: Store, reactors: Reactors, signal_type: str
) -> None:
    """Refuse a signal type no reactor handles and no stored signal carries (a typo would
    otherwise list nothing, silently)."""
    if any(signal_type in r.handles for r in reactors):
        return
    async with pool.connection() as conn:
        exists = await store.signal_type_exists(conn, signal_type=signal_type)
    if not exists:
        raise InvalidInput(
            "signal_type",
            signal_type,
            "is not a signal type any reactor handles or any stored signal has",
        )


async def list_signals(
    pool: AsyncConnectionPool[Any],
    store: Store,
    where: SignalFilter,
    *,
    limit: int = DEFAULT_PAGE,
    before_id: int | None = None,
) -> Page:
    """Signals, newest first."""
    async with pool.connection() as conn:
        found = await store.signal_list(
            conn,
            statuses=None if where.statuses is None else [s.value for s in where.statuses],
            failed=where.failed,
            signal_type=where.signal_type,
            aggregate_key=where.aggregate_key,
            organisation_id=where.organisation_id,
            created_from=where.created_from,
            created_to=where.created_to,
            limit=check_limit(limit),
            before_id=before_id,
        )
    signals = [Signal.from_row(r) for r in found]
    return Page(signals, signals[-1].id if len(signals) == limit else None)


async def get_signal(pool: AsyncConnectionPool[Any], store: Store, signal_id: int) -> SignalDetail:
    """One signal and its per-reactor delivery."""
    async with pool.connection() as conn:
        found = await store.signal_get(conn, signal_id=signal_id)
    if found is None:
        raise NotFoundError("signal", signal_id)
    async with pool.connection() as conn:
        deliveries = await store.signal_deliveries(conn, signal_id=signal_id)
    return SignalDetail(Signal.from_row(found), [Delivery.from_row(r) for r in deliveries])


async def stats(pool: AsyncConnectionPool[Any], store: Store) -> list[StatsRow]:
    """Counts by status and type."""
    async with pool.connection() as conn:
        found = await store.signal_stats(conn)
    return [
        StatsRow(SignalStatus(r["status"]), r["signal_type"], r["n"], r["oldest_created_at"])
        for r in found
    ]


async def stuck(
    pool: AsyncConnectionPool[Any], store: Store, older_than: float, limit: int
) -> list[Signal]:
    """Signals PROCESSING longer than ``older_than`` seconds with no retry scheduled."""
    if older_than <= 0:
        raise InvalidInput("older_than", older_than, "must be a positive number of seconds")
    limit = check_limit(limit)
    async with pool.connection() as conn:
        found = await store.signal_stuck(conn, older_than=older_than, limit=limit)
    return [Signal.from_row(r) for r in found]


async def retry(pool: AsyncConnectionPool[Any], store: Store, signal_id: int, actor: str) -> Signal:
    """A DEAD signal back to PENDING (its completed reactors are not run again)."""
    try:
        async with pool.connection() as conn:
            row = await store.signal_retry(conn, signal_id=signal_id, actor=actor)
    except DuplicateKey:
        # A fresher PENDING signal of the same key appeared during the statement.
        async with pool.connection() as conn:
            row = await store.signal_retry(conn, signal_id=signal_id, actor=actor)
    if row is None:
        raise NotFoundError("signal", signal_id)
    if row["superseded_by"] is not None and row["previous_status"] == "DEAD":
        raise SignalSupersededError(signal_id, row["superseded_by"])
    if not row["reset"]:
        raise InvalidInput(
            "signal", signal_id, f"is {row['previous_status']}; only a DEAD signal is retried"
        )
    return (await get_signal(pool, store, signal_id)).signal


async def retry_delivery(
    pool: AsyncConnectionPool[Any],
    store: Store,
    signal_id: int,
    reactor: str,
    actor: str,
    *,
    held: HeldControl,
) -> Signal:
    """One reactor's DEAD delivery of a signal run again: the delivery starts afresh and the
    signal is due now (its other reactors are not run again if they completed). Refused
    (:class:`InvalidInput`) unless the SIGNAL_MASTER holder (``held``) runs the reactor and
    has it enabled: the replay would remove the DEAD record and never run."""
    detail = await get_signal(pool, store, signal_id)  # 404 for an unknown signal
    if all(d.reactor_name != reactor for d in detail.deliveries):
        raise NotFoundError("delivery", f"{signal_id}/{reactor}")
    if all(r["name"] != reactor for r in held.reactors):
        raise InvalidInput(
            "reactor",
            reactor,
            "is not a reactor the SIGNAL_MASTER holder runs: a replayed delivery would never"
            " run (deploy the reactor, then replay)",
        )
    if not held.switches.reactor(reactor).enabled.effective:
        raise InvalidInput(
            "reactor",
            reactor,
            "is disabled on the SIGNAL_MASTER holder: a replayed delivery would be passed over"
            " (enable the reactor, then replay)",
        )
    async with pool.connection() as conn:
        row = await store.signal_delivery_retry(
            conn, signal_id=signal_id, reactor=reactor, actor=actor
        )
    if row is None:  # replayed by someone else meanwhile: it is no longer there
        raise NotFoundError("delivery", f"{signal_id}/{reactor}")
    if not row["reset"]:
        raise InvalidInput(
            "reactor",
            reactor,
            f"has a {row['previous_status']} delivery of signal {signal_id}; only a DEAD one is"
            " retried (a FAILED one is retried by the processor at its next_retry_at)",
        )
    return (await get_signal(pool, store, signal_id)).signal


async def cancel(
    pool: AsyncConnectionPool[Any], store: Store, signal_id: int, actor: str
) -> Signal:
    """A PENDING signal COMPLETED without processing."""
    async with pool.connection() as conn:
        row = await store.signal_cancel(conn, signal_id=signal_id, actor=actor)
    if row is None:
        raise NotFoundError("signal", signal_id)
    if not row["cancelled"]:
        raise InvalidInput(
            "signal",
            signal_id,
            f"is {row['previous_status']}; only a PENDING signal is cancelled",
        )
    return (await get_signal(pool, store, signal_id)).signal


@dataclass(frozen=True, slots=True)
class HeldControl:
    """The switches of the process holding one signal lease, as every process shows them:
    its configuration, the overrides stored for it and the reactors it runs. When nobody
    holds the lease: this process's configuration, no override (none would apply)."""

    holder: str | None
    switches: Switches
    reactors: list[dict[str, Any]]


async def held_control(
    pool: AsyncConnectionPool[Any],
    store: Store,
    lease: str,
    local: RuntimeControl,
    reactors: Reactors,
    *,
    here: str | None = None,
) -> HeldControl:
    """:class:`HeldControl` of ``lease``. ``here``: this process's holder id, when it runs
    the signal services."""
    mine = local.published(reactors.describe(local.settings))
    async with pool.connection() as conn:
        found = await store.signal_control_of_lease(conn, lease=lease)
    if found is None:
        return HeldControl(None, PublishedControl("", mine, {}), mine["reactors"])
    holder: str = found["holder"]
    # the overrides as stored (what the holder applies on its next pass, or has applied);
    # the configuration as the holder published it (this process's own, when it is the
    # holder or the holder has not published yet)
    published = mine if holder == here or found["config"] is None else found["config"]
    return HeldControl(
        holder, PublishedControl(holder, published, found["overrides"]), published["reactors"]
    )


async def set_switch(
    pool: AsyncConnectionPool[Any],
    store: Store,
    switch: str,
    value: Any,
    leases: list[str],
) -> list[str]:
    """Set (or with ``value`` None drop) a switch's override for the processes holding
    ``leases`` now; their holder ids. Raises :class:`NoLeaseHolderError` when nobody holds
    them: nothing would apply it."""
    async with pool.connection() as conn:
        holders = await store.signal_override_set(
            conn, switch=switch, value=None if value is None else json.dumps(value), leases=leases
        )
    if not holders:
        raise NoLeaseHolderError(leases)
    return holders


async def reactors_view(
    pool: AsyncConnectionPool[Any], store: Store, held: HeldControl
) -> list[ReactorView]:
    """Every reactor of the SIGNAL_MASTER holder (``held``): handled types, sweep cron, last
    sweep, and the config, runtime and effective values of enabled, dry-run and the
    organisation set."""
    async with pool.connection() as conn:
        last = {r["reactor_name"]: r for r in await store.sweep_run_latest(conn)}
    views = []
    for reactor in held.reactors:
        name = reactor["name"]
        switches = held.switches.reactor(name)
        run = last.get(name)
        views.append(
            ReactorView(
                name=name,
                handles=list(reactor["handles"]),
                sweep_cron=reactor["sweep_cron"],
                organisation_scoped=reactor["organisation_scoped"],
                enabled=switches.enabled,
                dry_run=switches.dry_run,
                organisations=switches.organisations,
                last_sweep=None
                if run is None
                else {
                    "started_at": run["started_at"],
                    "finished_at": run["finished_at"],
                    "outcome": run["outcome"],
                    "trigger": run["trigger"],
                    "dry_run": run["dry_run"],
                    "holder": run["holder"],
                    "error": run["error"],
                },
            )
        )
    return views
