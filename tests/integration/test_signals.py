"""Signals and sweeps on real PostgreSQL: squash-on-emit, the processor's routing, per-reactor
retry, scoping, dry-run, recovery, leases, sweeps, retention and operator actions. The clock is
driven through the database (moving process_after / next_retry_at), never by sleeping."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import psycopg
import pytest

from tickwork import App
from tickwork.errors import (
    InvalidInput,
    NotFoundError,
    NotLeaderError,
    SignalError,
    SignalSupersededError,
)
from tickwork.ops.metrics import REGISTRY
from tickwork.services.leases import Role
from tickwork.signals import Reactor, ReactorContext, Signal
from tickwork.signals import admin as signal_admin
from tickwork.signals.runtime import SignalRuntime


class Recorder(Reactor):
    """Counts what it handled; can be told to fail; writes a job through ctx.conn."""

    def __init__(
        self, name: str, handles: set[str], *, scoped: bool = False, cron: str | None = None
    ) -> None:
        self.name = name
        self.handles = frozenset(handles)
        self.organisation_scoped = scoped
        self.sweep_cron = cron
        self.seen: list[int] = []
        self.dry_runs: list[bool] = []
        self.fail_with: Exception | None = None
        self.swept = 0
        self.sweep_fails = False
        self.app: App | None = None

    async def handle_signal(self, signal: Signal, ctx: ReactorContext) -> None:
        self.seen.append(signal.id)
        self.dry_runs.append(ctx.dry_run)
        if self.app is not None:  # a write in the delivery's transaction
            await self.app.enqueue_async("signals.follow_up", {"signal": signal.id}, conn=ctx.conn)
        if self.fail_with is not None:
            raise self.fail_with

    async def sweep(self, ctx: ReactorContext) -> None:
        self.swept += 1
        if self.sweep_fails:
            raise RuntimeError("sweep exploded")


def make_app(database_url: str, schema: str, **signals: Any) -> App:
    settings = {
        "processor": {"max_retries": 1, "backoff": 1, "backoff_cap": 10, "stuck_after": 60},
        "debounce": {"RESULT_SET_CHANGED": 60, "PAYMENT_COMPLETED": 0},
        "reactors": {
            "a": {"enabled": True},
            "b": {"enabled": True},
            "scoped": {"enabled": True, "organisations": ["7"]},
            "empty": {"enabled": True},
        },
    } | signals
    app = App(database_url=database_url, schema=schema, signals=settings)

    @app.task(name="signals.follow_up", queue="signals-q")
    def follow_up(signal: int) -> None:
        return None

    return app


@pytest.fixture
async def env(
    database_url: str, schema: str, clean: None
) -> AsyncIterator[tuple[App, SignalRuntime]]:
    app = make_app(database_url, schema)
    pool = await app.db.async_pool()
    runtime = app.signal_runtime(pool, holder_id="test-holder")
    await runtime.leases.run_once()
    assert runtime.leases.holds(Role.SIGNAL_MASTER) and runtime.leases.holds(Role.SWEEP_MASTER)
    yield app, runtime
    await app.aclose()


async def dry_run(runtime: SignalRuntime, reactor: str) -> None:
    """Override a reactor's dry-run switch as the admin API does (stored for the lease
    holder, this runtime), and take it up as the next pass would."""
    both = [Role.SIGNAL_MASTER, Role.SWEEP_MASTER]
    holders = await signal_admin.set_switch(
        runtime.pool, runtime.store, f"dry_run:{reactor}", True, both
    )
    assert holders == [runtime.leases.holder_id]
    await runtime.sync_control()


def shift(sql: psycopg.Connection[Any], seconds: float, column: str = "process_after") -> None:
    """Move time forward by moving the deadlines back."""
    sql.execute(
        f"UPDATE signals SET {column} = {column} - make_interval(secs => %s)"
        f" WHERE {column} IS NOT NULL",
        [seconds],
    )


def rows(sql: psycopg.Connection[Any], query: str, *params: Any) -> list[tuple[Any, ...]]:
    return sql.execute(query, params).fetchall()


# -- squash on emit -----------------------------------------------------------------------


async def test_worked_example_fifty_emits_one_signal_processed_once(
    env: tuple[App, SignalRuntime], sql: psycopg.Connection[Any]
) -> None:
    app, runtime = env
    recalc = app.add_reactor(Recorder("a", {"RESULT_SET_CHANGED"}))
    assert isinstance(recalc, Recorder)
    labels = {"signal_type": "RESULT_SET_CHANGED"}
    squashed_before = REGISTRY.get_sample_value("tickwork_signals_squashed_total", labels) or 0
    first = await app.signals.emit_async("RESULT_SET_CHANGED", "ResultSet", 1, "series:8", 7)
    assert not first.squashed
    shift(sql, 30)  # thirty seconds of imports pass
    for n in range(2, 51):
        emitted = await app.signals.emit_async(
            "RESULT_SET_CHANGED", "ResultSet", n, "series:8", 7, {"result": n}
        )
        assert emitted.squashed and emitted.signal_id == first.signal_id
    (pending,) = rows(sql, "SELECT id, payload, updated_at IS NOT NULL FROM signals")
    assert pending == (first.signal_id, {"result": 50}, True)  # payload: the latest emit
    (slid,) = rows(sql, "SELECT process_after > now() + interval '59 s' FROM signals")
    assert slid == (True,)  # the window slid: 60 s from the last emit, not from the first
    squashed = REGISTRY.get_sample_value("tickwork_signals_squashed_total", labels) or 0
    assert squashed - squashed_before == 49  # the squash metric counts them

    shift(sql, 59)
    await runtime.processor.run_once()
    assert recalc.seen == []  # still inside the window
    shift(sql, 2)  # sixty seconds of quiet
    await runtime.processor.run_once()
    await runtime.processor.run_once()
    assert recalc.seen == [first.signal_id]  # one recalculation covering all 50 results
    assert rows(sql, "SELECT status FROM signals") == [("COMPLETED",)]


async def test_zero_window_never_squashes_and_unconfigured_types_get_a_window(
    env: tuple[App, SignalRuntime], sql: psycopg.Connection[Any]
) -> None:
    app, _ = env
    one = app.signals.emit("PAYMENT_COMPLETED", "Order", 1, "order:1")
    two = app.signals.emit("PAYMENT_COMPLETED", "Order", 1, "order:1")
    assert one.signal_id != two.signal_id and not two.squashed
    assert rows(sql, "SELECT DISTINCT aggregate_key FROM signals") == [(None,)]
    other = app.signals.emit("UNCONFIGURED", "Thing", 1, "thing:1")
    again = app.signals.emit("UNCONFIGURED", "Thing", 1, "thing:1")
    assert again.squashed and again.signal_id == other.signal_id  # the default window is not 0


def test_bad_emits_are_refused_naming_the_field(env: tuple[App, SignalRuntime]) -> None:
    app, _ = env
    with pytest.raises(SignalError, match=r"signal_type \(''\)"):
        app.signals.emit("")
    with pytest.raises(SignalError, match="payload"):
        app.signals.emit("X", payload={"when": object()})
    with pytest.raises(SignalError, match="aggregate_key"):
        app.signals.emit("X", aggregate_key="k" * 201)


async def test_emit_joins_the_callers_transaction(
    env: tuple[App, SignalRuntime], database_url: str, sql: psycopg.Connection[Any]
) -> None:
    app, _ = env
    with psycopg.connect(database_url) as conn:
        app.signals.emit("RESULT_SET_CHANGED", aggregate_key="series:1", conn=conn)
        conn.rollback()
    assert rows(sql, "SELECT count(*) FROM signals") == [(0,)]


async def test_concurrent_producers_never_duplicate_a_pending_key_nor_fail(
    env: tuple[App, SignalRuntime], database_url: str, sql: psycopg.Connection[Any]
) -> None:
    app, _ = env
    keys = [f"series:{k}" for k in range(3)]

    async def producer(n: int) -> int:
        done = 0
        async with await psycopg.AsyncConnection.connect(database_url) as conn:
            for i in range(10):
                async with conn.transaction():
                    await conn.execute("SELECT 1")  # the caller's own work
                    await app.signals.emit_async(
                        "RESULT_SET_CHANGED", aggregate_key=keys[(n + i) % 3], conn=conn
                    )
                    await conn.execute("SELECT 1")  # still usable: nothing went wrong
                done += 1
        return done

    results = await asyncio.gather(*(producer(n) for n in range(20)))
    assert sum(results) == 200
    assert rows(sql, "SELECT aggregate_key, count(*) FROM signals GROUP BY 1 ORDER BY 1") == [
        (k, 1) for k in keys
    ]


# -- processing -----------------------------------------------------------------------------


async def test_a_signal_without_reactors_completes_at_once(
    env: tuple[App, SignalRuntime], sql: psycopg.Connection[Any]
) -> None:
    app, runtime = env
    app.signals.emit("NOBODY_LISTENS", aggregate_key="x")
    shift(sql, 3600)
    result = await runtime.processor.run_once()
    assert result is not None and [p.status.value for p in result.processed] == ["COMPLETED"]


async def test_per_reactor_retry_runs_only_the_failed_reactor_then_dead(
    env: tuple[App, SignalRuntime], sql: psycopg.Connection[Any]
) -> None:
    app, runtime = env
    a = Recorder("a", {"RESULT_SET_CHANGED"})
    b = Recorder("b", {"RESULT_SET_CHANGED"})
    b.fail_with = RuntimeError("downstream timeout")
    app.add_reactor(a)
    app.add_reactor(b)
    sig = app.signals.emit("RESULT_SET_CHANGED", aggregate_key="series:9")
    shift(sql, 3600)
    await runtime.processor.run_once()
    assert (a.seen, b.seen) == ([sig.signal_id], [sig.signal_id])
    detail = await signal_admin.get_signal(runtime.pool, runtime.store, sig.signal_id)
    assert detail.signal.status.value == "PROCESSING" and detail.signal.next_retry_at is not None
    assert {d.reactor_name: d.status.value for d in detail.deliveries} == {
        "a": "COMPLETED",
        "b": "FAILED",
    }
    await runtime.processor.run_once()
    assert len(b.seen) == 1  # the retry is not due yet

    shift(sql, 3600, "next_retry_at")
    sql.execute("UPDATE signal_reactor_status SET next_retry_at = now() - interval '1 s'")
    await runtime.processor.run_once()
    assert a.seen == [sig.signal_id]  # A is not run again
    assert b.seen == [sig.signal_id, sig.signal_id]  # B retried once: max_retries = 1, now DEAD
    detail = await signal_admin.get_signal(runtime.pool, runtime.store, sig.signal_id)
    assert detail.signal.status.value == "COMPLETED"
    assert {d.reactor_name: d.status.value for d in detail.deliveries}["b"] == "DEAD"
    assert detail.signal.error_message is not None
    assert "b: RuntimeError: downstream timeout" in detail.signal.error_message


async def held(app: App, runtime: SignalRuntime) -> signal_admin.HeldControl:
    """The SIGNAL_MASTER holder's switches and reactors (this runtime's), as the API sees
    them."""
    return await signal_admin.held_control(
        runtime.pool,
        runtime.store,
        Role.SIGNAL_MASTER,
        runtime.control,
        app.reactors,
        here=runtime.leases.holder_id,
    )


async def test_status_failed_lists_signals_with_a_failed_reactor_and_a_dead_delivery_replays(
    env: tuple[App, SignalRuntime], sql: psycopg.Connection[Any]
) -> None:
    app, runtime = env
    pool, store = runtime.pool, runtime.store
    a = Recorder("a", {"RESULT_SET_CHANGED"})
    b = Recorder("b", {"RESULT_SET_CHANGED"})
    b.fail_with = RuntimeError("downstream timeout")
    app.add_reactor(a)
    app.add_reactor(b)
    broken = app.signals.emit("RESULT_SET_CHANGED", aggregate_key="series:1")
    healthy = app.signals.emit("PAYMENT_COMPLETED", aggregate_key="p:1")  # no reactor fails it
    shift(sql, 3600)
    await runtime.processor.run_once()

    async def listed(*status: str) -> list[int]:
        where = signal_admin.SignalFilter.parse(status=list(status))
        return [s.id for s in (await signal_admin.list_signals(pool, store, where)).items]

    assert await listed("FAILED") == [broken.signal_id]  # b FAILED, awaiting its retry
    assert await listed("failed,COMPLETED") == [healthy.signal_id, broken.signal_id]
    with pytest.raises(InvalidInput, match="is not a signal status or FAILED"):
        await listed("BROKEN")
    with pytest.raises(InvalidInput, match="only a DEAD one"):  # FAILED: the processor's
        await signal_admin.retry_delivery(
            pool, store, broken.signal_id, "b", "user:ops", held=await held(app, runtime)
        )

    sql.execute("UPDATE signal_reactor_status SET next_retry_at = now() - interval '1 s'")
    sql.execute("UPDATE signals SET next_retry_at = now() - interval '1 s'")
    await runtime.processor.run_once()  # b's one retry fails: DEAD, the signal COMPLETED
    detail = await signal_admin.get_signal(pool, store, broken.signal_id)
    assert detail.signal.status.value == "COMPLETED"
    assert await listed("FAILED") == [broken.signal_id]  # a DEAD delivery still shows
    with pytest.raises(InvalidInput, match="only a DEAD signal"):  # the signal is COMPLETED
        await signal_admin.retry(pool, store, broken.signal_id, "user:ops")

    b.fail_with = None  # fixed downstream; the operator replays b's delivery
    replayed = await signal_admin.retry_delivery(
        pool, store, broken.signal_id, "b", "user:ops", held=await held(app, runtime)
    )
    assert replayed.status.value == "PROCESSING"
    await runtime.processor.run_once()
    assert a.seen == [broken.signal_id]  # the completed reactor is not run again
    assert b.seen == [broken.signal_id] * 3
    detail = await signal_admin.get_signal(pool, store, broken.signal_id)
    assert detail.signal.status.value == "COMPLETED" and detail.signal.error_message is None
    assert {d.reactor_name: d.status.value for d in detail.deliveries} == {
        "a": "COMPLETED",
        "b": "COMPLETED",
    }
    assert await listed("FAILED") == []
    audited = sql.execute(
        "SELECT actor, metadata->>'reactor' FROM audit_events"
        " WHERE event_type = 'signal.delivery_retried' AND target_id = %s",
        (str(broken.signal_id),),
    ).fetchall()
    assert audited == [("user:ops", "b")]
    with pytest.raises(NotFoundError):
        await signal_admin.retry_delivery(
            pool, store, broken.signal_id, "nope", "user:ops", held=await held(app, runtime)
        )
    with pytest.raises(NotFoundError):
        await signal_admin.retry_delivery(
            pool, store, 10**12, "b", "user:ops", held=await held(app, runtime)
        )


class Replayer(Recorder):
    """Replays another reactor's DEAD delivery of the signal it handles, as an operator
    would through the API, while the processor's pass over that signal is under way."""

    replay: str | None = None
    env: tuple[App, SignalRuntime] | None = None

    async def handle_signal(self, signal: Signal, ctx: ReactorContext) -> None:
        await super().handle_signal(signal, ctx)
        if self.replay is not None and self.env is not None:
            pool, store = self.env[1].pool, self.env[1].store
            control = await held(*self.env)
            await signal_admin.retry_delivery(
                pool, store, signal.id, self.replay, "user:ops", held=control
            )


