"""Testing helpers for applications that use tickwork: a pytest plugin, and ``drain``.

Turn the plugin on in your ``conftest.py``::

    pytest_plugins = ["tickwork.testing"]

When pytest starts (before your modules are imported), it points tickwork at a throwaway
schema on the test database: ``TICKWORK_TEST_DATABASE_URL``, or an embedded PostgreSQL it
starts for the session when that is unset. It sets ``TICKWORK_DATABASE_URL`` and
``TICKWORK_SCHEMA`` for the session, so an ``App()`` made at import time (configured from
the environment) uses that schema; it migrates the schema and drops it at the end. Your
tests run the real SQL on a real PostgreSQL: transactional enqueue, unique keys, retries and
schedules behave as they will in production.

- ``tickwork_database_url`` and ``tickwork_schema`` (session fixtures): where that is.
- ``tickwork_clean`` (fixture), or :func:`clean`: empties tickwork's tables, for a test
  that needs an empty queue.
- :func:`drain` (or :func:`drain_async`): run every due job, and the jobs those enqueue,
  until none is due, in the test itself: no worker process, no sleeping.
- :func:`eager`: while it is on, jobs run in the test as soon as the transaction that
  enqueued them commits (a ``defer`` returns after its job, and those it enqueued, ran).
"""

from __future__ import annotations

import contextlib
import os
import secrets
import shutil
import tempfile
import threading
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from tickwork.db.scratch import empty, is_scratch, scratch_schema
from tickwork.errors import ConfigError, TickworkError

if TYPE_CHECKING:
    from tickwork import Outcome
    from tickwork.app import App

TEST_URL = "TICKWORK_TEST_DATABASE_URL"
MAX_DRAINED = 10_000
"""Jobs one :func:`drain` runs at most: a job that enqueues itself forever fails the test
instead of hanging it."""
_session: dict[str, Any] = {}


class DrainOverflow(TickworkError):
    """:func:`drain` ran more jobs than it may: a job that enqueues itself forever?"""

    def __init__(self, limit: int) -> None:
        super().__init__(f"drain ran more than {limit} jobs: does a job enqueue itself forever?")


def pytest_configure(config: pytest.Config) -> None:
    """Point tickwork at a throwaway schema before the tests' modules are imported: made
    (marked as a scratch schema, so a schema that holds anything else is never touched) and
    migrated now, dropped when the session ends."""
    from tickwork.app import App

    url = os.environ.get(TEST_URL)
    made_dir = None
    if not url:
        from tickwork.db import embedded

        made_dir = Path(tempfile.mkdtemp(prefix="tickwork-test-"))
        url = embedded.start(made_dir / "pgdata")
    schema = f"tickwork_test_{os.getpid()}_{secrets.token_hex(3)}"
    app = App(database_url=url, schema=schema)
    held = contextlib.ExitStack()
    held.enter_context(scratch_schema(app.db, "testing", close=app.close))
    app.migrate()
    before = {name: os.environ.get(name) for name in ("TICKWORK_DATABASE_URL", "TICKWORK_SCHEMA")}
    os.environ.update(TICKWORK_DATABASE_URL=url, TICKWORK_SCHEMA=schema)
    _session.update(url=url, schema=schema, app=app, held=held, before=before, made=made_dir)


def pytest_unconfigure(config: pytest.Config) -> None:
    """Drop the schema, and give the environment back."""
    if not _session:
        return
    for name, value in _session["before"].items():
        if value is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = value
    _session["held"].close()
    if _session["made"] is not None:  # the embedded server this session started, and its files
        from tickwork.db import embedded

        embedded.stop()
        shutil.rmtree(_session["made"], ignore_errors=True)
    _session.clear()


@pytest.fixture(scope="session")
def tickwork_database_url() -> str:
    """The test database's URL (``TICKWORK_TEST_DATABASE_URL`` or the embedded server's)."""
    return str(_session["url"])


@pytest.fixture(scope="session")
def tickwork_schema() -> str:
    """The throwaway schema of this test session, migrated."""
    return str(_session["schema"])


@pytest.fixture
def tickwork_clean() -> None:
    """tickwork's tables emptied before the test (the migrations' record kept)."""
    clean(_session["app"])


def clean(app: App) -> None:
    """Empty every table of ``app``'s schema but the migrations' record: jobs, executions,
    schedules, signals, users, audit. Only a schema made for tests: one that holds anything
    else is refused (:func:`tickwork.db.scratch.empty`)."""
    with app.db.connect() as conn:
        if not is_scratch(conn, app.db):
            raise ConfigError(
                f"clean(): schema {app.settings.schema_name!r} was not made for tests (by this"
                " plugin, or Django's test runner from tickwork.contrib.django.test); it is"
                " left untouched"
            )
        empty(conn, app.db, every_table=True)


def drain(
    app: App, *, queues: Sequence[str] | None = None, max_jobs: int = MAX_DRAINED
) -> list[Outcome]:
    """Run every due job of ``queues`` (default: every queue), and the jobs they enqueue,
    until none is due; the outcome of each attempt, in order. A job due later (``run_at``,
    a retry's backoff) is left for later. Runs in the calling thread's test, through the
    app's own loop; from async code use :func:`drain_async`."""
    return app.portal.call(lambda: drain_async(app, queues=queues, max_jobs=max_jobs))


