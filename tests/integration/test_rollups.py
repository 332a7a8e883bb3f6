"""The rollups of finished work add up to the rows they summarise: after every kind of change
(completions, failures, dead letters, reclaims, cancels, retries, retention) the counts that
queue stats, /metrics and signal stats read without touching the history equal a full count
of the tables, before the rollup pass has folded the tallies and after."""

from __future__ import annotations

import asyncio
from collections import Counter
from typing import Any

import psycopg
import pytest

from tickwork import App, FixedBackoff, JobState
from tickwork.auth import Role as UserRole
from tickwork.ops import metrics
from tickwork.ops.rollups import Rollups, recount
from tickwork.queue import admin
from tickwork.queue.retention import Retention
from tickwork.services.leases import Role
from tickwork.signals import Reactor, ReactorContext, Signal
from tickwork.signals import admin as signal_admin

from .api_support import start_api

STATES = ("pending", "running", "failed", "succeeded", "cancelled", "dead_letter")


def job_truth(sql: psycopg.Connection[Any]) -> dict[str, dict[str, int]]:
    """Every queue's jobs by state, counted in full."""
    truth: dict[str, dict[str, int]] = {}
    for queue, state, n in sql.execute("SELECT queue, state, count(*) FROM jobs GROUP BY 1, 2"):
        truth.setdefault(queue, dict.fromkeys(STATES, 0))[state.lower()] = n
    return truth


async def job_stats(app: App) -> dict[str, dict[str, int]]:
    """The same, as queue stats report it (live states from the indexes, the rest rolled up)."""
    found = await admin.queue_stats(await app.db.async_pool(), app.db.store)
    return {q.name: {s: getattr(q, s) for s in STATES} for q in found}


async def check_jobs(app: App, sql: psycopg.Connection[Any]) -> None:
    """Queue stats equal the full count, with the tallies unfolded, then folded."""
    assert await job_stats(app) == job_truth(sql)
    await Rollups(await app.db.async_pool(), app.db.store).run_once()
    assert sql.execute("SELECT count(*) FROM tallies").fetchone() == (0,)
    assert await job_stats(app) == job_truth(sql)


def minutes(sql: psycopg.Connection[Any], subject: str) -> Counter[tuple[str, str]]:
    """Arrivals per (name, state) in the folded minutes."""
    found = sql.execute(
        "SELECT name, state, sum(n) FROM tally_minutes WHERE subject = %s GROUP BY 1, 2",
        [subject],
    )
    return Counter({(name, state): int(n) for name, state, n in found})


