"""A stored schedule enqueues the same job from any process, and a schedule whose code is gone
can be deleted."""

from __future__ import annotations

import socket
from collections.abc import AsyncIterator
from typing import Any

import psycopg
import pytest
from psycopg_pool import AsyncConnectionPool

from tickwork import App
from tickwork.errors import ConflictError, NotFoundError
from tickwork.schedule import admin
from tickwork.schedule.scheduler import Scheduler


@pytest.fixture
async def pool(app: App) -> AsyncIterator[AsyncConnectionPool[Any]]:
    async with AsyncConnectionPool(app.db.url, kwargs={"autocommit": True}) as p:
        yield p


def knowing(app: App, pool: AsyncConnectionPool[Any]) -> Scheduler:
    """A scheduler of a process that registers ``app``'s tasks."""
    return Scheduler(
        pool,
        app.db.store,
        lambda name: app.tasks[name].options if name in app.tasks else None,
    )


def backdate(sql: psycopg.Connection[Any], name: str) -> None:
    sql.execute("UPDATE schedules SET next_run_at = '2026-01-01T00:00:00Z' WHERE name = %s", [name])


async def test_a_lease_holder_without_the_task_enqueues_it_as_the_task_registers_it(
    app: App, pool: AsyncConnectionPool[Any], sql: psycopg.Connection[Any], database_url: str
) -> None:
    sql.execute("TRUNCATE schedules")

    @app.schedule("* * * * *", name="beat")
    @app.task(name="elsewhere.beat", queue="beats", priority=7, max_attempts=4, timeout=30.0)
    def beat() -> None:
        pass

    app.add_schedule("beat-urgent", beat, "* * * * *", queue="urgent", priority=9)
    await knowing(app, pool).sync(list(app.schedules.values()))
    backdate(sql, "beat")
    backdate(sql, "beat-urgent")
    # the SCHEDULER lease holder is a process without the task (a serve started without the
    # application): it enqueues from what the schedule stored
    bare = App(database_url=database_url, schema=app.settings.schema_name)
    fired = (await Scheduler(pool, bare.db.store, lambda name: None).run_once()).fired
    jobs = {f.schedule: app.get_job(f.job_id) for f in fired}
    got = {n: (j.queue, j.priority, j.max_attempts, j.timeout) for n, j in jobs.items()}
    assert got == {"beat": ("beats", 7, 4, 30.0), "beat-urgent": ("urgent", 9, 4, 30.0)}
    triggered = bare.trigger_schedule("beat", actor="test")
    bare.close()
    assert (triggered.queue, triggered.max_attempts, triggered.timeout) == ("beats", 4, 30.0)


async def test_an_operator_schedule_follows_its_task_into_another_queue(
    app: App, pool: AsyncConnectionPool[Any], sql: psycopg.Connection[Any], database_url: str
) -> None:
    sql.execute("TRUNCATE schedules")
    old = App(database_url=database_url, schema=app.settings.schema_name)

    @old.task(name="moved.report", queue="reports")
    def report() -> None:
        pass

    await admin.create(
        pool,
        app.db.store,
        {
            "name": "report-nightly",
            "task": "moved.report",
            "args": {},
            "cron": "0 3 * * *",
            "timezone": "UTC",
            "queue": None,
            "priority": None,
            "misfire": "ONCE",
            "misfire_limit": 100,
            "overlap": "ALLOW",
            "enabled": True,
        },
        check_task=lambda task, args: old.tasks[task].options,
        actor="test",
    )

    @app.task(name="moved.report", queue="reports-v2", max_attempts=2)
    def report_v2() -> None:
        pass

    await knowing(app, pool).sync([])  # a process with the new registration starts
    backdate(sql, "report-nightly")
    fired = (await Scheduler(pool, app.db.store, lambda name: None).run_once()).fired
    job = app.get_job(fired[0].job_id)
    assert (job.queue, job.max_attempts) == ("reports-v2", 2)


async def test_a_code_schedule_is_deleted_once_no_live_worker_defines_it(
    app: App, pool: AsyncConnectionPool[Any], sql: psycopg.Connection[Any]
) -> None:
    sql.execute("TRUNCATE schedules")

    @app.schedule("* * * * *", name="from-code")
    @app.task(name="gone.task")
    def gone() -> None:
        pass

    stopping, crashing = app.worker(queues=["none"]), app.worker(queues=["none"])
    for worker in (stopping, crashing):
        await worker.open()  # registered as a live worker
        await knowing(app, pool).sync(list(app.schedules.values()), defined_by=worker.id)
    store = app.db.store
    with pytest.raises(ConflictError, match=f"running \\({socket.gethostname()} pid"):
        await admin.delete(pool, store, "from-code", actor="test")
    await stopping.close()  # stopped cleanly
    with pytest.raises(ConflictError):  # the other one still defines it
        await admin.delete(pool, store, "from-code", actor="test")
    # the other dies without a word: not seen for longer than a live worker ever is
    sql.execute(
        "UPDATE workers SET last_seen_at = now() - interval '1 day' WHERE id = %s", [crashing.id]
    )
    await admin.delete(pool, store, "from-code", actor="test")
    with pytest.raises(NotFoundError):
        await admin.get(pool, store, "from-code")
    event = sql.execute(
        "SELECT actor, metadata FROM audit_events WHERE event_type = 'schedule.deleted'"
    ).fetchall()
    assert event == [("test", {"origin": "code"})]
    with pytest.raises(NotFoundError):
        await admin.delete(pool, store, "from-code", actor="test")
    await crashing.close()