async def drain_async(
    app: App, *, queues: Sequence[str] | None = None, max_jobs: int = MAX_DRAINED
) -> list[Outcome]:
    """:func:`drain`, awaited."""
    outcomes: list[Outcome] = []
    while True:
        if queues is not None:
            due = list(queues)
        else:
            pool = await app.db.async_pool()
            async with pool.connection() as conn:
                due = await app.db.store.job_due_queues(conn)
        ran = 0
        for runtime, claimed in _executors(due):
            async with app.worker(queues=claimed, runtime=runtime, concurrency=1) as worker:
                while found := (await worker.run_once()).outcomes:
                    outcomes += found
                    ran += len(found)
                    if len(outcomes) > max_jobs:
                        raise DrainOverflow(max_jobs)
        if not ran:  # nothing due, or nothing this app's tasks can run
            return outcomes


def _executors(queues: Sequence[str]) -> list[tuple[str | None, list[str]]]:
    """Who claims ``queues``: one worker for the app's own queues, and a runtime's executor
    for each runtime's queue (only it claims one: its interpreter is checked)."""
    from tickwork.runtimes.available import runtime_of

    own = [q for q in queues if runtime_of(q) is None]
    found: list[tuple[str | None, list[str]]] = [(None, own)] if own else []
    return found + [(runtime_of(q), [q]) for q in queues if runtime_of(q) is not None]


@contextlib.contextmanager
def eager(
    app: App, *, queues: Sequence[str] | None = None, max_jobs: int = MAX_DRAINED
) -> Iterator[list[Outcome]]:
    """Run jobs in the test when the transaction that enqueued them commits, through the
    worker's own SQL (:func:`drain`); yields the outcomes, appended as they happen.

    When "commits" is:

    - no ``conn`` (tickwork's own connection): at once, before ``defer`` returns;
    - Django's connection (``tickwork.contrib.django``): ``transaction.on_commit``, so at
      once outside ``atomic()``. Jobs run on tickwork's connections, which see committed
      rows only: use ``TransactionTestCase`` (``TestCase`` never commits);
    - a SQLAlchemy ``Session``/``AsyncSession``: its ``after_commit`` event;
    - a psycopg connection: at once in autocommit; inside a transaction psycopg tells
      nobody of the commit, so those jobs run at the next enqueue that runs jobs, or
      at :func:`drain`.

    A job enqueued by a job that is running is run by the same drain, after it; so is one
    enqueued by another thread while a drain runs (that thread's ``defer`` returns at once).
    A drain that runs more than ``max_jobs`` jobs raises :class:`DrainOverflow` from the
    call that started it (a job that enqueues itself forever). The app is left as it was
    when the block ends, however it ends.
    """
    runner = _Eager(app, queues, max_jobs)
    if app.after_enqueue is not None:
        raise TickworkError("eager(): already on for this app")
    app.after_enqueue = runner
    try:
        yield runner.outcomes
    finally:
        app.after_enqueue = None


class _Eager:
    """What :func:`eager` sets as ``app.after_enqueue``. One drain runs at a time; an enqueue
    that comes while one runs (from its own jobs, or another thread) only asks it to look
    again before it ends, so no committed job is left behind and none waits on another."""

    def __init__(self, app: App, queues: Sequence[str] | None, max_jobs: int) -> None:
        self.app = app
        self.queues = queues
        self.max_jobs = max_jobs
        self.outcomes: list[Outcome] = []
        self._draining = threading.Lock()
        self._wanted = False
        """Jobs were committed since the running drain last looked: it drains again."""

    def run(self) -> None:
        self._wanted = True
        # the holder checks _wanted again after releasing the lock: an enqueue that found the
        # lock held just before the release is drained by the holder's next turn
        while self._wanted and self._draining.acquire(blocking=False):
            try:
                while self._wanted:
                    self._wanted = False
                    self.outcomes += drain(self.app, queues=self.queues, max_jobs=self.max_jobs)
            finally:
                self._draining.release()

    async def run_async(self) -> None:
        self._wanted = True
        while self._wanted and self._draining.acquire(blocking=False):
            try:
                while self._wanted:
                    self._wanted = False
                    self.outcomes += await drain_async(
                        self.app, queues=self.queues, max_jobs=self.max_jobs
                    )
            finally:
                self._draining.release()

    def enqueued(self, conn: Any) -> None:
        if conn is None or _committed(conn):
            self.run()
        elif type(conn).__module__.startswith("django."):
            from django.db import transaction

            transaction.on_commit(self.run, using=conn.alias)
        elif hasattr(conn, "get_bind"):  # a SQLAlchemy Session
            _after_commit(conn, self.run)

    async def enqueued_async(self, conn: Any) -> None:
        if conn is None or _committed(conn):
            await self.run_async()
        elif hasattr(conn, "sync_session"):  # a SQLAlchemy AsyncSession: its commit is sync
            _after_commit(conn.sync_session, self.run)


def _committed(conn: Any) -> bool:
    """A psycopg connection with no transaction open: what was written is committed."""
    import psycopg

    if isinstance(conn, psycopg.Connection | psycopg.AsyncConnection):
        return conn.info.transaction_status == psycopg.pq.TransactionStatus.IDLE
    return False


def _after_commit(session: Any, run: Any) -> None:
    from sqlalchemy import event

    event.listen(session, "after_commit", lambda _: run(), once=True)
