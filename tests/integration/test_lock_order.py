"""Statements that lock several jobs take the locks in job id order, so two of them waiting
on each other's rows cannot deadlock (PostgreSQL would abort one after deadlock_timeout)."""

from __future__ import annotations

import asyncio
import json
import logging
import threading
import time
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any, TypeVar

import psycopg
import pytest

from tickwork import App, JobState
from tickwork.db import driver_errors as database
from tickwork.queue import admin

HANG_GUARD = 60.0  # not a timing assertion: only stops a broken test from hanging


def waiting_for_a_lock(url: str, pid: int) -> None:
    """Return once backend ``pid`` waits for a row lock (there is no event to await)."""
    deadline = time.monotonic() + HANG_GUARD
    # autocommit: inside a transaction pg_stat_activity would be read once and kept
    with psycopg.connect(url, autocommit=True) as watch:
        while time.monotonic() < deadline:
            row = watch.execute(
                "SELECT wait_event_type FROM pg_stat_activity WHERE pid = %s", [pid]
            ).fetchone()
            if row is not None and row[0] == "Lock":
                return
            time.sleep(0.005)
    raise AssertionError(f"backend {pid} never waited for a lock")


def lock_waiters_reach(url: str, schema: str, count: int) -> None:
    """Return once ``count`` backends wait for a lock in a statement on ``schema`` (a test
    run beside this one, on another schema of the same database, has waiters of its own)."""
    deadline = time.monotonic() + HANG_GUARD
    with psycopg.connect(url, autocommit=True) as watch:
        while time.monotonic() < deadline:
            row = watch.execute(
                "SELECT count(*) FROM pg_stat_activity"
                " WHERE datname = current_database() AND wait_event_type = 'Lock'"
                " AND strpos(query, %s) > 0",
                [f"{schema}."],
            ).fetchone()
            if row is not None and row[0] >= count:
                return
            time.sleep(0.005)
    raise AssertionError(f"{count} backends never waited for a lock")


class Blocked:
    """One statement run on its own connection in a thread (with an event loop of its own, as
    the store's methods are async); ``error`` holds what it raised."""

    def __init__(
        self, url: str, run: Callable[[psycopg.AsyncConnection[Any]], Awaitable[object]]
    ) -> None:
        self.pid = 0
        self.error: BaseException | None = None
        self._url = url
        self._run = run
        self._connected = threading.Event()
        self._thread = threading.Thread(target=asyncio.run, args=(self._target(),))
        self._thread.start()
        assert self._connected.wait(HANG_GUARD), "never connected"
        assert self.error is None, self.error

    async def _target(self) -> None:
        try:
            async with await psycopg.AsyncConnection.connect(self._url, autocommit=True) as conn:
                self.pid = conn.info.backend_pid
                self._connected.set()
                await self._run(conn)
        except BaseException as exc:  # reported by the test, not lost in the thread
            self.error = exc
        finally:
            self._connected.set()

    def join(self) -> None:
        self._thread.join(HANG_GUARD)
        assert not self._thread.is_alive(), "statement still blocked"


async def two_running_jobs(app: App, sql: psycopg.Connection[Any]) -> dict[int, int]:
    """Two jobs claimed (RUNNING, one live execution each): execution id by job id, the
    jobs in id order."""

    @app.task()
    def work() -> None:
        return None

    work.defer(), work.defer()
    # a table of realistic size, so the statements are planned as in production (index
    # scans; on a near-empty table a sequential scan locks rows in physical order instead)
    app.enqueue_many([{"task": work.name, "queue": "elsewhere"} for _ in range(2000)])
    sql.execute("ANALYZE jobs")
    sql.execute("ANALYZE executions")
    async with app.worker() as worker:
        claimed = await worker._claim(2)
    return {job.id: execution_id for job, execution_id, _ in sorted(claimed, key=lambda c: c[0].id)}


def race_with_bulk_cancel(
    app: App,
    sql: psycopg.Connection[Any],
    url: str,
    jobs: list[int],
    other: Callable[[psycopg.AsyncConnection[Any]], Awaitable[object]],
) -> None:
    """A bulk cancel of ``jobs`` waits for the first job's lock; ``other`` then runs and
    waits too; the lock is let go. Neither may fail (a deadlock aborts one of them)."""
    with sql.transaction():
        # a third party holds the first job, so both statements queue behind it, cancel first
        sql.execute("SELECT 1 FROM jobs WHERE id = %s FOR UPDATE", [jobs[0]])
        cancel = Blocked(
            url, lambda conn: app.db.store.job_cancel(conn, job_ids=jobs, actor="test")
        )
        waiting_for_a_lock(url, cancel.pid)
        rival = Blocked(url, other)
        waiting_for_a_lock(url, rival.pid)
    cancel.join()
    rival.join()
    assert cancel.error is None and rival.error is None, (cancel.error, rival.error)


async def test_completion_batch_and_bulk_cancel_do_not_deadlock(
    app: App, sql: psycopg.Connection[Any], database_url: str
) -> None:
    execution = await two_running_jobs(app, sql)
    first, second = execution
    # The outcomes arrive in the order the attempts happened to finish: here the later job
    # first. A completion that locked jobs in that order would hold `second` and wait for
    # `first` while the cancel holds `first` and waits for `second`.
    outcomes = json.dumps(
        [
            {
                "job_id": job_id,
                "execution_id": execution[job_id],
                "outcome": "SUCCEEDED",
                "result": None,
                "error": None,
                "retry_delay": 0,
            }
            for job_id in (second, first)
        ]
    )
    race_with_bulk_cancel(
        app,
        sql,
        database_url,
        [first, second],
        lambda conn: app.db.store.job_complete_many(conn, outcomes=outcomes),
    )
    # the cancel was recorded first; each attempt then completed and honoured it
    assert [app.get_job(j).state for j in (first, second)] == [JobState.CANCELLED] * 2


