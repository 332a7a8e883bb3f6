"""Migrations: idempotent, serialised by an advisory lock, recorded, in their own schema."""

from __future__ import annotations

import secrets
import threading
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest

from tickwork import App
from tickwork.db.migrate import available


@pytest.fixture
def fresh_schema(database_url: str) -> Iterator[str]:
    name = f"tw_mig_{secrets.token_hex(4)}"
    yield name
    with psycopg.connect(database_url, autocommit=True) as conn:
        conn.execute(f"DROP SCHEMA IF EXISTS {name} CASCADE")


def test_migrate_applies_once_and_records_versions(database_url: str, fresh_schema: str) -> None:
    app = App(database_url=database_url, schema=fresh_schema)
    versions = [m.version for m in available()]
    assert app.migrate() == versions
    assert app.migrate() == []  # idempotent
    with psycopg.connect(database_url) as conn:
        rows = conn.execute(f"SELECT version, name FROM {fresh_schema}.migrations").fetchall()
        tables = {
            r[0]
            for r in conn.execute(
                "SELECT table_name FROM information_schema.tables WHERE table_schema = %s",
                [fresh_schema],
            )
        }
    assert [r[0] for r in rows] == versions
    assert {"jobs", "executions", "audit_events", "workers", "migrations"} <= tables


def test_concurrent_migrators_apply_each_version_exactly_once(
    database_url: str, fresh_schema: str
) -> None:
    barrier = threading.Barrier(5)
    applied: list[list[int]] = []
    errors: list[BaseException] = []

    def run() -> None:
        try:
            barrier.wait()
            applied.append(App(database_url=database_url, schema=fresh_schema).migrate())
        except BaseException as exc:  # collected and asserted below
            errors.append(exc)

    threads = [threading.Thread(target=run) for _ in range(5)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    non_empty = [a for a in applied if a]
    assert non_empty == [[m.version for m in available()]]  # one migrator did it all


def test_everything_lives_in_the_configured_schema(
    database_url: str, fresh_schema: str, sql: psycopg.Connection[Any]
) -> None:
    App(database_url=database_url, schema=fresh_schema).migrate()
    outside = sql.execute(
        "SELECT count(*) FROM information_schema.tables"
        " WHERE table_schema = 'public' AND table_name IN ('jobs', 'executions')"
    ).fetchone()
    assert outside == (0,)
