"""The scheduler tick on real PostgreSQL: idempotent, policy-driven, restart-safe."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from typing import Any

import psycopg
import pytest
from psycopg_pool import AsyncConnectionPool

from tickwork import App, JobState
from tickwork.errors import ScheduleError
from tickwork.schedule.scheduler import Scheduler, SchedulerService
from tickwork.services.leases import LeaseManager, Role


@pytest.fixture
async def pool(app: App) -> AsyncIterator[AsyncConnectionPool[Any]]:
    async with AsyncConnectionPool(app.db.url, kwargs={"autocommit": True}) as p:
        yield p


@pytest.fixture
def sched_table(sql: psycopg.Connection[Any]) -> None:
    sql.execute("TRUNCATE schedules")


def scheduler(app: App, pool: AsyncConnectionPool[Any]) -> Scheduler:
    return Scheduler(
        pool,
        app.db.store,
        lambda name: app.tasks[name].options if name in app.tasks else None,
    )


def backdate(sql: psycopg.Connection[Any], name: str, when: str) -> None:
    sql.execute("UPDATE schedules SET next_run_at = %s::timestamptz WHERE name = %s", [when, name])


async def test_due_fire_time_becomes_exactly_one_job(
    app: App, pool: AsyncConnectionPool[Any], sql: psycopg.Connection[Any], sched_table: None
) -> None:
    @app.schedule("* * * * *", args={"who": "ops"})
    @app.task(queue="reports", priority=7)
    def report(who: str) -> None:
        pass

    s = scheduler(app, pool)
    await s.sync(list(app.schedules.values()))
    assert (await s.run_once()).fired == []  # next fire time is in the future
    backdate(sql, report.name, "2026-01-01T00:00:00Z")
    first = await s.run_once()
    assert [f.schedule for f in first.fired] == [report.name]
    job = app.get_job(first.fired[0].job_id)
    assert (job.state, job.queue, job.priority, job.args) == (
        JobState.PENDING,
        "reports",
        7,
        {"who": "ops"},
    )
    assert job.schedule_id is not None and job.fire_time == first.fired[0].fire_time
    assert job.created_by == f"schedule:{report.name}"
    # the schedule moved on: the same tick again creates nothing
    assert (await s.run_once()).fired == []
    # replaying the same fire time (a retried tick) cannot create a second job
    backdate(sql, report.name, first.fired[0].fire_time.isoformat())
    await s.run_once()
    count = sql.execute(
        "SELECT count(*) FROM jobs WHERE fire_time = %s", [first.fired[0].fire_time]
    ).fetchone()
    assert count == (1,)


async def test_concurrent_schedulers_fire_each_time_once(
    app: App, pool: AsyncConnectionPool[Any], sql: psycopg.Connection[Any], sched_table: None
) -> None:
    @app.schedule("@yearly", misfire="ALL", misfire_limit=50)
    @app.task
    def yearly() -> None:
        pass

    schedulers = [scheduler(app, pool) for _ in range(5)]
    await schedulers[0].sync(list(app.schedules.values()))
    backdate(sql, yearly.name, "2000-01-01T00:00:00Z")
    results = await asyncio.gather(*(s.run_once() for s in schedulers))
    fired = [f.fire_time for r in results for f in r.fired]
    expected_years = datetime.now(UTC).year - 2000 + 1
    assert len(fired) == len(set(fired)) == expected_years  # every year once, none twice
    jobs = sql.execute("SELECT count(*) FROM jobs").fetchone()
    assert jobs == (expected_years,)


@pytest.mark.parametrize(("policy", "expected"), [("ONCE", 1), ("SKIP", 0), ("ALL", 3)])
async def test_misfire_policy_after_downtime(
    app: App,
    pool: AsyncConnectionPool[Any],
    sql: psycopg.Connection[Any],
    sched_table: None,
    policy: str,
    expected: int,
) -> None:
    @app.schedule("@yearly", misfire=policy, misfire_limit=3)
    @app.task
    def yearly() -> None:
        pass

    s = scheduler(app, pool)
    await s.sync(list(app.schedules.values()))
    backdate(sql, yearly.name, "2010-01-01T00:00:00Z")  # many years of downtime
    result = await s.run_once()
    assert len(result.fired) == expected
    if policy == "ONCE":  # the one job stands for the latest missed fire time
        assert result.fired[0].fire_time == datetime(datetime.now(UTC).year, 1, 1, tzinfo=UTC)
    next_run = sql.execute("SELECT next_run_at FROM schedules").fetchone()
    assert next_run is not None and next_run[0] > datetime.now(UTC)  # caught up either way


async def test_overlap_skip_waits_for_the_previous_job(
    app: App, pool: AsyncConnectionPool[Any], sql: psycopg.Connection[Any], sched_table: None
) -> None:
    @app.schedule("* * * * *", overlap="SKIP")
    @app.task
    def minutely() -> None:
        pass

    s = scheduler(app, pool)
    await s.sync(list(app.schedules.values()))
    backdate(sql, minutely.name, "2026-01-01T00:00:00Z")
    assert len((await s.run_once()).fired) == 1
    backdate(sql, minutely.name, "2026-01-01T00:05:00Z")
    skipped = await s.run_once()
    assert skipped.fired == [] and skipped.overlapped == 1  # the first job is still PENDING


async def test_code_schedules_upsert_by_name_keeping_their_next_fire_time(
    app: App, pool: AsyncConnectionPool[Any], sql: psycopg.Connection[Any], sched_table: None
) -> None:
    @app.task
    def nightly() -> None:
        pass

    app.add_schedule("nightly", nightly, "0 3 * * *", timezone="Europe/Berlin")
    s = scheduler(app, pool)
    await s.sync(list(app.schedules.values()))
    backdate(sql, "nightly", "2030-01-01T00:00:00Z")  # as if set by an earlier run
    await s.sync(list(app.schedules.values()))  # a restart with the same definition
    rows = sql.execute("SELECT next_run_at, timezone FROM schedules").fetchall()
    assert rows == [(datetime(2030, 1, 1, tzinfo=UTC), "Europe/Berlin")]
    other = App(database_url=app.db.url, schema=app.settings.schema_name)
    other.task(name=nightly.name)(lambda: None)
    other.add_schedule("nightly", nightly.name, "0 4 * * *", timezone="Europe/Berlin")
    await s.sync(list(other.schedules.values()))  # a changed cron recomputes next_run_at
    changed = sql.execute("SELECT cron, next_run_at FROM schedules").fetchone()
    assert changed is not None and changed[0] == "0 4 * * *"
    assert changed[1] != datetime(2030, 1, 1, tzinfo=UTC)


def test_bad_schedule_definitions_are_refused(app: App) -> None:
    @app.task
    def job(n: int) -> None:
        pass

    with pytest.raises(ScheduleError, match=r"cron \('\* \* \*'\)"):
        app.add_schedule("a", job, "* * *", args={"n": 1})
    with pytest.raises(ScheduleError, match="timezone"):
        app.add_schedule("b", job, "* * * * *", timezone="Nowhere/Land", args={"n": 1})
    with pytest.raises(ScheduleError, match="misfire"):
        app.add_schedule("c", job, "* * * * *", misfire="SOMETIMES", args={"n": 1})
    with pytest.raises(Exception, match="missing a required argument: 'n'"):
        app.add_schedule("d", job, "* * * * *")
    app.add_schedule("e", job, "* * * * *", args={"n": 1})
    with pytest.raises(ScheduleError, match="already a schedule"):
        app.add_schedule("e", job, "* * * * *", args={"n": 1})


async def test_pause_resume_and_trigger(
    app: App, pool: AsyncConnectionPool[Any], sql: psycopg.Connection[Any], sched_table: None
) -> None:
    @app.schedule("* * * * *", name="minutely")
    @app.task(queue="cron")
    def minutely() -> None:
        pass

    s = scheduler(app, pool)
    await s.sync(list(app.schedules.values()))
    assert app.pause_schedule("minutely").paused
    backdate(sql, "minutely", "2026-01-01T00:00:00Z")
    assert (await s.run_once()).fired == []  # paused: not due
    await s.sync(list(app.schedules.values()))  # a restart keeps the operator's pause
    assert [x.paused for x in app.list_schedules()] == [True]
    assert not app.pause_schedule("minutely", paused=False).paused
    assert len((await s.run_once()).fired) == 1
    triggered = app.trigger_schedule("minutely", actor="user:ops")
    assert (triggered.queue, triggered.created_by) == ("cron", "user:ops")
    assert triggered.schedule_id is not None and triggered.fire_time is not None
    with pytest.raises(ScheduleError, match=r"name \('nope'\) is not a stored schedule"):
        app.trigger_schedule("nope")
    with pytest.raises(ScheduleError, match="not a stored schedule"):
        app.pause_schedule("nope")


async def test_disabled_schedule_is_not_ticked_and_resumes_from_now(
    app: App, pool: AsyncConnectionPool[Any], sql: psycopg.Connection[Any], sched_table: None
) -> None:
    @app.schedule("* * * * *", name="minutely", misfire="ALL")
    @app.task
    def minutely() -> None:
        pass

    s = scheduler(app, pool)
    await s.sync(list(app.schedules.values()))
    assert not app.enable_schedule("minutely", enabled=False).enabled
    backdate(sql, "minutely", "2026-01-01T00:00:00Z")
    assert (await s.run_once()).fired == []
    enabled = app.enable_schedule("minutely")
    assert enabled.enabled and enabled.next_run_at > datetime(2026, 1, 1, tzinfo=UTC)
    assert (await s.run_once()).fired == []  # the disabled window is not made up for


async def test_a_pass_of_a_lapsed_lease_holder_fires_nothing(
    app: App, pool: AsyncConnectionPool[Any], sql: psycopg.Connection[Any], sched_table: None
) -> None:
    """The lease is checked inside the pass's own statement, on the database's clock: a pass
    that reaches the server after the holder's lease ended (delayed on its way, as by a healed
    partition) creates no job, though the holder still believed it held the lease."""

    @app.schedule("* * * * *")
    @app.task
    def report() -> None:
        pass

    leases = LeaseManager(pool, app.db.store, app.settings.leases, [Role.SCHEDULER])
    assert Role.SCHEDULER in (await leases.run_once()).held
    service = SchedulerService(scheduler(app, pool), leases, interval=3600.0)
    await service.scheduler.sync(list(app.schedules.values()))
    backdate(sql, report.name, "2026-01-01T00:00:00Z")
    sql.execute("UPDATE leases SET expires_at = now() - interval '1 second'")
    assert leases.holds(Role.SCHEDULER)  # what the holder believes: its clock said so
    lapsed = await service.run_once()
    assert lapsed is not None and lapsed.fired == []
    assert sql.execute("SELECT count(*) FROM jobs").fetchone() == (0,)

    sql.execute("UPDATE leases SET expires_at = now() + interval '1 minute'")
    live = await service.run_once()
    assert live is not None and [f.schedule for f in live.fired] == [report.name]
    await leases.release()