async def test_a_delivery_replayed_during_a_pass_runs_at_the_next_pass(
    env: tuple[App, SignalRuntime], sql: psycopg.Connection[Any]
) -> None:
    """a's DEAD delivery is replayed after a's turn in a pass (reactors run by name) and
    before the pass settles the signal: the settle must leave the signal due, not complete
    it over the replay (which would drop a's retry without a trace)."""
    app, runtime = env
    pool, store = runtime.pool, runtime.store
    a = Recorder("a", {"RESULT_SET_CHANGED"})
    b = Replayer("b", {"RESULT_SET_CHANGED"})
    app.add_reactor(a)
    app.add_reactor(b)
    a.fail_with = b.fail_with = RuntimeError("down")
    sig = app.signals.emit("RESULT_SET_CHANGED", aggregate_key="series:9")
    shift(sql, 3600)
    await runtime.processor.run_once()  # both FAILED
    sql.execute("UPDATE signal_reactor_status SET status = 'DEAD' WHERE reactor_name = 'a'")
    sql.execute("UPDATE signal_reactor_status SET next_retry_at = now() - interval '1 s'")
    sql.execute("UPDATE signals SET next_retry_at = now() - interval '1 s'")
    a.fail_with = b.fail_with = None
    b.replay, b.env = "a", env

    await runtime.processor.run_once()  # a (DEAD) passed over; b completes, replaying a
    detail = await signal_admin.get_signal(pool, store, sig.signal_id)
    assert detail.signal.status.value == "PROCESSING", detail.signal
    assert [d.reactor_name for d in detail.deliveries] == ["b"]
    b.replay = None
    await runtime.processor.run_once()  # due now: a runs
    assert a.seen == [sig.signal_id] * 2 and b.seen == [sig.signal_id] * 2
    detail = await signal_admin.get_signal(pool, store, sig.signal_id)
    assert detail.signal.status.value == "COMPLETED" and detail.signal.error_message is None
    assert {d.reactor_name: d.status.value for d in detail.deliveries} == {
        "a": "COMPLETED",
        "b": "COMPLETED",
    }


