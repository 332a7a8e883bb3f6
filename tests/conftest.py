"""Test database: TICKWORK_TEST_DATABASE_URL when set, else an embedded server of our own
(reached over its Unix socket as a user's is; ``tcp_database_url`` reaches it over TCP).

Each test session migrates a fresh schema of its own (so runs never share state) and drops
it at the end; each test starts from empty tables.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import secrets
import shutil
import tempfile
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psycopg
import pytest

from tickwork import App, Outcome, Worker

from .integration.tcp_proxy import tcp_target

SHARED_PARENT = Path(__file__).parent / ".shared"
"""Where :func:`shared_dir` makes its directories (ignored by git)."""

TABLES = (
    "audit_events",
    "executions",
    "jobs",
    "leases",
    "schedules",
    "workers",
    "users",
    "refresh_tokens",
    "api_tokens",
    "invites",
    "login_failures",
    "queues",
    "app_settings",
    "variables",
    "secrets",
    "signals",
    "signal_reactor_status",
    "sweep_runs",
    "signal_overrides",
    "signal_holder_config",
    "definitions",
    "definition_activity",
    "worker_metrics",
    "tallies",
    "tally_totals",
    "tally_minutes",
)


@dataclass(frozen=True)
class SessionDatabase:
    """The session's database: its URL, and a URL to it over TCP when it has one."""

    url: str
    tcp_url: str | None


@pytest.fixture(scope="session")
def test_database() -> Iterator[SessionDatabase]:
    url = os.environ.get("TICKWORK_TEST_DATABASE_URL")
    if url:
        yield SessionDatabase(url, url if tcp_target(url) is not None else None)
        return
    from tickwork.db import embedded

    # Not under pytest's temporary directory: as root the server runs as another user, and
    # every pytest session (one the tests start, too) makes pytest-of-root private again.
    made = Path(tempfile.mkdtemp(prefix="tickwork-test-"))
    data_dir = made / "pgdata"
    try:
        # reached as a user reaches it (its socket), and on 127.0.0.1 for the tests of TCP
        url = embedded.start(data_dir, listen_tcp=True)
        yield SessionDatabase(url, embedded.tcp_url(data_dir))
    finally:
        embedded.stop()
        shutil.rmtree(made, ignore_errors=True)


@pytest.fixture(scope="session")
def database_url(test_database: SessionDatabase) -> str:
    return test_database.url


@pytest.fixture(scope="session")
def tcp_database_url(test_database: SessionDatabase) -> str:
    """The test database over TCP, for the tests of what only TCP has (keepalives, a proxy
    or pooler in between, sessions told apart by client port): the embedded server's
    127.0.0.1 port, or ``TICKWORK_TEST_DATABASE_URL`` when it names one TCP host."""
    if test_database.tcp_url is None:
        pytest.skip(
            "needs the test database over TCP: TICKWORK_TEST_DATABASE_URL names a socket "
            "(set it to postgresql://host:port/db, or unset it for the embedded server)"
        )
    return test_database.tcp_url


@pytest.fixture
def embedded_home() -> Iterator[Path]:
    """A directory for an embedded server's data directory (``<it>/pgdata``), removed after
    the test: not under pytest's temporary directory, which every pytest session makes
    private to root again, while under root the server runs as another user."""
    made = Path(tempfile.mkdtemp(prefix="tickwork-embedded-"))
    try:
        yield made
    finally:
        shutil.rmtree(made, ignore_errors=True)


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
    # a serve runs no definitions' executors unless a test asks (connections stay few)
    env["TICKWORK_RUNTIMES__SERVE"] = "[]"
    return env


@pytest.fixture
def shared_dir() -> Iterator[Path]:
    """A directory any user may write to: scripts run as an unprivileged user when the
    tests run as root. Not in the system's temp directories: a script's ``/tmp``,
    ``/var/tmp`` and ``/dev/shm`` are its own (docs/definitions.md)."""
    SHARED_PARENT.mkdir(mode=0o755, exist_ok=True)
    made = Path(tempfile.mkdtemp(prefix="tickwork-test-", dir=SHARED_PARENT))
    made.chmod(0o777)
    yield made
    shutil.rmtree(made, ignore_errors=True)


@pytest.fixture
def clean(database_url: str, schema: str) -> None:
    with psycopg.connect(database_url, autocommit=True) as conn:
        tables = ", ".join(f"{schema}.{t}" for t in TABLES)
        conn.execute(f"TRUNCATE {tables} RESTART IDENTITY CASCADE")


@pytest.fixture
async def app(database_url: str, schema: str, clean: None) -> AsyncIterator[App]:
    the_app = App(database_url=database_url, schema=schema)
    yield the_app
    await the_app.aclose()


@pytest.fixture
def sql(database_url: str, schema: str) -> Iterator[psycopg.Connection[tuple[object, ...]]]:
    """A plain autocommit connection with the test schema on the search path."""
    with psycopg.connect(database_url, autocommit=True) as conn:
        conn.execute(f"SET search_path TO {schema}")
        yield conn


class Outcomes:
    """Collects a worker's outcomes (its ``on_finished`` hook) so tests can await them."""

    HANG_GUARD = 60.0  # not a timing assertion: only stops a broken test from hanging

    def __init__(self) -> None:
        self.seen: list[Outcome] = []
        self._queue: asyncio.Queue[Outcome] = asyncio.Queue()

    def __call__(self, outcome: Outcome) -> None:
        self.seen.append(outcome)
        self._queue.put_nowait(outcome)

    async def next(self) -> Outcome:
        return await asyncio.wait_for(self._queue.get(), self.HANG_GUARD)

    async def for_job(self, job_id: int, *, final: bool = True) -> Outcome:
        """The next outcome of ``job_id`` (a final one unless ``final`` is False)."""
        while True:
            outcome = await self.next()
            if outcome.job_id != job_id:
                continue
            if not final or (outcome.job_state is not None and outcome.job_state.is_final):
                return outcome


@pytest.fixture
def background() -> Callable[..., AbstractAsyncContextManager[tuple[Worker, Outcomes]]]:
    """``async with background(app, **options) as (worker, outcomes)``: a running worker."""

    @contextlib.asynccontextmanager
    async def start(app: App, **options: Any) -> AsyncIterator[tuple[Worker, Outcomes]]:
        outcomes = Outcomes()
        options.setdefault("poll_interval", 0.05)
        worker = app.worker(on_finished=outcomes, **options)
        task = asyncio.create_task(worker.run())
        try:
            await asyncio.wait_for(worker.listening.wait(), Outcomes.HANG_GUARD)
            yield worker, outcomes
        finally:
            worker.request_stop()
            await asyncio.wait_for(task, Outcomes.HANG_GUARD)

    return start
