"""Schedules on one ``tickwork serve`` at the default settings (a 30 s scheduler tick, misfire
ONCE): every fire time gets exactly one job, created when it comes due, for a schedule
defined in code and for an operator's definition stored (by the CLI, another process) while
the scheduler sleeps."""

from __future__ import annotations

import json
import os
import statistics
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import psycopg
import pytest

from tickwork.schedule.cron import CronSchedule

from ..figures import record
from .support import serving, tickwork, wait_for

pytestmark = pytest.mark.e2e
HERE = Path(__file__).parent
WATCHED = timedelta(seconds=62)
"""How long the fire times are watched: a minute of them."""
ON_TIME = timedelta(seconds=1)
"""A scheduled job is created within this of its fire time (the guarantee of
docs/schedules.md, shown by the figures this test records, not asserted: a test holds no
timing threshold a loaded machine could cross)."""
WOKEN = timedelta(seconds=10)
"""What the test asserts instead: far under the 30 s tick, so a scheduler that waits for its
tick instead of waking at the fire time fails it."""


def jobs_of(sql: psycopg.Connection[Any], schedule: str) -> list[tuple[datetime, datetime]]:
    """(fire time, created at) of each job of ``schedule``, by fire time."""
    return [
        (fire, created)
        for fire, created in sql.execute(
            "SELECT j.fire_time, j.created_at FROM jobs j JOIN schedules s"
            " ON s.id = j.schedule_id WHERE s.name = %s ORDER BY j.fire_time",
            [schedule],
        )
    ]


def db_now(sql: psycopg.Connection[Any]) -> datetime:
    row = sql.execute("SELECT now()").fetchone()
    assert row is not None
    now: datetime = row[0]
    return now


def test_every_fire_time_gets_one_job_when_it_comes_due(
    app: Any, sql: psycopg.Connection[Any], db_env: dict[str, str], tmp_path: Path
) -> None:
    env = dict(db_env, PYTHONPATH=os.pathsep.join([str(HERE), db_env.get("PYTHONPATH", "")]))
    with serving(env, tmp_path, "--app", "schedule_timing_app:app") as (process, _url, _out):
        # stored by another process while the scheduler sleeps out its 30 s tick
        wait_for(lambda: jobs_of(sql, "every-five"), "the code schedule to fire once")
        given = tmp_path / "tick.json"
        given.write_text(
            json.dumps(
                {
                    "name": "tick",
                    "kind": "http",
                    "http": {"url": "https://example.com/"},
                    "cron": "*/5 * * * * *",
                }
            )
        )
        created = tickwork(env, "definitions", "create", str(given))
        assert created.returncode == 0, created.stderr
        stored = sql.execute(
            "SELECT name, created_at FROM schedules WHERE origin = 'definition'"
        ).fetchall()
        [(definition, definition_at)] = stored
        start = db_now(sql)
        wait_for(lambda: db_now(sql) > start + WATCHED, "a minute of fire times", 120)
        end = db_now(sql)
    assert process.returncode == 0

    lateness: list[float] = []  # of every job, the process's first seconds included
    steady: list[float] = []  # of the jobs whose fire time came once it had started
    for name, cron in [
        ("every-five", "*/5 * * * * *"),
        ("every-second", "* * * * * *"),
        (definition, "*/5 * * * * *"),
    ]:
        rows = jobs_of(sql, name)
        fired = [fire for fire, _ in rows]
        assert len(fired) == len(set(fired)), name  # none doubled
        since = definition_at if name == definition else fired[0] - timedelta(microseconds=1)
        expected = CronSchedule.parse(cron).fire_times(since, end - ON_TIME)
        assert set(expected) <= set(fired), (name, sorted(set(expected) - set(fired)))
        late = {fire: created - fire for fire, created in rows}
        # once the process has started (its first seconds build the API and start every
        # service), each job is created when its fire time comes, not at the next tick
        started = [fire for fire in fired if fire > start]
        assert all(timedelta(0) <= late[fire] < WOKEN for fire in started), (name, late)
        lateness += [d.total_seconds() for d in late.values()]
        steady += [late[fire].total_seconds() for fire in started]
    first_runs = jobs_of(sql, definition)
    assert len([f for f, _ in first_runs if f <= definition_at + timedelta(seconds=32)]) >= 5
    check = "schedules at the default tick: a job per fire time, created when it comes due"
    for what, figures in [("all jobs", lateness), ("once started", steady)]:
        p50, worst = statistics.median(figures), max(figures)
        on_time = sum(1 for f in figures if f < ON_TIME.total_seconds())
        print(f"{what}: {len(figures)} jobs, created after the fire time p50 "
              f"{p50 * 1000:.1f} ms, max {worst * 1000:.1f} ms")  # fmt: skip
        record("reliability", check, f"jobs ({what})", len(figures))
        record("reliability", check, f"creation lateness p50 (ms, {what})", round(p50 * 1000, 1))
        record("reliability", check, f"creation lateness max (ms, {what})", round(worst * 1000, 1))
        record("reliability", check, f"created within 1 s ({what})", on_time)


def test_the_cli_refuses_a_cron_finer_than_the_limit(
    db_env: dict[str, str], clean: None, tmp_path: Path
) -> None:
    given = tmp_path / "fast.json"
    given.write_text(
        json.dumps(
            {
                "name": "fast",
                "kind": "http",
                "http": {"url": "https://example.com/"},
                "cron": "* * * * * *",
            }
        )
    )
    limited = dict(db_env, TICKWORK_SCHEDULER__MIN_INTERVAL="5")
    refused = tickwork(limited, "definitions", "create", str(given))
    assert refused.returncode == 2, refused.stderr
    assert "cron ('* * * * * *') fires 1 s apart" in refused.stderr, refused.stderr
    assert "every 5 s (scheduler.min_interval)" in refused.stderr, refused.stderr
    accepted = tickwork(db_env, "definitions", "create", str(given))  # every second: honoured
    assert accepted.returncode == 0, accepted.stderr