async def test_reactor_writes_commit_with_its_completion_exactly_once(
    env: tuple[App, SignalRuntime], sql: psycopg.Connection[Any]
) -> None:
    app, runtime = env
    good = Recorder("a", {"ORDER_PAID"})
    good.app = app
    bad = Recorder("b", {"ORDER_PAID"})
    bad.app = app
    bad.fail_with = ValueError("after writing")
    app.add_reactor(good)
    app.add_reactor(bad)
    app.signals.emit("ORDER_PAID", aggregate_key="order:1")
    shift(sql, 3600)
    await runtime.processor.run_once()
    shift(sql, 3600, "next_retry_at")
    sql.execute("UPDATE signal_reactor_status SET next_retry_at = now() - interval '1 s'")
    await runtime.processor.run_once()
    # good enqueued once (committed with COMPLETED); bad's enqueues were rolled back twice
    assert rows(sql, "SELECT count(*) FROM jobs WHERE task = 'signals.follow_up'") == [(1,)]


async def test_organisation_scoping_fails_closed(
    env: tuple[App, SignalRuntime], sql: psycopg.Connection[Any]
) -> None:
    app, runtime = env
    scoped = Recorder("scoped", {"T"}, scoped=True, cron="* * * * *")
    empty = Recorder("empty", {"T"}, scoped=True, cron="* * * * *")
    app.add_reactor(scoped)
    app.add_reactor(empty)
    inside = app.signals.emit("T", aggregate_key="1", organisation_id=7)
    outside = app.signals.emit("T", aggregate_key="2", organisation_id=8)
    nobody = app.signals.emit("T", aggregate_key="3")  # no organisation at all
    shift(sql, 3600)
    result = await runtime.processor.run_once()
    assert result is not None
    assert scoped.seen == [inside.signal_id]  # rule 1: outside the set is skipped; rule 2 too
    assert empty.seen == []  # an empty set means none
    statuses = rows(sql, "SELECT id, status FROM signals ORDER BY id")
    assert statuses == [(s.signal_id, "COMPLETED") for s in (inside, outside, nobody)]
    runs = {
        r.reactor: r
        for r in [await runtime.sweeps.run(r, trigger="manual") for r in (scoped, empty)]
    }
    assert runs["scoped"].outcome == "COMPLETED" and scoped.swept == 1
    assert runs["empty"].outcome == "SKIPPED" and empty.swept == 0  # rule 3
    assert runs["empty"].reason == "organisation-scoped with an empty organisation set"
    assert not runs["empty"].dry_run
    await dry_run(runtime, "empty")  # a skipped run still says it would be dry
    skipped = await runtime.sweeps.run(empty, trigger="manual")
    assert (skipped.outcome, skipped.dry_run) == ("SKIPPED", True)