async def test_job_rollups_add_up_after_every_kind_of_change(
    app: App, sql: psycopg.Connection[Any], database_url: str, schema: str
) -> None:
    @app.task(queue="q1", max_attempts=1)
    def ok() -> None:
        pass

    @app.task(queue="q1", max_attempts=1)
    def broken() -> None:
        raise RuntimeError("no")

    @app.task(queue="q2", max_attempts=3, backoff=FixedBackoff(3600))
    def later() -> None:
        raise RuntimeError("again later")

    for _ in range(5):
        ok.defer()
    dead = [broken.defer() for _ in range(3)]
    waiting = [later.defer() for _ in range(2)]
    await check_jobs(app, sql)  # pending only

    async with app.worker(queues=["q1", "q2"], concurrency=20) as worker:
        await worker.run_once()
    assert app.get_job(waiting[0].id).state is JobState.FAILED
    await check_jobs(app, sql)

    # cancels: one pending, one awaiting its retry
    pending = ok.defer()
    app.cancel(pending.id)
    app.cancel(waiting[0].id)
    # a manual retry takes a dead letter out of DEAD_LETTER (and it dies again)
    app.retry(dead[0].id)
    await check_jobs(app, sql)
    async with app.worker(queues=["q1"], concurrency=20) as worker:
        await worker.run_once()
    await check_jobs(app, sql)

    # a lease that expired: the watchdog reclaims it into DEAD_LETTER (attempts exhausted)
    lost = broken.defer()
    async with app.worker(queues=["q1"]) as worker:
        claimed = await worker._claim(1)
    assert [job.id for job, _, _ in claimed] == [lost.id]
    await check_jobs(app, sql)  # one RUNNING, counted through its live execution
    sql.execute("UPDATE executions SET lease_expires_at = now() - interval '1 second'")
    async with (await app.db.async_pool()).connection() as conn:
        reclaimed = await app.db.store.execution_reclaim_expired(conn, limit=10, actor="test")
    assert [r["state"] for r in reclaimed] == ["DEAD_LETTER"]
    await check_jobs(app, sql)

    # retention: everything finished, aged past its window, goes, and leaves the totals
    sql.execute("UPDATE jobs SET finished_at = finished_at - interval '30 days'")
    pruner = App(database_url=database_url, schema=schema, retention={"batch": 2})
    retention = Retention(await pruner.db.async_pool(), pruner.db.store, pruner.settings.retention)
    assert (await retention.run_once()).deleted == 5 + 3 + 1 + 2  # ok, dead, lost, cancelled
    await pruner.aclose()
    await check_jobs(app, sql)
    assert job_truth(sql) == {"q2": dict.fromkeys(STATES, 0) | {"failed": 1}}

    # the minutes keep what arrived, whatever retention deleted since
    assert minutes(sql, "job") == Counter(
        {
            ("q1", "SUCCEEDED"): 5,
            ("q1", "DEAD_LETTER"): 3 + 1 + 1,  # three, one again after its retry, the lost one
            ("q1", "CANCELLED"): 1,
            ("q2", "CANCELLED"): 1,
            ("q2", "FAILED"): 2,  # attempts that failed with a retry due
        }
    )
    # and /metrics reads the same counts
    text, _ = await metrics.render(await app.db.async_pool(), app.db.store, None)
    assert 'tickwork_jobs{queue="q2",state="FAILED"} 1.0' in text.decode()
    assert 'tickwork_jobs{queue="q2",state="SUCCEEDED"} 0.0' in text.decode()


async def test_rollups_stay_exact_while_workers_and_folds_run_at_once(
    app: App, sql: psycopg.Connection[Any], database_url: str, schema: str
) -> None:
    """Two workers (each its own pool) complete jobs while two rollup passes fold and a
    recount counts the tables again, each in a loop: no tally is lost, folded twice or
    counted twice."""

    @app.task(queue="busy", max_attempts=1)
    def tick(n: int) -> None:
        if n % 7 == 0:
            raise RuntimeError("seventh")

    app.enqueue_many([tick.spec(n=n) for n in range(2000)])
    other = App(database_url=database_url, schema=schema)
    other.task(queue="busy", max_attempts=1, name=tick.name)(tick.fn)
    stop = asyncio.Event()

    async def fold(pool_of: App) -> int:
        rollups = Rollups(await pool_of.db.async_pool(), pool_of.db.store)
        folded = 0
        while not stop.is_set():
            folded += await rollups.run_once()
            await asyncio.sleep(0)
        return folded

    async def drain(which: App) -> None:
        async with which.worker(queues=["busy"], concurrency=50) as worker:
            while (await worker.run_once()).claimed:
                pass

    async def recount_meanwhile() -> int:
        pool = await app.db.async_pool()
        done = 0
        while not stop.is_set():
            await recount(pool, app.db.store)  # holds new tallies back while it counts
            done += 1
            await asyncio.sleep(0)
        return done

    folds = [asyncio.create_task(fold(app)), asyncio.create_task(fold(other))]
    recounts = asyncio.create_task(recount_meanwhile())
    await asyncio.gather(drain(app), drain(other))
    stop.set()
    await asyncio.gather(*folds)
    assert await recounts >= 1
    await other.aclose()
    truth = job_truth(sql)
    assert truth["busy"]["succeeded"] + truth["busy"]["dead_letter"] == 2000
    assert truth["busy"]["dead_letter"] == len(range(0, 2000, 7))
    await check_jobs(app, sql)
    assert sum(minutes(sql, "job").values()) == 2000