async def test_watchdog_and_bulk_cancel_do_not_deadlock(
    app: App, sql: psycopg.Connection[Any], database_url: str
) -> None:
    first, second = await two_running_jobs(app, sql)
    # the watchdog takes expired attempts oldest lease first: here the later job's
    sql.execute(
        "UPDATE executions SET lease_expires_at = now() - make_interval(secs => %s)"
        " WHERE job_id = %s",
        [2, second],
    )
    sql.execute(
        "UPDATE executions SET lease_expires_at = now() - make_interval(secs => %s)"
        " WHERE job_id = %s",
        [1, first],
    )
    race_with_bulk_cancel(
        app,
        sql,
        database_url,
        [first, second],
        lambda conn: app.db.store.execution_reclaim_expired(conn, limit=10, actor="test"),
    )
    # the cancel was recorded first; the watchdog then reclaimed both and honoured it
    assert [app.get_job(j).state for j in (first, second)] == [JobState.CANCELLED] * 2


T = TypeVar("T")


async def aborted_once_in_a_cycle(
    victim: Coroutine[Any, Any, T],
    sql: psycopg.Connection[Any],
    url: str,
    schema: str,
    first: int,
    second: int,
    caplog: pytest.LogCaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
) -> T:
    """Run ``victim`` (which locks job ``first`` then ``second``) into a deadlock with a
    rival locking them the other way round, one the database breaks by aborting the victim;
    return what the victim returns in the end, once it is shown to have been aborted once.

    The victim's pause before its re-run is held until the rival has committed: a re-run
    that came back before the rival (woken by the abort) had taken ``first`` could take it
    instead and meet the rival in the same cycle again."""
    rival_done = threading.Event()
    pauses: list[int] = []

    async def rival(conn: psycopg.AsyncConnection[Any]) -> None:
        # with a long deadlock_timeout it is never the one PostgreSQL aborts: the victim,
        # checking after its default 1 s, is
        try:
            async with conn.transaction():
                await conn.execute("SET LOCAL deadlock_timeout = '60s'")
                await conn.execute(
                    f"SELECT 1 FROM {schema}.jobs WHERE id = %s FOR UPDATE", [second]
                )
                await conn.execute(f"SELECT 1 FROM {schema}.jobs WHERE id = %s FOR UPDATE", [first])
        finally:
            rival_done.set()

    def pause(attempt: int) -> None:
        pauses.append(attempt)
        assert rival_done.wait(HANG_GUARD), "the rival never committed"

    async def pause_async(attempt: int) -> None:
        pauses.append(attempt)
        assert await asyncio.to_thread(rival_done.wait, HANG_GUARD), "the rival never committed"

    monkeypatch.setattr(database, "pause_before_retry", pause)
    monkeypatch.setattr(database, "pause_before_retry_async", pause_async)
    caplog.set_level(logging.WARNING, logger="tickwork.db")
    with sql.transaction():
        sql.execute("SELECT 1 FROM jobs WHERE id = %s FOR UPDATE", [first])
        task = asyncio.create_task(victim)
        await asyncio.to_thread(lock_waiters_reach, url, schema, 1)  # the victim, on first
        other = Blocked(url, rival)  # holds second, waits for first
        await asyncio.to_thread(lock_waiters_reach, url, schema, 2)
    # first goes to the victim, which then waits for second: a cycle
    result = await asyncio.wait_for(task, HANG_GUARD)
    await asyncio.to_thread(other.join)
    assert other.error is None
    assert pauses == [1]  # aborted once, paused, then ran through
    assert any("deadlock" in r.getMessage() for r in caplog.records)
    return result


async def test_a_bulk_cancel_the_database_aborts_to_break_a_deadlock_runs_again(
    app: App,
    sql: psycopg.Connection[Any],
    database_url: str,
    schema: str,
    caplog: pytest.LogCaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    first, second = await two_running_jobs(app, sql)
    pool = await app.db.async_pool()
    cancel = admin.act(pool, app.db.store, "cancel", [first, second], "test")

    states = await aborted_once_in_a_cycle(
        cancel, sql, database_url, schema, first, second, caplog, monkeypatch
    )
    assert states == {first: "RUNNING", second: "RUNNING"}  # and then did its work
    assert all(app.get_job(j).cancel_requested_at is not None for j in (first, second))


@pytest.mark.parametrize("facade", ["async", "sync"])
async def test_an_enqueue_the_database_aborts_to_break_a_deadlock_runs_again(
    app: App,
    sql: psycopg.Connection[Any],
    database_url: str,
    schema: str,
    caplog: pytest.LogCaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
    facade: str,
) -> None:
    # A batch whose unique keys are held by existing jobs locks those jobs in input order;
    # another transaction taking them in the other order meets it in a cycle. In tickwork's
    # own transaction the aborted batch runs again.
    @app.task()
    def work() -> None:
        return None

    first = work.configure(unique_key="first").defer().id
    second = work.configure(unique_key="second").defer().id
    batch = [{"task": work.name, "unique_key": key} for key in ("first", "second")]
    enqueue = (
        app.enqueue_many_async(batch)
        if facade == "async"
        else asyncio.to_thread(app.enqueue_many, batch)
    )

    jobs = await aborted_once_in_a_cycle(
        enqueue, sql, database_url, schema, first, second, caplog, monkeypatch
    )
    assert [(j.id, j.duplicate) for j in jobs] == [(first, True), (second, True)]
