"""When the scheduler passes, on real PostgreSQL: at each fire time whatever its tick, at
once when another connection writes a schedule, every fire time while it is live and the
misfire policy only after downtime; a cron finer than ``scheduler.min_interval`` is refused."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
from collections.abc import AsyncIterator, Awaitable, Callable
from datetime import datetime, timedelta
from typing import Any

import psycopg
import pytest
from psycopg_pool import AsyncConnectionPool

from tickwork import App
from tickwork.auth import Role as UserRole
from tickwork.definitions import admin as definitions
from tickwork.errors import ScheduleError
from tickwork.schedule import admin as schedules
from tickwork.schedule.scheduler import Scheduler, SchedulerService
from tickwork.services.leases import LeaseManager, Role

from .api_support import start_api

HANG_GUARD = 60.0  # not a timing assertion: only stops a broken test from hanging
LONG_TICK = 3600.0
"""A tick that never comes during a test: whatever fires, fires without it."""


@pytest.fixture
async def pool(app: App) -> AsyncIterator[AsyncConnectionPool[Any]]:
    async with AsyncConnectionPool(app.db.url, kwargs={"autocommit": True}) as p:
        yield p


def scheduler(app: App, pool: AsyncConnectionPool[Any], **options: Any) -> Scheduler:
    return Scheduler(
        pool, app.db.store, lambda name: app.tasks[name].options if name in app.tasks else None,
        **options,
    )  # fmt: skip


@contextlib.asynccontextmanager
async def running(
    app: App, pool: AsyncConnectionPool[Any], the_scheduler: Scheduler
) -> AsyncIterator[SchedulerService]:
    """The scheduler service holding the SCHEDULER lease, on a tick that never comes,
    listening for schedule changes; stopped at the end."""
    leases = LeaseManager(pool, app.db.store, app.settings.leases, [Role.SCHEDULER])
    assert Role.SCHEDULER in (await leases.run_once()).held
    service = SchedulerService(
        the_scheduler,
        leases,
        interval=LONG_TICK,
        connect=lambda: app.db.connect_listener("test-scheduler"),
    )
    stop = asyncio.Event()
    task = asyncio.create_task(service.run(stop))
    try:
        await asyncio.wait_for(service.listening.wait(), HANG_GUARD)
        yield service
    finally:
        stop.set()
        await asyncio.wait_for(task, HANG_GUARD)
        await leases.release()


def fire_times(sql: psycopg.Connection[Any], schedule: str) -> list[datetime]:
    return [
        r[0]
        for r in sql.execute(
            "SELECT j.fire_time FROM jobs j JOIN schedules s ON s.id = j.schedule_id"
            " WHERE s.name = %s ORDER BY j.fire_time",
            [schedule],
        )
    ]


async def until(condition: Callable[[], Any], what: str) -> Any:
    """``condition`` (a read of what the scheduler wrote) once it holds."""
    async with asyncio.timeout(HANG_GUARD):
        while not (found := condition()):  # noqa: ASYNC110 (rows another task writes)
            await asyncio.sleep(0.05)
    assert found, what
    return found


def consecutive(times: list[datetime], step: timedelta) -> bool:
    """None doubled, none lost: ``step`` apart from the first to the last."""
    gaps = {b - a for a, b in itertools.pairwise(times)}
    return len(times) == len(set(times)) and gaps <= {step}


async def test_a_live_scheduler_fires_every_fire_time_whatever_its_tick(
    app: App, pool: AsyncConnectionPool[Any], sql: psycopg.Connection[Any]
) -> None:
    @app.schedule("* * * * * *", name="every-second")  # misfire ONCE, the default
    @app.task(queue="ticks")
    def tick() -> None:
        pass

    the_scheduler = scheduler(app, pool)
    await the_scheduler.sync(list(app.schedules.values()))
    async with running(app, pool, the_scheduler):
        times = await until(
            lambda: (t := fire_times(sql, "every-second")) and len(t) >= 4 and t,
            "four fire times",
        )
    assert consecutive(fire_times(sql, "every-second"), timedelta(seconds=1))
    assert len(times) >= 4  # in seconds, with a tick of an hour


async def test_a_late_pass_runs_every_fire_time_of_the_catch_up_window(
    app: App, pool: AsyncConnectionPool[Any], sql: psycopg.Connection[Any]
) -> None:
    @app.schedule("* * * * * *", name="every-second", misfire="ONCE")
    @app.task
    def tick() -> None:
        pass

    the_scheduler = scheduler(app, pool, catch_up=timedelta(seconds=60))
    await the_scheduler.sync(list(app.schedules.values()))
    # the scheduler was live but its pass is 20 s late (a lost wake-up, a failover)
    sql.execute("UPDATE schedules SET next_run_at = date_trunc('second', now()) - interval '20s'")
    result = await the_scheduler.run_once()
    assert (len(result.fired), result.missed) == (21, 0)  # every one, not ONCE's one
    assert consecutive([f.fire_time for f in result.fired], timedelta(seconds=1))


@pytest.mark.parametrize(("policy", "runs"), [("ONCE", 1), ("SKIP", 1), ("ALL", 3)])
async def test_the_misfire_policy_decides_after_downtime(
    app: App, pool: AsyncConnectionPool[Any], sql: psycopg.Connection[Any], policy: str, runs: int
) -> None:
    @app.schedule("* * * * * *", name="every-second", misfire=policy, misfire_limit=3)
    @app.task
    def tick() -> None:
        pass

    the_scheduler = scheduler(app, pool, catch_up=timedelta(seconds=60))
    await the_scheduler.sync(list(app.schedules.values()))
    # no scheduler ran for ten minutes: longer than the catch-up window
    sql.execute("UPDATE schedules SET next_run_at = date_trunc('second', now()) - interval '10m'")
    result = await the_scheduler.run_once()
    assert len(result.fired) == runs  # SKIP: the latest is less than 60 s late, so it runs
    assert result.missed >= 600 - runs
    assert consecutive([f.fire_time for f in result.fired], timedelta(seconds=1))


async def test_a_real_downtime_is_missed_and_a_live_scheduler_is_not(
    app: App, pool: AsyncConnectionPool[Any], sql: psycopg.Connection[Any]
) -> None:
    """The service stopped for longer than the catch-up window (2 s here): ONCE runs one job
    for the gap; before and after, every fire time has its job."""

    @app.schedule("* * * * * *", name="every-second")
    @app.task
    def tick() -> None:
        pass

    def seen() -> list[datetime]:
        return fire_times(sql, "every-second")

    the_scheduler = scheduler(app, pool, catch_up=timedelta(seconds=2))
    await the_scheduler.sync(list(app.schedules.values()))
    async with running(app, pool, the_scheduler):
        await until(lambda: len(seen()) >= 2, "two fire times")
    before = seen()
    down = sql.execute("SELECT now()").fetchone()
    assert down is not None
    await until(
        lambda: sql.execute("SELECT now() > %s + interval '5s'", [down[0]]).fetchone() == (True,),
        "five seconds of downtime on the database clock",
    )
    async with running(app, pool, the_scheduler):
        await until(lambda: len(seen()) >= len(before) + 3, "the scheduler to go on")
    after = seen()[len(before) :]
    assert consecutive(before, timedelta(seconds=1))
    assert after[0] - before[-1] >= timedelta(seconds=5)  # the gap: one job, for its latest
    assert consecutive(after, timedelta(seconds=1))  # live again: every fire time


def writers(app: App, other: AsyncConnectionPool[Any]) -> dict[str, Callable[[], Awaitable[Any]]]:
    """Each way a schedule is written, by name of the schedule it writes."""
    definition = {"name": "d", "kind": "http", "http": {"url": "https://a.example/"}}
    schedule = {
        "name": "api", "task": "woken.code", "args": {}, "cron": "* * * * * *",
        "timezone": "UTC", "queue": None, "priority": None, "misfire": "ONCE",
        "misfire_limit": 1, "overlap": "ALLOW", "enabled": True,
    }  # fmt: skip
    other_app = App(database_url=app.db.url, schema=app.settings.schema_name)
    other_app.task(name="woken.code")(lambda: None)
    other_app.add_schedule("code", "woken.code", "* * * * * *")
    return {
        "definition:1": lambda: definitions.create(
            other, app.db.store, definition | {"cron": "* * * * * *"}, actor="test"
        ),
        "api": lambda: schedules.create(
            other,
            app.db.store,
            schedule,
            check_task=lambda task, args: app.tasks[task].options,
            actor="test",
        ),
        "code": lambda: scheduler(other_app, other).sync(list(other_app.schedules.values())),
    }


@pytest.mark.parametrize("written", ["definition:1", "api", "code"])
async def test_a_schedule_written_by_another_connection_wakes_the_scheduler(
    app: App, pool: AsyncConnectionPool[Any], sql: psycopg.Connection[Any], written: str
) -> None:
    @app.task(name="woken.code")
    def code() -> None:
        pass

    async with (
        running(app, pool, scheduler(app, pool)) as service,
        AsyncConnectionPool(app.db.url, kwargs={"autocommit": True}) as other,
    ):
        # its first pass, and the one on listening, found nothing: it sleeps out its hour
        await until(lambda: service.passes >= 2, "the scheduler to go to sleep")
        await writers(app, other)[written]()
        await until(lambda: fire_times(sql, written), f"{written} to fire")


async def test_a_cron_finer_than_the_limit_is_refused_naming_it(
    database_url: str, schema: str, clean: None
) -> None:
    app = App(database_url=database_url, schema=schema, scheduler={"min_interval": 5})
    try:

        @app.task(name="limited")
        def limited() -> None:
            pass

        with pytest.raises(ScheduleError, match=r"cron .*every 5 s \(scheduler.min_interval\)"):
            app.add_schedule("fine", limited, "* * * * * *")
        app.add_schedule("five", limited, "*/5 * * * * *")  # at the limit: accepted
        async for api in start_api(app):
            headers = api.headers(UserRole.ADMIN)
            refused = await api.client.post(
                "/api/schedules",
                json={"name": "fine", "task": "limited", "cron": "*/2 * * * * *"},
                headers=headers,
            )
            assert refused.status_code == 400, refused.text
            assert refused.json()["field"] == "cron", refused.text
            assert "2 s apart" in refused.json()["detail"], refused.text
            assert "every 5 s (scheduler.min_interval)" in refused.json()["detail"]
            definition = {"name": "d", "kind": "http", "http": {"url": "https://a.example/"}}
            refused = await api.client.post(
                "/api/definitions", json=definition | {"cron": "0,1 * * * * *"}, headers=headers
            )
            assert refused.status_code == 400 and refused.json()["field"] == "cron", refused.text
            created = await api.client.post(
                "/api/definitions", json=definition | {"cron": "*/5 * * * * *"}, headers=headers
            )
            assert created.status_code == 201, created.text
            path = f"/api/definitions/{created.json()['id']}"
            edited = await api.client.patch(path, json={"cron": "* * * * * *"}, headers=headers)
            assert edited.status_code == 400 and edited.json()["field"] == "cron", edited.text
    finally:
        await app.aclose()


def test_every_second_is_accepted_by_default(app: App) -> None:
    @app.task(name="fast")
    def fast() -> None:
        pass

    spec = app.add_schedule("every-second", fast, "* * * * * *")
    assert spec.cron.expression == "* * * * * *"