async def test_recount_makes_the_totals_again_after_states_written_by_hand(
    app: App, sql: psycopg.Connection[Any]
) -> None:
    @app.task(queue="q", max_attempts=1)
    def ok() -> None:
        pass

    jobs = [ok.defer() for _ in range(3)]
    sql.execute(
        "UPDATE jobs SET state = 'SUCCEEDED', finished_at = now() WHERE id = %s", [jobs[0].id]
    )
    assert (await job_stats(app))["q"]["succeeded"] == 0  # hand-written: not tallied
    assert await recount(await app.db.async_pool(), app.db.store) == 1
    assert await job_stats(app) == job_truth(sql)


class Flaky(Reactor):
    """Handles T; fails while told to."""

    name = "flaky"
    handles = frozenset({"T"})
    organisation_scoped = False

    def __init__(self) -> None:
        self.failing = False

    async def handle_signal(self, signal: Signal, ctx: ReactorContext) -> None:
        if self.failing:
            raise RuntimeError("down")


async def test_signal_rollups_add_up_after_every_kind_of_change(
    database_url: str, schema: str, clean: None, sql: psycopg.Connection[Any]
) -> None:
    app = App(
        database_url=database_url,
        schema=schema,
        signals={
            "processor": {"max_retries": 0, "backoff": 1, "stuck_after": 60},
            "debounce": {"T": 0},
            "reactors": {"flaky": {"enabled": True}},
        },
    )
    reactor = Flaky()
    app.add_reactor(reactor)
    pool = await app.db.async_pool()
    runtime = app.signal_runtime(pool, holder_id="test-holder")
    await runtime.leases.run_once()
    assert runtime.leases.holds(Role.SIGNAL_MASTER)

    def truth() -> dict[tuple[str, str], int]:
        found = sql.execute("SELECT status, signal_type, count(*) FROM signals GROUP BY 1, 2")
        return {(status, kind): n for status, kind, n in found}

    async def check() -> None:
        for _ in range(2):  # unfolded, then folded
            stats = await signal_admin.stats(pool, app.db.store)
            assert {(r.status.value, r.signal_type): r.count for r in stats} == truth()
            await Rollups(pool, app.db.store).run_once()

    try:
        for key in range(3):
            app.signals.emit("T", aggregate_key=f"k{key}")
        await check()
        await runtime.processor.run_once()  # three COMPLETED
        await check()

        cancelled = app.signals.emit("T", aggregate_key="cancel-me")
        await signal_admin.cancel(pool, app.db.store, cancelled.signal_id, "user:ops")
        await check()

        # a processor died on it past its retries: the next claim makes it DEAD
        poison = app.signals.emit("T", aggregate_key="poison")
        sql.execute(
            "UPDATE signals SET status = 'PROCESSING', claimed_at = now() - interval '1 hour'"
            " WHERE id = %s",
            [poison.signal_id],
        )
        await runtime.processor.run_once()
        assert truth()[("DEAD", "T")] == 1
        await check()
        await signal_admin.retry(
            pool, app.db.store, poison.signal_id, "user:ops"
        )  # DEAD -> PENDING
        await check()
        await runtime.processor.run_once()
        await check()

        # a reactor's dead delivery replayed takes a COMPLETED signal back to PROCESSING
        reactor.failing = True
        replayed = app.signals.emit("T", aggregate_key="replay")
        await runtime.processor.run_once()
        assert truth()[("COMPLETED", "T")] == 6
        held = await signal_admin.held_control(
            pool, app.db.store, Role.SIGNAL_MASTER, runtime.control, app.reactors
        )
        await signal_admin.retry_delivery(
            pool, app.db.store, replayed.signal_id, "flaky", "user:ops", held=held
        )
        assert ("PROCESSING", "T") in truth()
        await check()
        reactor.failing = False
        await runtime.processor.run_once()
        await check()

        # retention purges the settled ones
        sql.execute("UPDATE signals SET processed_at = now() - interval '400 days'")
        async with pool.connection() as conn:
            assert await app.db.store.signal_purge(conn, older_than=86400, limit=100) == 6
        await check()
        assert truth() == {}
        assert minutes(sql, "signal") == Counter({("T", "COMPLETED"): 7, ("T", "DEAD"): 1})
    finally:
        await app.aclose()