async def test_dry_run_rolls_back_and_is_recorded(
    env: tuple[App, SignalRuntime], sql: psycopg.Connection[Any]
) -> None:
    app, runtime = env
    a = Recorder("a", {"ORDER_PAID"})
    a.app = app
    app.add_reactor(a)
    await dry_run(runtime, "a")
    app.signals.emit("ORDER_PAID", aggregate_key="order:2")
    shift(sql, 3600)
    await runtime.processor.run_once()
    assert a.dry_runs == [True]
    assert rows(sql, "SELECT count(*) FROM jobs") == [(0,)]
    assert rows(sql, "SELECT status, dry_run FROM signal_reactor_status") == [("COMPLETED", True)]


async def test_a_signal_left_processing_is_recovered_without_rerunning_completed_reactors(
    env: tuple[App, SignalRuntime], sql: psycopg.Connection[Any]
) -> None:
    app, runtime = env
    a = Recorder("a", {"T"})
    b = Recorder("b", {"T"})
    app.add_reactor(a)
    app.add_reactor(b)
    sig = app.signals.emit("T", aggregate_key="k")
    # A processor claimed it, completed reactor a, and died before b and the settle.
    sql.execute("UPDATE signals SET status = 'PROCESSING', claimed_at = now() - interval '1 hour'")
    sql.execute(
        "INSERT INTO signal_reactor_status (signal_id, reactor_name, status)"
        " VALUES (%s, 'a', 'COMPLETED')",
        [sig.signal_id],
    )
    stuck = await signal_admin.stuck(runtime.pool, runtime.store, 60, 50)
    assert [s.id for s in stuck] == [sig.signal_id]
    await runtime.processor.run_once()
    assert (a.seen, b.seen) == ([], [sig.signal_id])
    (status, retries) = rows(sql, "SELECT status, retry_count FROM signals")[0]
    assert (status, retries) == ("COMPLETED", 1)


