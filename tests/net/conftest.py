"""Fixtures of the network tests: a bridge and a PostgreSQL on it for the session, hosts
(namespaces) and the tickwork processes in them per test, all removed at the end."""

from __future__ import annotations

import os
import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest

from tickwork import App, JobContext

from ..conftest import TABLES
from . import netns, pgserver
from .hosts import Fleet

REASON = netns.unavailable()
"""Why these tests skip here (None: they run)."""


@pytest.fixture(scope="session")
def network() -> Iterator[netns.Network]:
    if REASON is not None:
        pytest.skip(REASON)
    net = netns.Network().open()
    try:
        yield net
    finally:
        net.close()


@pytest.fixture(scope="session")
def net_server(network: netns.Network) -> Iterator[pgserver.Server]:
    with socket.socket() as s:
        s.bind((network.gateway, 0))
        port = s.getsockname()[1]
    server = pgserver.start(network.gateway, str(network.subnet), port)
    try:
        with psycopg.connect(server.url(), autocommit=True) as conn:
            conn.execute("CREATE DATABASE tickwork")
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="session")
def net_url(net_server: pgserver.Server) -> str:
    url = net_server.url("tickwork")
    App(database_url=url, schema="tickwork").migrate()
    return url


@pytest.fixture
def net_sql(net_url: str) -> Iterator[psycopg.Connection[tuple[Any, ...]]]:
    """An autocommit connection to the hosts' database, from the root namespace, tables
    emptied."""
    with psycopg.connect(net_url, autocommit=True) as conn:
        conn.execute("SET search_path TO tickwork")
        conn.execute(f"TRUNCATE {', '.join(TABLES)} RESTART IDENTITY CASCADE")
        conn.execute(
            "CREATE TABLE IF NOT EXISTS runs (id bigserial primary key, job_id bigint,"
            " execution_id bigint, pid int, label text, at timestamptz default clock_timestamp())"
        )
        conn.execute("TRUNCATE runs RESTART IDENTITY")
        yield conn


@pytest.fixture
async def net_app(net_url: str, net_sql: Any) -> Any:
    """An App on the hosts' database (in the root namespace), to enqueue and read."""
    the_app = App(database_url=net_url, schema="tickwork")
    yield the_app
    await the_app.aclose()


@pytest.fixture
def fleet(network: netns.Network, net_url: str, tmp_path: Path) -> Iterator[Fleet]:
    """Hosts and the tickwork processes on them; every process killed and every host
    removed at the end, whatever the test did."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("TICKWORK_")}
    env["TICKWORK_DATABASE_URL"] = net_url
    env["TICKWORK_SCHEMA"] = "tickwork"
    env["TICKWORK_RUNTIMES__SERVE"] = "[]"
    hosts = Fleet(network, env, tmp_path)
    try:
        yield hosts
    finally:
        hosts.close()


@pytest.fixture
def tasks(net_app: App) -> App:
    """``net_app`` with stubs under the worker app's task names, to enqueue them (the
    handlers run only in the worker processes)."""

    def not_here() -> None:
        raise AssertionError("the handlers run only in the worker processes")

    @net_app.task(name="e2e.work", max_attempts=50, pass_context=True)
    def work(ctx: JobContext, seconds: float = 0.0) -> int:
        not_here()
        return 0

    @net_app.task(name="e2e.linger", max_attempts=5, pass_context=True)
    async def linger(ctx: JobContext, seconds: float, notes: str) -> int:
        not_here()
        return 0

    @net_app.task(name="e2e.noop")
    async def noop() -> None:
        not_here()

    return net_app
