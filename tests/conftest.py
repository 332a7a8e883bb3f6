"""Test database: TICKWORK_TEST_DATABASE_URL when set, else an embedded server of our own.

Each test session migrates a fresh schema of its own (so runs never share state) and drops
it at the end; each test starts from empty tables.
"""

from __future__ import annotations

import os
import secrets
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import psycopg
import pytest

from tickwork import App

TABLES = ("audit_events", "executions", "jobs", "workers")


@pytest.fixture(scope="session")
def database_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    url = os.environ.get("TICKWORK_TEST_DATABASE_URL")
    if url:
        yield url
        return
    from tickwork.db import embedded

    data_dir: Path = tmp_path_factory.mktemp("embedded") / "pgdata"
    yield embedded.start(data_dir)


@pytest.fixture(scope="session")
def schema(database_url: str) -> Iterator[str]:
    name = f"tw_test_{os.getpid()}_{secrets.token_hex(3)}"
    App(database_url=database_url, schema=name).migrate()
    yield name
    with psycopg.connect(database_url, autocommit=True) as conn:
        conn.execute(f"DROP SCHEMA IF EXISTS {name} CASCADE")


@pytest.fixture
def db_env(database_url: str, schema: str) -> dict[str, str]:
    """Environment for a subprocess that must use the test database and schema."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("TICKWORK_")}
    env["TICKWORK_DATABASE_URL"] = database_url
    env["TICKWORK_SCHEMA"] = schema
    return env


@pytest.fixture
def clean(database_url: str, schema: str) -> None:
    with psycopg.connect(database_url, autocommit=True) as conn:
        tables = ", ".join(f"{schema}.{t}" for t in TABLES)
        conn.execute(f"TRUNCATE {tables} RESTART IDENTITY CASCADE")


@pytest.fixture
async def app(database_url: str, schema: str, clean: None) -> AsyncIterator[App]:
    the_app = App(database_url=database_url, schema=schema)
    yield the_app
    await the_app.db.aclose()


@pytest.fixture
def sql(database_url: str, schema: str) -> Iterator[psycopg.Connection[tuple[object, ...]]]:
    """A plain autocommit connection with the test schema on the search path."""
    with psycopg.connect(database_url, autocommit=True) as conn:
        conn.execute(f"SET search_path TO {schema}")
        yield conn
