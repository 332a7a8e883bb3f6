"""Every transition of the job state diagram, driven through a real worker and database."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg
import pytest

from tickwork import (
    App,
    ExecutionState,
    FixedBackoff,
    JobContext,
    JobNotFoundError,
    JobState,
    JobStateError,
)
from tickwork.queue import admin

HANG_GUARD = 60.0  # a sync handler's own guard against hanging a broken test


async def test_pending_running_succeeded_stores_result(app: App) -> None:
    @app.task
    def add(a: int, b: int) -> dict[str, int]:
        return {"sum": a + b}

    job = add.defer(a=2, b=3)
    assert job.state is JobState.PENDING and job.attempts == 0

    async with app.worker() as worker:
        result = await worker.run_once()

    assert result.claimed == 1
    outcome = result.outcomes[0]
    assert outcome.execution_state is ExecutionState.SUCCEEDED
    assert outcome.job_state is JobState.SUCCEEDED
    done = app.get_job(job.id)
    assert done.state is JobState.SUCCEEDED
    assert done.result == {"sum": 5}
    assert done.attempts == 1
    assert done.finished_at is not None
    [execution] = app.list_executions(job.id)
    assert execution.state is ExecutionState.SUCCEEDED
    assert execution.worker_id == worker.id
    assert execution.finished_at is not None and execution.error is None
    # success is recorded by the execution row alone: no audit event on the hot path
    assert app.audit_events(job.id) == []


async def test_running_is_visible_while_the_handler_runs(app: App) -> None:
    seen: dict[str, Any] = {}

    @app.task(pass_context=True)
    def look(ctx: JobContext) -> None:
        seen["job"] = app.get_job(ctx.job.id)
        seen["executions"] = app.list_executions(ctx.job.id)

    job = look.defer()
    async with app.worker() as worker:
        await worker.run_once()

    assert seen["job"].state is JobState.RUNNING
    [live] = seen["executions"]
    assert live.state is ExecutionState.RUNNING
    assert live.lease_expires_at > live.started_at
    assert app.get_job(job.id).state is JobState.SUCCEEDED


async def test_failure_schedules_a_retry_with_backoff_then_succeeds(app: App) -> None:
    @app.task(max_attempts=3, backoff=FixedBackoff(3600), pass_context=True)
    def flaky(ctx: JobContext) -> int:
        if ctx.attempt == 1:
            raise ConnectionError("upstream down")
        return ctx.attempt

    job = flaky.defer()
    async with app.worker() as worker:
        first = await worker.run_once()
        failed = app.get_job(job.id)
        assert first.outcomes[0].execution_state is ExecutionState.FAILED
        assert failed.state is JobState.FAILED
        assert failed.finished_at is None
        assert failed.error is not None and failed.error.type == "ConnectionError"
        assert failed.error.message == "upstream down"
        assert "raise ConnectionError" in failed.error.traceback
        # the backoff (an hour) keeps the retry from being claimed now
        assert failed.run_at > failed.created_at + timedelta(minutes=59)
        assert (await worker.run_once()).claimed == 0

        # FAILED -> PENDING: an operator may skip the wait; the retry then succeeds
        assert app.retry(job.id).state is JobState.PENDING
        second = await worker.run_once()

    assert second.outcomes[0].job_state is JobState.SUCCEEDED
    done = app.get_job(job.id)
    assert done.result == 2 and done.attempts == 2
    states = [e.state for e in app.list_executions(job.id)]
    assert states == [ExecutionState.FAILED, ExecutionState.SUCCEEDED]


async def test_failed_job_is_claimed_again_when_backoff_elapses(app: App) -> None:
    @app.task(max_attempts=2, backoff=FixedBackoff(0))
    def once_broken() -> None:
        raise RuntimeError("boom")

    job = once_broken.defer()
    async with app.worker() as worker:
        await worker.run_once()
        assert app.get_job(job.id).state is JobState.FAILED
        again = await worker.run_once()
    assert again.claimed == 1
    assert again.outcomes[0].job_state is JobState.DEAD_LETTER


async def test_exhausted_attempts_dead_letter_and_manual_retry_keeps_history(app: App) -> None:
    @app.task(max_attempts=2, backoff=FixedBackoff(0))
    def doomed(order: int) -> None:
        raise ValueError(f"order {order} is broken")

    job = doomed.defer(order=7)
    async with app.worker() as worker:
        await worker.run_once()
        await worker.run_once()
        dead = app.get_job(job.id)
        assert dead.state is JobState.DEAD_LETTER
        assert dead.attempts == 2 and dead.finished_at is not None
        assert dead.error is not None and dead.error.message == "order 7 is broken"
        assert (await worker.run_once()).claimed == 0  # dead letters are never claimed

        retried = app.retry(job.id, actor="user:ops@example.com")
        assert retried.state is JobState.PENDING
        assert retried.max_attempts == 3  # one more attempt granted
        assert retried.finished_at is None
        third = await worker.run_once()

    assert third.outcomes[0].job_state is JobState.DEAD_LETTER
    assert [e.attempt for e in app.list_executions(job.id)] == [1, 2, 3]
    events = [(e.event_type, e.actor) for e in app.audit_events(job.id)]
    assert events[0][0] == "job.dead_lettered"
    assert events[1] == ("job.retried", "user:ops@example.com")
    assert events[2][0] == "job.dead_lettered"
    assert app.audit_events(job.id)[1].metadata["from"] == "DEAD_LETTER"

    # the timeline merges the attempts' transitions with the audit trail, in time order
    timeline = app.timeline(job.id)
    worker_actor = f"worker:{app.list_executions(job.id)[0].worker_id}"
    assert [(t.event, t.actor, t.attempt) for t in timeline] == [
        ("job.created", "app", None),
        ("attempt.claimed", worker_actor, 1),
        ("attempt.failed", worker_actor, 1),
        ("attempt.claimed", worker_actor, 2),
        ("attempt.failed", worker_actor, 2),
        ("job.dead_lettered", worker_actor, None),
        ("job.retried", "user:ops@example.com", None),
        ("attempt.claimed", worker_actor, 3),
        ("attempt.failed", worker_actor, 3),
        ("job.dead_lettered", worker_actor, None),
    ]
    assert [t.at for t in timeline] == sorted(t.at for t in timeline)
    assert timeline[2].detail == {"error": "ValueError: order 7 is broken"}
    assert timeline[6].detail == {"from": "DEAD_LETTER", "max_attempts": 3}
    assert await admin.job_timeline(await app.db.async_pool(), app.db.store, job.id) == timeline


async def test_pending_job_cancels_at_once(app: App) -> None:
    @app.task
    def later() -> None:
        raise AssertionError("a cancelled job must never run")

    job = later.configure(run_at=datetime.now(UTC) + timedelta(hours=1)).defer()
    cancelled = app.cancel(job.id, actor="user:a@b.c")
    assert cancelled.state is JobState.CANCELLED
    assert cancelled.finished_at is not None
    async with app.worker() as worker:
        assert (await worker.run_once()).claimed == 0
    [event] = app.audit_events(job.id)
    assert (event.event_type, event.actor, event.metadata) == (
        "job.cancelled",
        "user:a@b.c",
        {"from": "PENDING"},
    )


async def test_cancel_and_retry_refuse_states_they_do_not_apply_to(app: App) -> None:
    @app.task
    def noop() -> None:
        pass

    job = noop.defer()
    with pytest.raises(JobStateError, match=r"cannot retry job \d+ in state PENDING"):
        app.retry(job.id)
    async with app.worker() as worker:
        await worker.run_once()
    with pytest.raises(JobStateError, match="in state SUCCEEDED"):
        app.cancel(job.id)
    with pytest.raises(JobNotFoundError, match="job 999999 does not exist"):
        app.cancel(999_999)
    with pytest.raises(JobNotFoundError):
        app.get_job(999_999)
    assert app.audit_events(job.id) == []  # refused operations leave no trace


async def test_deferred_cancel_of_async_handler(app: App, background: Any) -> None:
    started = asyncio.Event()

    @app.task
    async def export() -> str:
        started.set()
        await asyncio.Event().wait()  # until cancelled
        return "never"

    job = await export.defer_async()
    async with background(app) as (_, outcomes):
        await asyncio.wait_for(started.wait(), outcomes.HANG_GUARD)
        requested = await asyncio.to_thread(app.cancel, job.id)
        # the request is recorded; the running attempt (maybe already) decides the outcome
        assert requested.cancel_requested_at is not None
        outcome = await outcomes.for_job(job.id)

    assert outcome.execution_state is ExecutionState.CANCELLED
    assert outcome.job_state is JobState.CANCELLED
    done = app.get_job(job.id)
    assert done.state is JobState.CANCELLED and done.result is None
    assert [e.event_type for e in app.audit_events(job.id)] == [
        "job.cancel_requested",
        "job.cancelled",
    ]


async def test_deferred_cancel_records_the_attempts_real_outcome(app: App, background: Any) -> None:
    """An attempt that finishes its work despite the request records SUCCEEDED and its
    result; the job still ends CANCELLED."""
    started = asyncio.Event()

    @app.task
    async def careful() -> str:
        started.set()
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            return "flushed partial work"  # cooperative: finish cleanly
        return "unreachable"

    job = await careful.defer_async()
    async with background(app) as (_, outcomes):
        await asyncio.wait_for(started.wait(), outcomes.HANG_GUARD)
        await asyncio.to_thread(app.cancel, job.id)
        outcome = await outcomes.for_job(job.id)

    assert outcome.execution_state is ExecutionState.SUCCEEDED
    done = app.get_job(job.id)
    assert done.state is JobState.CANCELLED
    assert done.result == "flushed partial work"


async def test_sync_handler_observes_cancel_through_its_context(app: App, background: Any) -> None:
    started = asyncio.Event()
    loop = asyncio.get_running_loop()

    @app.task(pass_context=True)
    def crunch(ctx: JobContext) -> str:
        loop.call_soon_threadsafe(started.set)
        if not ctx.wait_for_cancel(timeout=HANG_GUARD):
            return "not cancelled"
        ctx.raise_if_cancelled()
        return "unreachable"

    job = crunch.defer()
    async with background(app) as (_, outcomes):
        await asyncio.wait_for(started.wait(), outcomes.HANG_GUARD)
        await asyncio.to_thread(app.cancel, job.id)
        outcome = await outcomes.for_job(job.id)

    assert outcome.execution_state is ExecutionState.CANCELLED
    assert outcome.error is not None and outcome.error.type == "tickwork.JobCancelled"
    assert app.get_job(job.id).state is JobState.CANCELLED


async def test_attempt_timeout_is_a_failed_attempt(app: App) -> None:
    @app.task(timeout=0.05, max_attempts=1)
    async def too_slow_async() -> None:
        await asyncio.Event().wait()

    @app.task(timeout=0.05, max_attempts=2, backoff=FixedBackoff(3600), pass_context=True)
    def too_slow_sync(ctx: JobContext) -> None:
        ctx.wait_for_cancel(timeout=60)  # the timeout tells a polite handler to stop

    a = too_slow_async.defer()
    s = too_slow_sync.defer()
    async with app.worker() as worker:
        result = await worker.run_once()
    by_job = {o.job_id: o for o in result.outcomes}
    assert by_job[a.id].execution_state is ExecutionState.FAILED
    assert by_job[a.id].error is not None and by_job[a.id].error.type == "tickwork.TaskTimeout"
    assert app.get_job(a.id).state is JobState.DEAD_LETTER
    assert by_job[s.id].error is not None and by_job[s.id].error.type == "tickwork.TaskTimeout"
    assert app.get_job(s.id).state is JobState.FAILED  # retry scheduled


async def test_per_job_timeout_overrides_the_tasks(app: App) -> None:
    @app.task(timeout=60, max_attempts=1)
    async def waits() -> None:
        await asyncio.Event().wait()

    job = waits.configure(timeout=0.05).defer()
    assert job.timeout == 0.05
    async with app.worker() as worker:
        result = await worker.run_once()
    assert result.outcomes[0].error is not None
    assert result.outcomes[0].error.type == "tickwork.TaskTimeout"


async def test_unserialisable_result_fails_the_attempt(app: App) -> None:
    @app.task(max_attempts=1)
    def returns_object() -> object:
        return object()

    job = returns_object.defer()
    async with app.worker() as worker:
        await worker.run_once()
    done = app.get_job(job.id)
    assert done.state is JobState.DEAD_LETTER
    assert done.error is not None and done.error.type == "tickwork.ResultNotSerialisable"


async def queue_stats(app: App) -> list[admin.QueueStats]:
    return await admin.queue_stats(await app.db.async_pool(), app.db.store)


async def test_a_worker_never_claims_a_task_it_lacks_the_job_waits_for_one_that_has_it(
    app: App, database_url: str, schema: str
) -> None:
    @app.task(name="only.in.producer", max_attempts=1)
    def producer_side() -> None:
        pass

    job = producer_side.defer()
    consumer = App(database_url=database_url, schema=schema)  # shares the queue, not the task
    try:
        async with consumer.worker() as worker:
            assert (await worker.run_once()).outcomes == []
            stats = {q.name: q for q in await queue_stats(consumer)}
    finally:
        await consumer.aclose()
    waiting = app.get_job(job.id)
    assert waiting.state is JobState.PENDING and waiting.attempts == 0
    assert [(u.task, u.jobs) for u in stats["default"].unserved] == [("only.in.producer", 1)]
    assert any("only.in.producer" in w for w in app.health().warnings)

    async with app.worker() as worker:  # a worker that has the task runs it
        assert [o.execution_state for o in (await worker.run_once()).outcomes] == [
            ExecutionState.SUCCEEDED
        ]
        # every app also has the built-in runtime tasks, but only a runtime's executor claims
        # them (app.worker(runtime=...)): a plain worker has the app's own tasks alone
        assert worker.task_names == ["only.in.producer"]
        assert "tickwork.script" in app.tasks
        assert [q.unserved for q in await queue_stats(app)] == [[]]
    assert not any("only.in.producer" in w for w in app.health().warnings)


async def test_the_claim_merges_its_tasks_in_priority_then_age_order_past_foreign_jobs(
    app: App, database_url: str, schema: str
) -> None:
    order: list[str] = []

    @app.task(name="a")
    def a(label: str) -> None:
        order.append(label)

    @app.task(name="b")
    def b(label: str) -> None:
        order.append(label)

    foreign = App(database_url=database_url, schema=schema)

    @foreign.task(name="elsewhere")
    def elsewhere(label: str) -> None:
        pass

    try:
        for n in range(5):  # the most urgent jobs belong to a task this worker lacks
            foreign.enqueue("elsewhere", {"label": f"x{n}"}, priority=100)
    finally:
        foreign.close()
    app.enqueue("a", {"label": "a-low"}, priority=-1)
    app.enqueue("b", {"label": "b-high"}, priority=5)
    app.enqueue("a", {"label": "a-mid-old"}, priority=1)
    app.enqueue("b", {"label": "b-mid-new"}, priority=1)
    async with app.worker(concurrency=1) as worker:
        for _ in range(5):
            await worker.run_once()
    assert order == ["b-high", "a-mid-old", "b-mid-new", "a-low"]


async def test_claim_order_priority_then_age_and_run_at(app: App) -> None:
    order: list[str] = []

    @app.task
    def mark(label: str) -> None:
        order.append(label)

    mark.defer(label="old-low")
    mark.configure(priority=10).defer(label="high")
    mark.defer(label="new-low")
    mark.configure(priority=-5).defer(label="lowest")
    mark.configure(run_at=datetime.now(UTC) + timedelta(hours=1)).defer(label="future")
    async with app.worker(concurrency=1) as worker:
        for _ in range(5):
            await worker.run_once()
    assert order == ["high", "old-low", "new-low", "lowest"]


async def test_worker_claims_only_its_queues(app: App) -> None:
    @app.task(queue="mail")
    def send() -> None:
        pass

    job = send.defer()
    async with app.worker(queues=["default"]) as other:
        assert (await other.run_once()).claimed == 0
    async with app.worker(queues=["default", "mail"]) as mail:
        assert (await mail.run_once()).claimed == 1
    assert app.get_job(job.id).state is JobState.SUCCEEDED


async def test_database_enforces_one_live_execution_per_job(
    app: App, sql: psycopg.Connection[Any]
) -> None:
    @app.task
    def noop() -> None:
        pass

    job = noop.defer()
    async with app.worker() as worker:
        claimed = await worker._claim(1)
    assert [claimed_job.id for claimed_job, _, _ in claimed] == [job.id]
    with pytest.raises(psycopg.errors.UniqueViolation):
        sql.execute(
            "INSERT INTO executions (job_id, attempt, worker_id, lease_expires_at)"
            " VALUES (%s, 2, gen_random_uuid(), now())",
            [job.id],
        )