async def test_only_the_lease_holder_processes_and_sweeps(
    env: tuple[App, SignalRuntime], sql: psycopg.Connection[Any]
) -> None:
    app, holder = env
    a = Recorder("a", {"T"}, cron="* * * * *")
    app.add_reactor(a)
    other = app.signal_runtime(holder.pool, holder_id="other-process")
    await other.leases.run_once()
    assert not other.leases.holds(Role.SIGNAL_MASTER)
    app.signals.emit("T", aggregate_key="k")
    shift(sql, 3600)
    assert await other.processor.run_once() is None
    assert await other.sweeps.run_once() == []
    with pytest.raises(NotLeaderError, match="test-holder"):
        await other.require(Role.SIGNAL_MASTER)
    assert a.seen == []
    # failover: the holder stops; its lease expires; the other takes over
    await holder.leases.release()
    await other.leases.run_once()
    assert other.leases.holds(Role.SIGNAL_MASTER)
    await other.processor.run_once()
    assert len(a.seen) == 1


async def test_sweeps_run_on_their_cron_and_a_failure_stays_scheduled(
    env: tuple[App, SignalRuntime], sql: psycopg.Connection[Any]
) -> None:
    app, runtime = env
    a = Recorder("a", set(), cron="* * * * * *")  # every second
    a.sweep_fails = True
    app.add_reactor(a)
    assert await runtime.sweeps.run_once() == []  # first pass: learns its next fire time
    runtime.sweeps._next["a"] = runtime.sweeps._next["a"].replace(year=2000)  # now due
    (run,) = await runtime.sweeps.run_once()
    assert run.outcome == "FAILED" and "sweep exploded" in (run.reason or "")
    assert runtime.sweeps._next["a"].year > 2000  # still scheduled
    last = rows(sql, "SELECT outcome, trigger FROM sweep_runs")
    assert last == [("FAILED", "schedule")]


