"""Async handlers get many slots, sync handlers a small thread pool, by default; a worker
claims no more jobs of sync tasks than it has threads free, so none sits on a lease waiting for
a thread while another worker could run it."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import psycopg
import pytest

from tickwork import App, JobSpec, JobState
from tickwork.config import DEFAULT_CONCURRENCY, DEFAULT_THREADS, WorkerSettings

NEVER = 3600.0  # a poll interval no test lives to see: only wake-ups inside the worker count


def states(sql: psycopg.Connection[Any], ids: list[int]) -> dict[str, int]:
    rows = sql.execute(
        "SELECT state, count(*) FROM jobs WHERE id = ANY(%s) GROUP BY state", [ids]
    ).fetchall()
    return {str(state): int(n) for state, n in rows}


def test_defaults_many_slots_few_threads(app: App) -> None:
    worker = app.worker()
    assert (worker.concurrency, worker.threads) == (DEFAULT_CONCURRENCY, DEFAULT_THREADS)
    assert DEFAULT_CONCURRENCY > DEFAULT_THREADS


@pytest.mark.parametrize(
    ("given", "threads"),
    [
        ({"concurrency": 50}, 50),  # as before threads had a setting of their own
        ({"concurrency": 50, "threads": 4}, 4),
        ({"threads": 20}, 20),
        ({"concurrency": 5, "threads": 20}, 5),  # never more threads than slots
        ({"concurrency": 3}, 3),
    ],
)
def test_threads_follow_a_given_concurrency(app: App, given: dict[str, int], threads: int) -> None:
    assert WorkerSettings(**given).sync_threads == threads
    assert app.worker(**given).threads == threads


def test_concurrency_from_the_settings_sizes_the_threads_too(database_url: str) -> None:
    app = App(database_url=database_url, worker={"concurrency": 40})
    assert app.worker().threads == 40
    assert app.worker(threads=6).threads == 6


def test_threads_setting_is_checked(app: App) -> None:
    from tickwork import ConfigError

    with pytest.raises(ConfigError, match="threads"):
        app.worker(threads=0)


async def test_sync_jobs_are_claimed_only_for_free_threads(
    app: App, background: Any, sql: psycopg.Connection[Any]
) -> None:
    # Two workers with 3 threads and 20 slots each share 9 blocking sync jobs: each claims 3
    # (not 9), and when the handlers return, the threads that free wake the claims for the
    # rest: with no poll and no notification left, nothing else could.
    gate = threading.Event()
    running = 0
    lock = threading.Lock()
    six_running = asyncio.Event()
    loop = asyncio.get_running_loop()

    @app.task
    def blocking() -> None:
        nonlocal running
        with lock:
            running += 1
            if running == 6:
                loop.call_soon_threadsafe(six_running.set)
        gate.wait(60)

    jobs = app.enqueue_many([blocking.spec() for _ in range(9)])
    ids = [j.id for j in jobs]
    options = {"concurrency": 20, "threads": 3, "poll_interval": NEVER}
    async with (
        background(app, **options) as (first, outcomes),
        background(app, **options) as (second, _),
    ):
        await asyncio.wait_for(six_running.wait(), outcomes.HANG_GUARD)
        assert (first.in_flight, second.in_flight) == (3, 3)
        assert states(sql, ids) == {"RUNNING": 6, "PENDING": 3}
        gate.set()
        for job in jobs:
            finished = await app.wait_async(job, timeout=outcomes.HANG_GUARD)
            assert finished.state is JobState.SUCCEEDED
    assert states(sql, ids) == {"SUCCEEDED": 9}


async def test_async_jobs_are_not_held_to_the_threads(
    app: App, background: Any, sql: psycopg.Connection[Any]
) -> None:
    # With the defaults (100 slots, 10 threads), 30 async and 15 sync jobs waiting at once:
    # all 30 async ones run together, and 10 of the sync ones; 5 stay PENDING for a thread.
    release = asyncio.Event()
    gate = threading.Event()
    async_running = 0
    sync_running = 0
    lock = threading.Lock()
    all_started = asyncio.Event()
    loop = asyncio.get_running_loop()

    def started() -> None:
        if async_running == 30 and sync_running == DEFAULT_THREADS:
            all_started.set()

    @app.task
    async def waits() -> None:
        nonlocal async_running
        async_running += 1
        started()
        await release.wait()

    @app.task
    def blocks() -> None:
        nonlocal sync_running
        with lock:
            sync_running += 1
        loop.call_soon_threadsafe(started)
        gate.wait(60)

    jobs = app.enqueue_many([waits.spec() for _ in range(30)] + [blocks.spec() for _ in range(15)])
    ids = [j.id for j in jobs]
    async with background(app, poll_interval=NEVER) as (worker, outcomes):
        await asyncio.wait_for(all_started.wait(), outcomes.HANG_GUARD)
        assert worker.in_flight == 30 + DEFAULT_THREADS
        assert worker.handlers_running == DEFAULT_THREADS
        assert states(sql, ids) == {"RUNNING": 40, "PENDING": 5}
        release.set()
        gate.set()
        for _ in jobs:
            await outcomes.next()
    assert states(sql, ids) == {"SUCCEEDED": 45}
    assert {app.get_job(i).state for i in ids} == {JobState.SUCCEEDED}


async def test_a_capped_claim_takes_priority_order_and_spares_paused_queues(
    app: App, sql: psycopg.Connection[Any]
) -> None:
    # job_claim_capped (both kinds of task, fewer threads than slots): the best jobs of
    # either kind first, sync ones only up to the threads given, nothing of a paused queue.
    @app.task
    async def quick(n: int) -> None: ...

    @app.task
    def slow(n: int) -> None: ...

    app.enqueue_many(
        [JobSpec(quick.name, {"n": i}, priority=i) for i in range(4)]
        + [JobSpec(slow.name, {"n": i}, priority=10 + i) for i in range(4)]
    )
    sql.execute("INSERT INTO queues (name, paused, updated_by) VALUES ('default', true, 'test')")
    async with app.worker(concurrency=20, threads=2) as worker:
        assert await worker._claim(6, 2) == []
        sql.execute("UPDATE queues SET paused = false")
        claimed = await worker._claim(6, 2)
    assert [(job.task, job.args["n"]) for job, _, _ in claimed] == [
        (slow.name, 3),
        (slow.name, 2),
        (quick.name, 3),
        (quick.name, 2),
        (quick.name, 1),
        (quick.name, 0),
    ]
