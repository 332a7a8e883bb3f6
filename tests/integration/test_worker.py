"""The worker loop: wake-ups by NOTIFY, reconnecting, concurrency, shutdown, registration."""

from __future__ import annotations

import asyncio
import logging
import threading
from typing import Any

import psycopg
import pytest
from psycopg.conninfo import make_conninfo

from tickwork import App, ConfigError, ExecutionState, JobContext, JobState

NEVER = 3600.0  # a poll interval no test lives to see: only NOTIFY can wake the worker


async def test_notify_wakes_an_idle_worker(app: App, background: Any) -> None:
    @app.task
    def ping() -> str:
        return "pong"

    async with background(app, poll_interval=NEVER) as (_, outcomes):
        # the worker has claimed once at start and is now idle until a notification
        job = await ping.defer_async()
        outcome = await outcomes.for_job(job.id)
    assert outcome.job_state is JobState.SUCCEEDED


async def test_notify_during_a_claim_in_flight_is_not_lost(
    app: App, background: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A NOTIFY that arrives while a claim is on the database (and no second claim may start)
    # must still lead to a claim once that one returns, not wait for the poll interval.
    from tickwork.worker.worker import Worker

    held = asyncio.Event()
    gate = asyncio.Event()
    woken = asyncio.Event()  # a pass of the claim loop ran while the claim of a was held
    original_claim = Worker._claim
    original_free = Worker._free_slots

    async def first_claim_held(self: Worker, limit: int, threads: int | None = None) -> Any:
        claimed = await original_claim(self, limit, threads)
        if claimed and not held.is_set():
            held.set()
            await gate.wait()  # the claim of job a is still "in flight" for the worker
        return claimed

    def free_slots(self: Worker) -> int:
        if held.is_set():
            woken.set()
        return original_free(self)

    monkeypatch.setattr(Worker, "_claim", first_claim_held)
    monkeypatch.setattr(Worker, "_free_slots", free_slots)

    @app.task
    def ping(n: int) -> int:
        return n

    async with background(app, poll_interval=NEVER) as (_, outcomes):
        a = await ping.defer_async(n=1)
        await asyncio.wait_for(held.wait(), outcomes.HANG_GUARD)
        b = await ping.defer_async(n=2)
        await asyncio.wait_for(woken.wait(), outcomes.HANG_GUARD)  # b's NOTIFY, no claim yet
        gate.set()
        assert (await outcomes.for_job(a.id)).job_state is JobState.SUCCEEDED
        assert (await outcomes.for_job(b.id)).job_state is JobState.SUCCEEDED


async def test_notify_during_a_claim_that_finds_nothing_is_not_lost(
    app: App, background: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The claim in flight when the NOTIFY arrives comes back empty, so no attempt will free a
    # slot later: its own return must lead to the claim the NOTIFY is owed (the claim loop
    # must not still count the claim that has just returned as in flight).
    from tickwork.worker.worker import Worker

    held = asyncio.Event()
    gate = asyncio.Event()
    woken = asyncio.Event()
    original_claim = Worker._claim
    original_free = Worker._free_slots

    async def first_claim_empty_and_held(
        self: Worker, limit: int, threads: int | None = None
    ) -> Any:
        if not held.is_set():
            held.set()
            await gate.wait()
            return []
        return await original_claim(self, limit, threads)

    def free_slots(self: Worker) -> int:
        if held.is_set():
            woken.set()
        return original_free(self)

    monkeypatch.setattr(Worker, "_claim", first_claim_empty_and_held)
    monkeypatch.setattr(Worker, "_free_slots", free_slots)

    @app.task
    def ping() -> str:
        return "pong"

    async with background(app, poll_interval=NEVER) as (_, outcomes):
        await asyncio.wait_for(held.wait(), outcomes.HANG_GUARD)
        job = await ping.defer_async()
        await asyncio.wait_for(woken.wait(), outcomes.HANG_GUARD)  # its NOTIFY, no claim yet
        gate.set()
        outcome = await outcomes.for_job(job.id)
    assert outcome.job_state is JobState.SUCCEEDED


async def test_a_failed_claim_is_tried_again_without_waiting_for_the_poll(
    app: App, background: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    # the claim a notification asked for fails (the database out of reach for a moment): the
    # job must not wait for the poll interval, which here never comes
    from tickwork.worker.worker import Worker

    original_claim = Worker._claim
    failed = asyncio.Event()

    async def fails_once_with_a_job_waiting(
        self: Worker, limit: int, threads: int | None = None
    ) -> Any:
        if not failed.is_set():
            pool = await app.db.async_pool()
            async with pool.connection() as conn:
                cur = await conn.execute(
                    f"SELECT count(*) FROM {app.settings.schema_name}.jobs WHERE state = 'PENDING'"
                )
                waiting = await cur.fetchone()
            # until one claim has failed, none takes a job: one that finds none waiting
            # answers none (a job committed meanwhile notifies, which asks for another claim)
            if not (waiting and waiting[0]):
                return []
            failed.set()
            raise psycopg.OperationalError("connection lost")
        return await original_claim(self, limit, threads)

    monkeypatch.setattr(Worker, "_claim", fails_once_with_a_job_waiting)

    @app.task
    def ping() -> str:
        return "pong"

    async with background(app, poll_interval=NEVER) as (_, outcomes):
        job = await ping.defer_async()
        outcome = await outcomes.for_job(job.id)
    assert failed.is_set() and outcome.job_state is JobState.SUCCEEDED


async def test_notification_from_a_committed_caller_transaction(
    app: App, background: Any, database_url: str
) -> None:
    @app.task
    def ping() -> None:
        pass

    async with background(app, poll_interval=NEVER) as (_, outcomes):
        async with await psycopg.AsyncConnection.connect(database_url) as conn:
            job = await ping.defer_async(conn=conn)
            await conn.commit()  # the notification is delivered at commit
        outcome = await outcomes.for_job(job.id)
    assert outcome.job_state is JobState.SUCCEEDED


async def test_listener_reconnects_after_its_connection_is_killed(
    app: App, background: Any, sql: psycopg.Connection[Any]
) -> None:
    @app.task
    def ping() -> None:
        pass

    async with background(app, poll_interval=NEVER) as (worker, outcomes):
        killed = sql.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = %s",
            [f"tickwork-listen-{worker.id}"],
        ).fetchall()
        assert killed == [(True,)]
        # The loop was blocked by the sync call above, so the listener cannot have noticed
        # yet: a fresh event is set only by the reconnect.
        worker.listening = asyncio.Event()
        await asyncio.wait_for(worker.listening.wait(), outcomes.HANG_GUARD)
        job = await ping.defer_async()
        outcome = await outcomes.for_job(job.id)
    assert outcome.job_state is JobState.SUCCEEDED


async def test_poll_interval_is_the_fallback_when_no_notification_comes(
    app: App, background: Any, sql: psycopg.Connection[Any]
) -> None:
    @app.task
    def ping() -> None:
        pass

    async with background(app, poll_interval=0.05) as (_, outcomes):
        # a row inserted behind tickwork's back sends no NOTIFY; polling still finds it
        sql.execute(
            "INSERT INTO jobs (queue, task, max_attempts, created_by) VALUES"
            " ('default', %s, 1, 'psql')",
            [ping.name],
        )
        outcome = await outcomes.next()
    assert outcome.job_state is JobState.SUCCEEDED


async def test_concurrency_bounds_attempts_in_flight(app: App, background: Any) -> None:
    gate = threading.Event()
    three_running = asyncio.Event()
    loop = asyncio.get_running_loop()
    peak = 0
    current = 0
    lock = threading.Lock()

    @app.task
    def busy() -> None:
        nonlocal peak, current
        with lock:
            current += 1
            peak = max(peak, current)
            if current == 3:
                loop.call_soon_threadsafe(three_running.set)
        gate.wait(60)
        with lock:
            current -= 1

    jobs = app.enqueue_many([busy.spec() for _ in range(9)])
    async with background(app, concurrency=3) as (worker, outcomes):
        await asyncio.wait_for(three_running.wait(), outcomes.HANG_GUARD)
        assert worker.in_flight == 3
        running = [j for j in jobs if app.get_job(j.id).state is JobState.RUNNING]
        assert len(running) == 3
        gate.set()
        for _ in jobs:
            await outcomes.next()
    assert peak == 3
    assert {app.get_job(j.id).state for j in jobs} == {JobState.SUCCEEDED}


async def test_claims_wait_while_outcomes_pile_up_unwritten(
    app: App, background: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A slot frees when its handler returns, before the outcome is written; but with one
    # concurrency's worth of outcomes already waiting for a write, claims stop until the
    # writes catch up (memory stays bounded when the database records slower than it hands out).
    from tickwork.worker.worker import Worker

    gate = asyncio.Event()
    writing = asyncio.Event()
    original = Worker._complete_many

    async def held_write(self: Worker, outcomes: str) -> Any:
        writing.set()
        await gate.wait()
        return await original(self, outcomes)

    monkeypatch.setattr(Worker, "_complete_many", held_write)

    @app.task
    async def quick() -> None:
        pass

    jobs = app.enqueue_many([quick.spec() for _ in range(12)])
    async with background(app, concurrency=2) as (worker, outcomes):
        await asyncio.wait_for(writing.wait(), outcomes.HANG_GUARD)

        async def backlog_full() -> None:
            while worker.in_flight < 4:  # 2 outcomes in the held write + 2 waiting
                await asyncio.wait_for(worker._wake.wait(), outcomes.HANG_GUARD)
                await asyncio.sleep(0)

        await asyncio.wait_for(backlog_full(), outcomes.HANG_GUARD)
        assert worker.in_flight == 4  # not the 12 the queue holds
        assert worker._free_slots() == 0
        gate.set()
        for _ in jobs:
            await outcomes.next()
    assert {app.get_job(j.id).state for j in jobs} == {JobState.SUCCEEDED}


async def test_stop_releases_unfinished_attempts_back_to_pending(app: App, background: Any) -> None:
    started_async = asyncio.Event()
    started_sync = asyncio.Event()
    loop = asyncio.get_running_loop()

    @app.task
    async def endless_async() -> None:
        started_async.set()
        await asyncio.Event().wait()

    @app.task(pass_context=True)
    def endless_sync(ctx: JobContext) -> None:
        loop.call_soon_threadsafe(started_sync.set)
        ctx.wait_for_cancel(60)  # stops when the worker gives up on it

    a = await endless_async.defer_async()
    s = await endless_sync.defer_async()
    async with background(app, shutdown_grace=0.0) as (worker, outcomes):
        await asyncio.wait_for(started_async.wait(), outcomes.HANG_GUARD)
        await asyncio.wait_for(started_sync.wait(), outcomes.HANG_GUARD)
        assert worker.in_flight == 2
    for job in (a, s):
        back = app.get_job(job.id)
        assert back.state is JobState.PENDING
        assert back.attempts == 0  # a released attempt does not count
        [execution] = app.list_executions(job.id)
        assert execution.state is ExecutionState.RELEASED
        assert [e.event_type for e in app.audit_events(job.id)] == ["job.released"]


async def test_stop_waits_for_attempts_that_finish_within_the_grace_period(
    app: App, background: Any
) -> None:
    started = asyncio.Event()
    loop = asyncio.get_running_loop()
    finish = threading.Event()

    @app.task
    def short() -> str:
        loop.call_soon_threadsafe(started.set)
        finish.wait(60)
        return "finished"

    job = short.defer()
    async with background(app, shutdown_grace=60.0) as (worker, outcomes):
        await asyncio.wait_for(started.wait(), outcomes.HANG_GUARD)
        worker.request_stop()  # stop claiming; the attempt may finish
        finish.set()
    done = app.get_job(job.id)
    assert done.state is JobState.SUCCEEDED and done.result == "finished"


async def test_a_second_stop_request_ends_the_grace_period_already_begun(
    app: App, background: Any, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, "tickwork.worker")
    started = asyncio.Event()
    waiting = asyncio.Event()
    loop = asyncio.get_running_loop()

    class DrainWaits(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            if record.getMessage() == "waiting for in-flight attempts":
                loop.call_soon_threadsafe(waiting.set)

    @app.task
    async def endless() -> None:
        started.set()
        await asyncio.Event().wait()

    job = await endless.defer_async()
    watcher = DrainWaits()
    logging.getLogger("tickwork.worker").addHandler(watcher)
    try:
        async with background(app, shutdown_grace=600.0) as (worker, outcomes):
            await asyncio.wait_for(started.wait(), outcomes.HANG_GUARD)
            worker.request_stop()  # the drain waits out its 600 s ...
            await asyncio.wait_for(waiting.wait(), outcomes.HANG_GUARD)
            worker.request_stop(immediate=True)  # ... until this; background's guard is 60 s
    finally:
        logging.getLogger("tickwork.worker").removeHandler(watcher)
    back = app.get_job(job.id)
    assert (back.state, back.attempts) == (JobState.PENDING, 0)
    assert [e.state for e in app.list_executions(job.id)] == [ExecutionState.RELEASED]


async def test_a_released_sync_handler_that_returns_later_changes_nothing(
    app: App, background: Any
) -> None:
    started = asyncio.Event()
    loop = asyncio.get_running_loop()
    go_on, returned = threading.Event(), threading.Event()

    @app.task
    def blocked() -> str:
        loop.call_soon_threadsafe(started.set)
        try:
            go_on.wait(60)
            return "late"
        finally:
            returned.set()

    job = blocked.defer()
    async with background(app, shutdown_grace=600.0) as (worker, outcomes):
        await asyncio.wait_for(started.wait(), outcomes.HANG_GUARD)
        worker.request_stop(immediate=True)
    # the worker stopped without joining the thread: its handler still runs
    assert worker.handlers_running == 1 and not returned.is_set()
    go_on.set()
    assert await asyncio.to_thread(returned.wait, outcomes.HANG_GUARD)
    back = app.get_job(job.id)
    assert (back.state, back.attempts, back.result) == (JobState.PENDING, 0, None)
    assert [e.state for e in app.list_executions(job.id)] == [ExecutionState.RELEASED]


async def test_a_pass_that_drops_its_cancellation_does_not_hold_shutdown(
    app: App, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Python 3.11's asyncio.wait_for drops a cancellation that arrives while the awaited
    # thing completes (the pool hands out connections that way): the retention pass below
    # does the same, and the process's services must still stop instead of waiting out the
    # interval.
    from tickwork.queue.retention import PruneResult, Retention

    entered = asyncio.Event()

    async def dropping_pass(self: Retention) -> PruneResult:
        entered.set()
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            pass  # dropped, as wait_for does
        return PruneResult(0, False)

    monkeypatch.setattr(Retention, "run_once", dropping_pass)
    host = app.services(await app.db.async_pool(), {"executor", "retention"})
    running = asyncio.create_task(host.run())
    await asyncio.wait_for(entered.wait(), 60)
    host.request_stop()
    await asyncio.wait_for(running, 60)  # fails after this hang guard
    await app.aclose()


async def test_worker_connections_keep_the_options_of_the_url(
    database_url: str, schema: str, clean: None
) -> None:
    # the worker adds its plan settings to the URL's options instead of replacing them
    url = make_conninfo(database_url, options="-c statement_timeout=12345")
    app = App(database_url=url, schema=schema)
    worker = app.worker()
    await worker.open()
    try:
        for pool, plan in (
            (worker._pool, "force_custom_plan"),
            (worker._claim_pool, "force_generic_plan"),
        ):
            assert pool is not None
            async with pool.connection() as conn:
                cur = await conn.execute(
                    "SELECT current_setting('statement_timeout'),"
                    " current_setting('plan_cache_mode'), current_setting('jit')"
                )
                assert await cur.fetchone() == ("12345ms", plan, "off")
        async with (await app.db.async_pool()).connection() as conn:
            cur = await conn.execute("SELECT current_setting('statement_timeout')")
            assert await cur.fetchone() == ("12345ms",)
    finally:
        await worker.close()
        await app.aclose()


async def test_worker_registers_and_marks_itself_stopped(
    app: App, sql: psycopg.Connection[Any]
) -> None:
    async with app.worker(queues=["a", "b"], concurrency=3) as worker:
        row = sql.execute(
            "SELECT queues, concurrency, stopped_at FROM workers WHERE id = %s", [worker.id]
        ).fetchone()
        assert row == (["a", "b"], 3, None)
    stopped = sql.execute("SELECT stopped_at FROM workers WHERE id = %s", [worker.id]).fetchone()
    assert stopped is not None and stopped[0] is not None


def test_worker_options_are_validated(app: App) -> None:
    with pytest.raises(ConfigError, match=r"lease_ttl \(5.0s\) must be greater"):
        app.worker(lease_ttl=5, lease_renew_interval=10)
    with pytest.raises(ConfigError, match="concurrency"):
        app.worker(concurrency=0)
    with pytest.raises(ConfigError, match=r"worker\.queues"):
        app.worker(queues=["bad queue!"])


async def test_a_failed_attempt_logs_why(app: App, caplog: pytest.LogCaptureFixture) -> None:
    @app.task(max_attempts=2)
    def breaks(order: int) -> None:
        raise ValueError(f"order {order} has no lines")

    breaks.defer(order=42)
    caplog.set_level(logging.WARNING, logger="tickwork.worker")
    async with app.worker() as worker:
        await worker.run_once()
    (record,) = [r for r in caplog.records if r.getMessage() == "attempt finished"]
    assert record.__dict__["outcome"] == "FAILED"
    assert record.__dict__["error_type"] == "ValueError"
    assert record.__dict__["error"] == "order 42 has no lines"
