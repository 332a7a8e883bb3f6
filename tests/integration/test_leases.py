"""Leases, the watchdog and fencing, at the statement level (process-level crash tests are
in tests/e2e)."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import psycopg

from tickwork import App, ExecutionState, JobContext, JobState
from tickwork.queue.watchdog import Watchdog
from tickwork.worker.worker import Worker


def watchdog_of(worker: Worker) -> Watchdog:
    """The watchdog a process hosting ``worker`` runs (on the worker's open pool)."""
    assert worker._pool is not None, "worker is not open"
    return Watchdog(
        worker._pool,
        worker.store,
        actor=f"watchdog:{worker.id}",
        interval=worker.settings.watchdog_interval,
        batch=worker.settings.watchdog_batch,
    )


def expire(sql: psycopg.Connection[Any], job_id: int) -> None:
    """Move the live lease of ``job_id`` into the past, as a dead worker's would be."""
    sql.execute(
        "UPDATE executions SET lease_expires_at = now() - interval '1 second'"
        " WHERE job_id = %s AND state = 'RUNNING'",
        [job_id],
    )


async def test_watchdog_reclaims_expired_attempt_and_fences_the_old_one(
    app: App, sql: psycopg.Connection[Any]
) -> None:
    @app.task(max_attempts=3)
    def work() -> str:
        return "done"

    job = work.defer()
    async with app.worker() as zombie, app.worker() as rescuer:
        [claimed] = await zombie._claim(1)
        first_execution = claimed[1]
        assert (await watchdog_of(zombie).run_once()).count == 0  # lease still valid

        expire(sql, job.id)
        reclaimed = await watchdog_of(rescuer).run_once()
        assert reclaimed.reclaimed == [(job.id, first_execution, "PENDING")]
        back = app.get_job(job.id)
        assert back.state is JobState.PENDING and back.attempts == 1

        second = await rescuer.run_once()
        assert second.outcomes[0].job_state is JobState.SUCCEEDED

        # the zombie finally finishes its attempt: its write is fenced off (0 rows)
        zombie_running = zombie._start(claimed, asyncio.get_running_loop().create_future())
        assert zombie_running.done is not None
        outcome = await zombie_running.done
        assert outcome.fenced and outcome.job_state is None

    executions = app.list_executions(job.id)
    assert [e.state for e in executions] == [ExecutionState.TIMED_OUT, ExecutionState.SUCCEEDED]
    assert executions[0].error is not None
    assert executions[0].error.type == "tickwork.LeaseExpired"
    assert app.get_job(job.id).state is JobState.SUCCEEDED
    [event] = app.audit_events(job.id)
    assert event.event_type == "job.reclaimed"
    assert event.actor == f"watchdog:{rescuer.id}"
    assert event.metadata["to"] == "PENDING"
    assert event.metadata["worker_id"] == str(zombie.id)


async def test_watchdog_dead_letters_when_attempts_are_exhausted(
    app: App, sql: psycopg.Connection[Any]
) -> None:
    @app.task(max_attempts=1)
    def work() -> None:
        pass

    job = work.defer()
    async with app.worker() as worker:
        await worker._claim(1)
        expire(sql, job.id)
        result = await watchdog_of(worker).run_once()
    assert result.reclaimed[0][2] == "DEAD_LETTER"
    dead = app.get_job(job.id)
    assert dead.state is JobState.DEAD_LETTER and dead.finished_at is not None
    assert [e.event_type for e in app.audit_events(job.id)] == [
        "job.reclaimed",
        "job.dead_lettered",
    ]


async def test_watchdog_cancels_a_reclaimed_job_whose_cancel_was_requested(
    app: App, sql: psycopg.Connection[Any]
) -> None:
    @app.task
    def work() -> None:
        pass

    job = work.defer()
    async with app.worker() as worker:
        await worker._claim(1)
        app.cancel(job.id)
        expire(sql, job.id)
        await watchdog_of(worker).run_once()
    assert app.get_job(job.id).state is JobState.CANCELLED


async def test_watchdog_works_in_batches(app: App, sql: psycopg.Connection[Any]) -> None:
    @app.task
    def work() -> None:
        pass

    jobs = app.enqueue_many([work.spec() for _ in range(7)])
    async with app.worker(concurrency=7, watchdog_batch=3) as worker:
        assert len(await worker._claim(7)) == 7
        for job in jobs:
            expire(sql, job.id)
        result = await watchdog_of(worker).run_once()
    assert result.count == 7
    assert {app.get_job(j.id).state for j in jobs} == {JobState.PENDING}


async def test_renewal_extends_leases_in_one_statement_and_detects_loss(
    app: App, sql: psycopg.Connection[Any], background: Any
) -> None:
    release = threading.Event()
    both_started = asyncio.Event()
    started: list[int] = []
    loop = asyncio.get_running_loop()

    def mark(job_id: int) -> None:
        started.append(job_id)
        if len(started) == 2:
            both_started.set()

    @app.task(pass_context=True)
    def hold(ctx: JobContext) -> bool:
        loop.call_soon_threadsafe(mark, ctx.job.id)
        # returns once told to stop (lease lost) or released by the test
        while not ctx.wait_for_cancel(timeout=0.01):
            if release.is_set():
                return False
        return True

    kept = hold.defer()
    lost = hold.defer()
    async with background(app, lease_renew_interval=3600, lease_ttl=7200) as (worker, out):
        await asyncio.wait_for(both_started.wait(), out.HANG_GUARD)
        before = {
            r[0]: r[1]
            for r in sql.execute(
                "SELECT job_id, lease_expires_at FROM executions WHERE state = 'RUNNING'"
            )
        }
        # the watchdog (elsewhere) reclaims one attempt; the worker learns it at renewal
        expire(sql, lost.id)
        await watchdog_of(worker).run_once()
        await worker.renew_leases()
        lost_outcome = await out.for_job(lost.id, final=False)
        after = dict(
            sql.execute("SELECT job_id, lease_expires_at FROM executions WHERE state = 'RUNNING'")
        )
        release.set()
        kept_outcome = await out.for_job(kept.id)

    assert after[kept.id] > before[kept.id]
    assert lost_outcome.fenced  # told via ctx, its late result was not recorded
    assert kept_outcome.job_state is JobState.SUCCEEDED
    # the reclaimed job ran again as a new attempt; the lost attempt stays TIMED_OUT
    assert [e.state for e in app.list_executions(lost.id)] == [
        ExecutionState.TIMED_OUT,
        ExecutionState.SUCCEEDED,
    ]


async def test_renewal_passes_over_a_locked_attempt_without_waiting_or_calling_it_lost(
    app: App, sql: psycopg.Connection[Any], background: Any
) -> None:
    # A completion locks its executions in its own order; a renewal that waited for such a
    # lock could deadlock with it. The renewal skips the locked row: neither renewed nor lost.
    started = asyncio.Event()
    release = threading.Event()
    loop = asyncio.get_running_loop()

    @app.task(pass_context=True)
    def hold(ctx: JobContext) -> str:
        loop.call_soon_threadsafe(started.set)
        while not ctx.wait_for_cancel(timeout=0.01):
            if release.is_set():
                return "released"
        return "told to stop"

    job = hold.defer()

    def lease() -> Any:
        row = sql.execute(
            "SELECT lease_expires_at FROM executions WHERE job_id = %s AND state = 'RUNNING'",
            [job.id],
        ).fetchone()
        assert row is not None
        return row[0]

    async with background(app, lease_renew_interval=3600, lease_ttl=7200) as (worker, out):
        await asyncio.wait_for(started.wait(), out.HANG_GUARD)
        before = lease()
        with sql.transaction():
            sql.execute("SELECT 1 FROM executions WHERE job_id = %s FOR UPDATE", [job.id])
            # would block on the row lock until the guard fires if the renewal waited
            await asyncio.wait_for(worker.renew_leases(), out.HANG_GUARD)
        assert lease() == before  # not renewed while locked
        await worker.renew_leases()
        assert lease() > before  # renewed once the lock is gone
        release.set()
        outcome = await out.for_job(job.id)

    assert outcome.job_state is JobState.SUCCEEDED
    assert app.get_job(job.id).result == "released"  # never told it had lost its lease