async def test_retention_purges_settled_signals_only(
    env: tuple[App, SignalRuntime], sql: psycopg.Connection[Any]
) -> None:
    app, runtime = env
    for status in ("PENDING", "PROCESSING", "COMPLETED", "DEAD"):
        app.signals.emit("T", aggregate_key=status)
        sql.execute(
            "UPDATE signals SET status = %s, created_at = now() - interval '30 days',"
            " processed_at = now() - interval '30 days' WHERE aggregate_key = %s",
            [status, status],
        )
    retention = app.reactors.get("signal-retention")
    assert retention is not None
    run = await runtime.sweeps.run(retention, trigger="manual")
    assert run.outcome == "COMPLETED"
    assert rows(sql, "SELECT status FROM signals ORDER BY status") == [
        ("PENDING",),
        ("PROCESSING",),
    ]


async def test_overrides_of_a_process_that_lost_the_signal_leases_are_dropped(
    env: tuple[App, SignalRuntime], sql: psycopg.Connection[Any]
) -> None:
    _, runtime = env
    # another process once held the signal leases; it still holds SCHEDULER (one holder id
    # for all its leases), which must not keep its signal overrides alive
    sql.execute(
        "INSERT INTO leases (name, holder, acquired_at, renewed_at, expires_at)"
        " VALUES ('SCHEDULER', 'old-holder', now(), now(), now() + interval '1 hour')"
    )
    sql.execute(
        "INSERT INTO signal_overrides (holder, switch, value) VALUES ('old-holder', 'sweeps',"
        " 'false')"
    )
    holders = await signal_admin.set_switch(
        runtime.pool, runtime.store, "processor", False, [Role.SIGNAL_MASTER]
    )
    assert holders == [runtime.leases.holder_id]
    stored = rows(sql, "SELECT holder, switch FROM signal_overrides ORDER BY holder")
    assert stored == [(runtime.leases.holder_id, "processor")]


