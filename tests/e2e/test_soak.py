"""A soak: a steady stream of jobs at half of what the fleet can drain, through worker
crashes (kill -9) and killed database sessions, watched over time for drift: pickup latency
(p99, database clock), worker memory (RSS) and table sizes. Nothing may be lost.

The CI version runs for about half a minute; ``TICKWORK_FIGURES_SCALE=long`` runs an hour
(``benchmarks/figures.py --long``).
"""

from __future__ import annotations

import os
import statistics
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest

from tickwork import App, JobSpec

from ..figures import long_run, record, scale
from .support import worker_command

pytestmark = pytest.mark.e2e

E2E_DIR = Path(__file__).resolve().parent
DURATION = scale(30, 3600)
"""Seconds of steady load."""
SAMPLE_EVERY = scale(5, 60)
"""Seconds per window of the drift figures."""
KILL_EVERY = scale(10, 120)
"""Seconds between kill -9s of the crash-slot worker."""
TERMINATE_EVERY = scale(15, 300)
"""Seconds between pg_terminate_backend of every worker session."""
CEILING_JOBS = scale(3000, 20000)
HANG_GUARD = 300.0  # not a timing assertion: only stops a broken run from hanging


class Worker:
    def __init__(self, env: dict[str, str], log_dir: Path, name: str) -> None:
        self.name = name
        self.app_name = f"soak-{env['TICKWORK_SCHEMA']}-{name}"
        log = (log_dir / f"{name}.log").open("ab")
        self.popen = subprocess.Popen(
            worker_command(50, "WARNING"),
            env=env | {"PGAPPNAME": self.app_name},
            cwd=log_dir,
            stdout=log,
            stderr=subprocess.STDOUT,
        )

    def rss_kib(self) -> int:
        for line in Path(f"/proc/{self.popen.pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
        return 0

    def kill(self) -> None:
        if self.popen.poll() is None:
            self.popen.kill()
        self.popen.wait(60)


@pytest.fixture
def soak_env(db_env: dict[str, str]) -> dict[str, str]:
    return dict(
        db_env,
        PYTHONPATH=os.pathsep.join(p for p in (str(E2E_DIR), db_env.get("PYTHONPATH")) if p),
        TICKWORK_WORKER__LEASE_TTL="3",
        TICKWORK_WORKER__LEASE_RENEW_INTERVAL="1",
        TICKWORK_WORKER__WATCHDOG_INTERVAL="1",
        TICKWORK_WORKER__POLL_INTERVAL="0.5",
        TICKWORK_RETENTION__FINISHED_AFTER=str(scale(3600, 120)),
        TICKWORK_RETENTION__INTERVAL="10",
        TICKWORK_SCHEDULER__ENABLED="false",
    )


@pytest.fixture
def workers(soak_env: dict[str, str], tmp_path: Path) -> Iterator[list[Worker]]:
    started = [Worker(soak_env, tmp_path, "steady"), Worker(soak_env, tmp_path, "crashy")]
    try:
        yield started
    finally:
        for worker in started:
            worker.kill()


def db_now(sql: psycopg.Connection[Any]) -> Any:
    row = sql.execute("SELECT now()").fetchone()
    assert row is not None
    return row[0]


def settle(sql: psycopg.Connection[Any], what: str) -> None:
    deadline = time.monotonic() + HANG_GUARD
    while time.monotonic() < deadline:
        [(open_jobs,)] = sql.execute(
            "SELECT count(*) FROM jobs WHERE state IN ('PENDING', 'RUNNING', 'FAILED')"
        ).fetchall()
        if open_jobs == 0:
            return
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting until {what}")


def window(sql: psycopg.Connection[Any], since: Any) -> tuple[int, float | None]:
    """Attempts started since ``since`` (database time) and their p99 pickup latency (ms)."""
    found = sql.execute(
        "SELECT extract(epoch FROM e.started_at - j.run_at) * 1000 FROM executions e"
        " JOIN jobs j ON j.id = e.job_id WHERE e.started_at >= %s AND e.attempt = 1",
        [since],
    ).fetchall()
    latencies = sorted(float(r[0]) for r in found)
    if len(latencies) < 20:
        return len(latencies), None
    return len(latencies), statistics.quantiles(latencies, n=100)[98]


def table_bytes(sql: psycopg.Connection[Any]) -> int:
    [(size,)] = sql.execute(
        "SELECT pg_total_relation_size('jobs') + pg_total_relation_size('executions')"
    ).fetchall()
    return int(size)


def test_soak_at_half_the_drain_ceiling_with_faults(
    noop_app: App,
    sql: psycopg.Connection[Any],
    workers: list[Worker],
    soak_env: dict[str, str],
    tmp_path: Path,
) -> None:
    # the ceiling: a backlog drained by both workers
    started = time.monotonic()
    noop_app.enqueue_many([JobSpec("e2e.noop") for _ in range(CEILING_JOBS)])
    settle(sql, "the ceiling backlog is drained")
    ceiling = CEILING_JOBS / (time.monotonic() - started)
    rate = ceiling / 2
    sql.execute("TRUNCATE jobs, executions")

    samples: list[dict[str, Any]] = []
    enqueued = kills = terminations = 0
    begin = time.monotonic()
    next_kill, next_terminate = begin + KILL_EVERY, begin + TERMINATE_EVERY
    window_start, window_at = db_now(sql), begin
    batch = max(1, int(rate / 20))  # twenty batches a second
    while time.monotonic() - begin < DURATION:
        due = int((time.monotonic() - begin) * rate) - enqueued
        if due >= batch:
            noop_app.enqueue_many([JobSpec("e2e.noop") for _ in range(due)])
            enqueued += due
        else:
            time.sleep(0.01)  # pacing the producer, not synchronisation
        if time.monotonic() >= next_kill:
            workers[1].kill()
            workers[1] = Worker(soak_env, tmp_path, "crashy")
            kills += 1
            next_kill += KILL_EVERY
        if time.monotonic() >= next_terminate:
            sql.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
                " WHERE application_name LIKE %s",
                [f"soak-{soak_env['TICKWORK_SCHEMA']}-%"],
            )
            terminations += 1
            next_terminate += TERMINATE_EVERY
        if time.monotonic() - window_at >= SAMPLE_EVERY:
            attempts, p99 = window(sql, window_start)
            samples.append(
                {
                    "attempts": attempts,
                    "p99_ms": p99,
                    "rss_kib": workers[0].rss_kib(),
                    "table_bytes": table_bytes(sql),
                }
            )
            window_start, window_at = db_now(sql), time.monotonic()
    settle(sql, "every soak job is finished")
    [(not_succeeded,)] = sql.execute(
        "SELECT count(*) FROM jobs WHERE state <> 'SUCCEEDED'"
    ).fetchall()
    [(present,)] = sql.execute("SELECT count(*) FROM jobs").fetchall()
    assert not_succeeded == 0
    if not long_run():  # no retention pass deletes them in the short run
        assert present == enqueued
    assert kills >= 1 and terminations >= 1
    p99s = [s["p99_ms"] for s in samples if s["p99_ms"] is not None]
    check = "soak at half the drain ceiling, with kill -9s and killed sessions"
    record("reliability", check, "seconds", DURATION, rate=round(rate), ceiling=round(ceiling))
    record("reliability", check, "jobs", enqueued, kill_9s=kills, terminated=terminations)
    record("reliability", check, "jobs lost", not_succeeded)
    if p99s:
        record("reliability", check, "p99 pickup ms, first window", round(p99s[0], 1))
        record(
            "reliability",
            check,
            "p99 pickup ms, last window",
            round(p99s[-1], 1),
            worst=round(max(p99s), 1),
        )
    record(
        "reliability",
        check,
        "steady worker RSS MiB, first window",
        round(samples[0]["rss_kib"] / 1024, 1),
    )
    record(
        "reliability",
        check,
        "steady worker RSS MiB, last window",
        round(samples[-1]["rss_kib"] / 1024, 1),
    )
    record(
        "reliability",
        check,
        "jobs+executions MiB, first window",
        round(samples[0]["table_bytes"] / 2**20, 1),
    )
    record(
        "reliability",
        check,
        "jobs+executions MiB, last window",
        round(samples[-1]["table_bytes"] / 2**20, 1),
    )
