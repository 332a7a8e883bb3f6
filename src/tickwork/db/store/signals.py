"""Statements of ``sql/signals.sql``: signals, their per-reactor delivery and sweep runs.

Rows stay rows here: :class:`tickwork.signals.records.Signal` sits in a package whose
``__init__`` imports the publisher (and so ``db``), which a module of ``db`` cannot import back
while ``db`` is loading.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass
from datetime import datetime
from typing import Any

from tickwork.db.store.runner import AsyncConn, Conn, Row, Runner


@dataclass(frozen=True, slots=True)
class NewSignal:
    """A signal as ``signal_emit`` takes it (checked by the publisher)."""

    signal_type: str
    entity_type: str | None
    entity_id: str | None
    aggregate_key: str | None
    """None for a type whose window is zero: nothing can squash it."""
    organisation_id: str | None
    payload: str | None
    """JSON text."""
    window: float
    """Seconds the signal waits for more of its kind before it is processed."""
    max_retries: int


class SignalStatements(Runner):
    """One method per statement of ``sql/signals.sql``."""

    async def signal_emit(self, conn: AsyncConn, *, signal: NewSignal) -> Row:
        """Squash into the PENDING signal of the same type and key (its deadline slides to
        now + ``window`` seconds, the payload replaces its own) or insert a new one; its row
        ``id, squashed, process_after``."""
        return (await self._rows(conn, "signal_emit", asdict(signal)))[0]

    def signal_emit_sync(self, conn: Conn, *, signal: NewSignal) -> Row:
        """:meth:`signal_emit` on a sync connection."""
        return self._rows_sync(conn, "signal_emit", asdict(signal))[0]

    async def signal_claim(self, conn: AsyncConn, *, limit: int, stuck_after: float) -> list[Row]:
        """Take up to ``limit`` signals for processing: matured PENDING ones, PROCESSING ones
        whose reactor retry is due, and those a processor left (claimed more than
        ``stuck_after`` seconds ago; DEAD past their retries); their ``signals`` rows, each
        with ``recovered``."""
        return await self._rows(conn, "signal_claim", {"limit": limit, "stuck_after": stuck_after})

    async def signal_reactor_begin(self, conn: AsyncConn, *, signal_id: int, reactor: str) -> Row:
        """Start (and lock) one reactor's delivery of one signal; its row ``status,
        retry_count, retry_not_due``."""
        return (
            await self._rows(
                conn, "signal_reactor_begin", {"signal_id": signal_id, "reactor": reactor}
            )
        )[0]

    async def signal_reactor_complete(
        self, conn: AsyncConn, *, signal_id: int, reactor: str, dry_run: bool
    ) -> None:
        """Record that the reactor handled the signal (in dry-run mode or not)."""
        await self._rows(
            conn,
            "signal_reactor_complete",
            {"signal_id": signal_id, "reactor": reactor, "dry_run": dry_run},
        )

    async def signal_reactor_fail(
        self,
        conn: AsyncConn,
        *,
        signal_id: int,
        reactor: str,
        error: str,
        max_retries: int,
        backoff: float,
        backoff_cap: float,
    ) -> Row:
        """Record that the reactor raised ``error``: FAILED with a retry due after an
        exponential backoff (seconds, capped) while retries remain, then DEAD; its row
        ``status, retry_count, next_retry_at``."""
        return (
            await self._rows(
                conn,
                "signal_reactor_fail",
                {
                    "signal_id": signal_id,
                    "reactor": reactor,
                    "error": error,
                    "max_retries": max_retries,
                    "backoff": backoff,
                    "backoff_cap": backoff_cap,
                },
            )
        )[0]

    async def signal_lock(self, conn: AsyncConn, *, signal_id: int) -> None:
        """Lock the signal's row until the transaction ends (before :meth:`signal_settle`)."""
        await self._rows(conn, "signal_lock", {"signal_id": signal_id})

    async def signal_settle(
        self, conn: AsyncConn, *, signal_id: int, reactors: Sequence[str]
    ) -> Row | None:
        """Derive a PROCESSING signal's status from the deliveries of the ``reactors`` it was
        routed to; its row ``status, next_retry_at, dead_reactors``, or None when it was not
        PROCESSING."""
        found = await self._rows(
            conn, "signal_settle", {"signal_id": signal_id, "reactors": list(reactors)}
        )
        return found[0] if found else None

    async def signal_list(
        self,
        conn: AsyncConn,
        *,
        statuses: Sequence[str] | None,
        failed: bool,
        signal_type: str | None,
        aggregate_key: str | None,
        organisation_id: str | None,
        created_from: datetime | None,
        created_to: datetime | None,
        limit: int,
        before_id: int | None,
    ) -> list[Row]:
        """Up to ``limit`` signals matching every filter given (None: not filtering), older
        than ``before_id`` when given; their ``signals`` rows, newest first. ``failed``: the
        signals with a FAILED or DEAD delivery count as matching the statuses too."""
        return await self._rows(
            conn,
            "signal_list",
            {
                "statuses": None if statuses is None else list(statuses),
                "failed": failed,
                "signal_type": signal_type,
                "aggregate_key": aggregate_key,
                "organisation_id": organisation_id,
                "created_from": created_from,
                "created_to": created_to,
                "limit": limit,
                "before_id": before_id,
            },
        )

    async def signal_get(self, conn: AsyncConn, *, signal_id: int) -> Row | None:
        """One signal's ``signals`` row, or None."""
        found = await self._rows(conn, "signal_get", {"signal_id": signal_id})
        return found[0] if found else None

    async def signal_deliveries(self, conn: AsyncConn, *, signal_id: int) -> list[Row]:
        """A signal's ``signal_reactor_status`` rows, by reactor name."""
        return await self._rows(conn, "signal_deliveries", {"signal_id": signal_id})

    async def signal_type_exists(self, conn: AsyncConn, *, signal_type: str) -> bool:
        """Whether any stored signal has this type."""
        exists: bool = (await self._rows(conn, "signal_type_exists", {"signal_type": signal_type}))[
            0
        ]["exists"]
        return exists

    async def signal_stats(self, conn: AsyncConn) -> list[Row]:
        """Rows ``status, signal_type, n, oldest_created_at``, by status and type."""
        return await self._rows(conn, "signal_stats", {})

    async def signal_stuck(self, conn: AsyncConn, *, older_than: float, limit: int) -> list[Row]:
        """Up to ``limit`` signals PROCESSING longer than ``older_than`` seconds with no retry
        scheduled; their ``signals`` rows, longest claimed first."""
        return await self._rows(conn, "signal_stuck", {"older_than": older_than, "limit": limit})

    async def signal_retry(self, conn: AsyncConn, *, signal_id: int, actor: str) -> Row | None:
        """Send a DEAD signal back to PENDING, audited, unless a fresher PENDING signal holds
        its type and key; its row ``previous_status, superseded_by, reset``, or None when no
        such signal exists."""
        found = await self._rows(conn, "signal_retry", {"signal_id": signal_id, "actor": actor})
        return found[0] if found else None

    async def signal_delivery_retry(
        self, conn: AsyncConn, *, signal_id: int, reactor: str, actor: str
    ) -> Row | None:
        """Run one reactor's DEAD delivery of a signal again (the signal due now), audited;
        the row ``previous_status, reset``, or None when the signal has no such delivery."""
        found = await self._rows(
            conn,
            "signal_delivery_retry",
            {"signal_id": signal_id, "reactor": reactor, "actor": actor},
        )
        return found[0] if found else None

    async def signal_cancel(self, conn: AsyncConn, *, signal_id: int, actor: str) -> Row | None:
        """Complete a PENDING signal without processing, audited; its row ``previous_status,
        cancelled``, or None when no such signal exists."""
        found = await self._rows(conn, "signal_cancel", {"signal_id": signal_id, "actor": actor})
        return found[0] if found else None

    async def signal_purge(self, conn: AsyncConn, *, older_than: float, limit: int) -> int:
        """Delete up to ``limit`` COMPLETED and DEAD signals settled more than ``older_than``
        seconds ago; how many it deleted."""
        return len(
            await self._rows(conn, "signal_purge", {"older_than": older_than, "limit": limit})
        )

    async def sweep_run_start(
        self, conn: AsyncConn, *, reactor: str, holder: str, trigger: str, dry_run: bool
    ) -> Row:
        """Record that a reactor's sweep started; its row ``id, started_at``."""
        return (
            await self._rows(
                conn,
                "sweep_run_start",
                {"reactor": reactor, "holder": holder, "trigger": trigger, "dry_run": dry_run},
            )
        )[0]

    async def sweep_run_finish(
        self, conn: AsyncConn, *, run_id: int, outcome: str, error: str | None
    ) -> None:
        """Record how a sweep run ended (``outcome``, and its error when it failed)."""
        await self._rows(
            conn, "sweep_run_finish", {"run_id": run_id, "outcome": outcome, "error": error}
        )

    async def sweep_run_latest(self, conn: AsyncConn) -> list[Row]:
        """The ``sweep_runs`` row of each reactor's last sweep."""
        return await self._rows(conn, "sweep_run_latest", {})

    async def signal_override_set(
        self, conn: AsyncConn, *, switch: str, value: str | None, leases: Sequence[str]
    ) -> list[str]:
        """Set (``value``: JSON text) or drop (None) an override for every live holder of one
        of ``leases``; their holder ids (empty: none holds them, nothing was stored)."""
        found = await self._rows(
            conn,
            "signal_override_set",
            {"switch": switch, "value": value, "leases": list(leases)},
        )
        return list(found[0]["holders"])

    async def signal_overrides_of(self, conn: AsyncConn, *, holder: str) -> dict[str, Any]:
        """The overrides set for ``holder``: switch -> value."""
        found = await self._rows(conn, "signal_overrides_of", {"holder": holder})
        return {r["switch"]: r["value"] for r in found}

    async def signal_config_publish(self, conn: AsyncConn, *, holder: str, config: str) -> None:
        """Publish a holder's configuration (JSON text) for the other processes."""
        await self._rows(conn, "signal_config_publish", {"holder": holder, "config": config})

    async def signal_control_of_lease(self, conn: AsyncConn, *, lease: str) -> Row | None:
        """The live holder of ``lease`` with its published ``config`` (None if not yet
        published) and its ``overrides``; None when nobody holds it."""
        found = await self._rows(conn, "signal_control_of_lease", {"lease": lease})
        return found[0] if found else None