async def test_overrides_do_not_come_back_with_a_holder_that_lost_the_leases_in_between(
    env: tuple[App, SignalRuntime], sql: psycopg.Connection[Any]
) -> None:
    """A -> B -> A: what was set for A's first tenure does not apply to its second (the
    seed: a change of holder drops the overrides), even when nothing was written while B
    held the leases to clean them up."""
    app, runtime = env
    both = [Role.SIGNAL_MASTER, Role.SWEEP_MASTER]
    holders = await signal_admin.set_switch(runtime.pool, runtime.store, "processor", False, both)
    assert holders == [runtime.leases.holder_id]
    await runtime.sync_control()
    assert runtime.control.processor().effective is False

    # A's leases lapse and B takes them (as B's heartbeat would), then B's lapse and A's
    # heartbeat takes them back
    other = app.signal_runtime(runtime.pool, holder_id="holder-b")
    sql.execute("UPDATE leases SET expires_at = now() - interval '1 s'")
    await other.leases.run_once()
    assert other.leases.holds(Role.SIGNAL_MASTER)
    sql.execute("UPDATE leases SET expires_at = now() - interval '1 s'")
    await runtime.leases.run_once()
    assert runtime.leases.holds(Role.SIGNAL_MASTER)

    await runtime.sync_control()
    assert runtime.control.processor().override is None
    assert runtime.control.processor().effective is True
    held = await signal_admin.held_control(
        runtime.pool, runtime.store, Role.SIGNAL_MASTER, runtime.control, app.reactors
    )
    assert held.switches.processor().override is None
    # a switch set now applies to the new tenure (and the stale row is gone)
    await signal_admin.set_switch(runtime.pool, runtime.store, "sweeps", False, both)
    await runtime.sync_control()
    assert runtime.control.sweeps().effective is False
    assert rows(sql, "SELECT switch FROM signal_overrides") == [("sweeps",)]


async def test_operator_retry_and_cancel(
    env: tuple[App, SignalRuntime], sql: psycopg.Connection[Any]
) -> None:
    app, runtime = env
    pool, store = runtime.pool, runtime.store
    dead = app.signals.emit("T", aggregate_key="k")
    sql.execute("UPDATE signals SET status = 'DEAD'")
    retried = await signal_admin.retry(pool, store, dead.signal_id, "user:ops")
    assert retried.status.value == "PENDING"
    with pytest.raises(InvalidInput, match="only a DEAD signal"):
        await signal_admin.retry(pool, store, dead.signal_id, "user:ops")
    sql.execute("UPDATE signals SET status = 'DEAD'")
    fresher = app.signals.emit("T", aggregate_key="k")
    with pytest.raises(SignalSupersededError) as caught:
        await signal_admin.retry(pool, store, dead.signal_id, "user:ops")
    assert caught.value.superseded_by == fresher.signal_id
    cancelled = await signal_admin.cancel(pool, store, fresher.signal_id, "user:ops")
    assert cancelled.status.value == "COMPLETED"
    with pytest.raises(InvalidInput, match="only a PENDING signal"):
        await signal_admin.cancel(pool, store, fresher.signal_id, "user:ops")
