"""Leader leases on the database clock: one holder at a time, conservative local belief."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from typing import Any

import psycopg
import pytest
from psycopg_pool import AsyncConnectionPool

from tickwork import App, ConfigError, load_settings
from tickwork.config import LeaseSettings
from tickwork.services.leases import LeaseManager, Role, new_holder_id

ROLES = [Role.SCHEDULER, Role.RETENTION]
SHORT = LeaseSettings(heartbeat=0.2, ttl=1.0)


@pytest.fixture
async def pool(app: App) -> AsyncIterator[AsyncConnectionPool[Any]]:
    async with AsyncConnectionPool(app.db.url, kwargs={"autocommit": True}) as p:
        yield p


def manager(app: App, pool: AsyncConnectionPool[Any], **kw: Any) -> LeaseManager:
    return LeaseManager(pool, app.db.store, kw.pop("settings", SHORT), ROLES, **kw)


def wait_until_expired(sql: psycopg.Connection[Any], name: str) -> None:
    """Poll the database clock until the lease row has expired (a condition, not a sleep)."""
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        row = sql.execute("SELECT now() > expires_at FROM leases WHERE name = %s", [name])
        if row.fetchone() == (True,):
            return
        time.sleep(0.02)
    raise AssertionError(f"lease {name} never expired")


async def test_first_holder_wins_the_other_waits(
    app: App, pool: AsyncConnectionPool[Any], sql: psycopg.Connection[Any]
) -> None:
    a, b = manager(app, pool), manager(app, pool)
    won = await a.run_once()
    assert won.held == won.gained == {"SCHEDULER", "RETENTION"}
    assert (await b.run_once()).held == frozenset()
    assert a.holds(Role.SCHEDULER) and not b.holds(Role.SCHEDULER)
    renewed = await a.run_once()
    assert renewed.held == {"SCHEDULER", "RETENTION"} and renewed.gained == frozenset()
    leaders = {leader.name: leader for leader in app.leaders()}
    assert leaders["SCHEDULER"].holder == a.holder_id and leaders["SCHEDULER"].live


async def test_lapsed_lease_is_taken_over_and_the_old_holder_knows_before_renewing(
    app: App, pool: AsyncConnectionPool[Any], sql: psycopg.Connection[Any]
) -> None:
    a, b = manager(app, pool), manager(app, pool)
    await a.run_once()
    # a stops heart-beating (paused, partitioned); its own deadline is conservative:
    wait_until_expired(sql, "SCHEDULER")
    assert not a.holds(Role.SCHEDULER)  # before any renewal attempt
    taken = await b.run_once()
    assert taken.gained == {"SCHEDULER", "RETENTION"}
    back = await a.run_once()  # a wakes up: it does not get the lease back
    assert back.held == frozenset() and back.lost == frozenset()
    leaders = {leader.name: leader for leader in app.leaders()}
    assert leaders["SCHEDULER"].holder == b.holder_id


async def test_local_deadline_never_outlives_the_database_expiry(
    app: App, pool: AsyncConnectionPool[Any], sql: psycopg.Connection[Any]
) -> None:
    a = manager(app, pool)
    await a.run_once()
    remaining_local = a._deadlines["SCHEDULER"] - time.monotonic()
    row = sql.execute(
        "SELECT extract(epoch FROM expires_at - now()) FROM leases WHERE name = 'SCHEDULER'"
    ).fetchone()
    assert row is not None
    assert remaining_local <= float(row[0])


async def test_release_hands_over_at_the_next_heartbeat(
    app: App, pool: AsyncConnectionPool[Any], sql: psycopg.Connection[Any]
) -> None:
    a, b = manager(app, pool), manager(app, pool)
    await a.run_once()
    await a.release()
    assert a.held == frozenset()
    assert (await b.run_once()).held == {"SCHEDULER", "RETENTION"}


def test_holder_ids_are_unique_per_process_life() -> None:
    ids = {new_holder_id() for _ in range(100)}
    assert len(ids) == 100


def test_ttl_must_exceed_heartbeat_naming_both() -> None:
    with pytest.raises(
        ConfigError,
        match=r"leases: ttl \(10\.0s\) must be greater than heartbeat \(15\.0s\)",
    ):
        load_settings(leases={"ttl": 10, "heartbeat": 15})
    with pytest.raises(ConfigError, match=r"signals\.lease: ttl \(10\.0s\) must be greater"):
        load_settings(signals={"lease": {"ttl": 10, "heartbeat": 15}})