@pytest.mark.parametrize("bucket", ["minute", "hour"])
async def test_throughput_buckets_the_minutes(app: App, bucket: str) -> None:
    @app.task(queue="tp", max_attempts=1)
    def ok() -> None:
        pass

    for _ in range(4):
        ok.defer()
    async with app.worker(queues=["tp"]) as worker:
        await worker.run_once()
    pool = await app.db.async_pool()
    # not folded yet, then folded: the same answer
    first = await admin.throughput(pool, app.db.store, bucket=bucket)
    await Rollups(pool, app.db.store).run_once()
    second = await admin.throughput(pool, app.db.store, queue="tp", bucket=bucket)
    for found in (first, second):
        assert found["succeeded"] == 4 and found["dead_letter"] == 0
        [only] = found["buckets"]
        assert (only["queue"], only["succeeded"]) == ("tp", 4)
    assert (await admin.throughput(pool, app.db.store, queue="other"))["buckets"] == []


async def test_the_api_counts_a_listing_only_when_asked_and_caps_the_count(
    app: App, sql: psycopg.Connection[Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    @app.task(queue="counted", max_attempts=1)
    def ok() -> None:
        pass

    app.enqueue_many([ok.spec() for _ in range(12)])
    async for api in start_api(app):
        viewer = api.headers(UserRole.VIEWER)
        page = (await api.client.get("/api/jobs?limit=5", headers=viewer)).json()
        assert page["total"] is None and len(page["items"]) == 5
        counted = await api.client.get("/api/jobs?limit=5&count=true", headers=viewer)
        assert counted.json()["total"] == {"count": 12, "capped": False}
        monkeypatch.setattr(admin, "MAX_COUNT", 10)
        capped = await api.client.get("/api/jobs?count=true&queue=counted", headers=viewer)
        assert capped.json()["total"] == {"count": 10, "capped": True}
        none = await api.client.get("/api/jobs?count=true&queue=elsewhere", headers=viewer)
        assert none.json() == {
            "items": [],
            "next_cursor": None,
            "total": {"count": 0, "capped": False},
        }
        bad = await api.client.get("/api/jobs?count=maybe", headers=viewer)
        assert bad.status_code == 400 and "count" in bad.text

        async with app.worker(queues=["counted"], concurrency=20) as worker:
            await worker.run_once()
        chart = await api.client.get(
            "/api/queues/throughput?bucket=minute&queue=counted", headers=viewer
        )
        assert chart.status_code == 200, chart.text
        assert chart.json()["succeeded"] == 12 and chart.json()["queue"] == "counted"
        for query, field in (
            ("bucket=week", "bucket"),
            ("from=2026-01-02T00:00:00Z&to=2026-01-01T00:00:00Z", "to"),
            ("from=2020-01-01T00:00:00Z&bucket=minute", "from"),  # too many buckets
            ("queue=" + "q" * 300, "queue"),
        ):
            refused = await api.client.get(f"/api/queues/throughput?{query}", headers=viewer)
            assert refused.status_code == 400, (query, refused.text)
            assert field in refused.text
        anonymous = await api.client.get("/api/queues/throughput")
        assert anonymous.status_code == 401
