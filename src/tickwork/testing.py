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
- ``tickwork_clean`` (fixture): empties tickwork's tables, for a test that needs an empty
  queue.
- :func:`drain` (or :func:`drain_async`): run every due job, and the jobs those enqueue,
  until none is due, in the test itself: no worker process, no sleeping.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from tickwork.db.scratch import empty, scratch_schema
from tickwork.errors import TickworkError

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
    if not url:
        from tickwork.db import embedded

        url = embedded.start(Path(tempfile.mkdtemp(prefix="tickwork-test-")) / "pgdata")
    schema = f"tickwork_test_{os.getpid()}_{secrets.token_hex(3)}"
    app = App(database_url=url, schema=schema)
    held = contextlib.ExitStack()
    held.enter_context(scratch_schema(app.db, "testing", close=app.close))
    app.migrate()
    before = {name: os.environ.get(name) for name in ("TICKWORK_DATABASE_URL", "TICKWORK_SCHEMA")}
    os.environ.update(TICKWORK_DATABASE_URL=url, TICKWORK_SCHEMA=schema)
    _session.update(url=url, schema=schema, app=app, held=held, before=before)


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
    app = _session["app"]
    with app.db.connect() as conn:
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
        if due:
            async with app.worker(queues=due, concurrency=1) as worker:
                while found := (await worker.run_once()).outcomes:
                    outcomes += found
                    ran += len(found)
                    if len(outcomes) > max_jobs:
                        raise DrainOverflow(max_jobs)
        if not ran:  # nothing due, or nothing this app's tasks can run
            return outcomes
