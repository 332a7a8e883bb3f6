"""Health of tickwork's tables for operators: sizes, dead tuples, HOT updates, and the oldest
open transaction holding back vacuum (the xmin horizon)."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime

from tickwork.db.store import AsyncConn, Store
from tickwork.queue.admin import WORKER_STALE_AFTER, UnservedTask

DEFAULT_XMIN_WARNING_SECONDS = 300.0
"""An open transaction older than this is reported as a warning."""
DEFAULT_DEAD_TUPLE_WARNING_RATIO = 0.5
"""A table whose dead tuples exceed this share of its live ones is reported as a warning."""
DEAD_TUPLE_WARNING_MINIMUM = 10_000
XMIN_HOLDERS_SHOWN = 5
"""Below this many dead tuples a table is never reported (small tables churn harmlessly)."""


@dataclass(frozen=True, slots=True)
class TableHealth:
    """One table's size and churn."""

    name: str
    live_tuples: int
    dead_tuples: int
    updates: int
    hot_updates: int
    table_bytes: int
    index_bytes: int
    last_vacuum: datetime | None

    @property
    def hot_ratio(self) -> float | None:
        """Share of updates that were HOT (no index writes), None before any update."""
        return self.hot_updates / self.updates if self.updates else None


@dataclass(frozen=True, slots=True)
class IndexHealth:
    """One index's size and use."""

    table: str
    name: str
    bytes: int
    scans: int


@dataclass(frozen=True, slots=True)
class XminHolder:
    """What holds the oldest snapshot, and for how long."""

    holder: str
    detail: str
    age_seconds: float | None
    xmin_age: int


@dataclass(frozen=True, slots=True)
class Health:
    """The health report; ``warnings`` is empty when all is well."""

    tables: list[TableHealth]
    indexes: list[IndexHealth]
    xmin_holders: list[XminHolder]
    """The oldest snapshot holders (up to ``XMIN_HOLDERS_SHOWN``), oldest first."""
    warnings: list[str] = field(default_factory=list)

    @property
    def oldest_xmin(self) -> XminHolder | None:
        """What holds the xmin horizon back the most."""
        return self.xmin_holders[0] if self.xmin_holders else None


async def check(
    conn: AsyncConn,
    store: Store,
    *,
    xmin_warning_seconds: float = DEFAULT_XMIN_WARNING_SECONDS,
    dead_tuple_warning_ratio: float = DEFAULT_DEAD_TUPLE_WARNING_RATIO,
) -> Health:
    """Read the report on ``conn``."""
    tables = [
        TableHealth(
            name=r["table_name"],
            live_tuples=r["live_tuples"],
            dead_tuples=r["dead_tuples"],
            updates=r["updates"],
            hot_updates=r["hot_updates"],
            table_bytes=r["table_bytes"],
            index_bytes=r["index_bytes"],
            last_vacuum=r["last_vacuum"],
        )
        for r in await store.health_tables(conn)
    ]
    indexes = [
        IndexHealth(r["table_name"], r["index_name"], r["bytes"], r["scans"])
        for r in await store.health_indexes(conn)
    ]
    holders = [
        XminHolder(r["holder"], r["detail"], r["age_seconds"], r["xmin_age"])
        for r in await store.health_xmin_horizon(conn, limit=XMIN_HOLDERS_SHOWN)
    ]
    warnings = []
    if not tables:
        warnings.append(
            f"schema {store.schema!r} holds no tables: tickwork is not set up in this"
            " database yet (run `tickwork migrate`), or the app is configured with another schema"
        )
    else:
        for u in await store.queue_unserved(conn, stale_after=WORKER_STALE_AFTER):
            unserved = UnservedTask(u["task"], u["jobs"], u["oldest_seconds"])
            warnings.append(unserved.describe(u["queue"]))
    if not await store.health_autovacuum(conn):
        warnings.append(
            "the server's autovacuum is off: dead rows are reclaimed only by tickwork's retention"
            " pass (retention.vacuum) or a manual VACUUM"
        )
    for holder in holders:
        if holder.age_seconds is None:  # a replication slot: no age, always worth a look
            warnings.append(f"{holder.holder} {holder.detail} holds back vacuum")
        elif holder.age_seconds > xmin_warning_seconds:
            warnings.append(
                f"{holder.holder} {holder.detail} has held back vacuum for "
                f"{holder.age_seconds:.0f}s (threshold {xmin_warning_seconds:.0f}s): dead rows "
                "of finished jobs cannot be removed until it ends"
            )
    for table in tables:
        if (
            table.dead_tuples >= DEAD_TUPLE_WARNING_MINIMUM
            and table.dead_tuples > dead_tuple_warning_ratio * max(table.live_tuples, 1)
        ):
            warnings.append(
                f"table {table.name} has {table.dead_tuples:,} dead tuples for "
                f"{table.live_tuples:,} live ones: vacuum is falling behind"
            )
    return Health(tables, indexes, holders, warnings)
