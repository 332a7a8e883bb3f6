"""200 ms ± 50 ms of latency to one worker host: its statements, renewals among them, take
that much longer, and still no healthy job is reclaimed (no TIMED_OUT attempt) while both
hosts drain a backlog; the throughput of each host is a figure."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

from tickwork import App, JobSpec

from ..figures import record, scale
from .hosts import Fleet, wait_until, worker_id

pytestmark = pytest.mark.e2e

CHECK = "200 ms ± 50 ms latency to one worker host"
DELAY = Path(__file__).resolve().parent / "delay.py"
LEASE = {
    "WORKER__LEASE_TTL": 5,
    "WORKER__LEASE_RENEW_INTERVAL": 1,
    "WORKER__WATCHDOG_INTERVAL": 0.5,
}
LONG_JOBS = 4
LONG_SECONDS = 12.0
"""Jobs on the slow host that outlive the lease TTL several times over: kept by renewals."""
BACKLOG = scale(1000, 10000)


def count(sql: Any, query: str, params: list[Any] | None = None) -> int:
    return int(sql.execute(query, params or []).fetchone()[0])


def test_latency_to_a_worker_host_reclaims_no_healthy_job(
    tasks: App, fleet: Fleet, net_sql: Any
) -> None:
    sql = net_sql
    slow, fast = fleet.host(), fleet.host()
    gateway, port = fleet.network.gateway, sql.info.port
    forwarder = fleet.run(slow, "delay", str(DELAY), "6000", gateway, str(port), "200", "50")
    wait_until(
        lambda: "ready" in forwarder.log(), "the forwarder listens", guard=fleet.assert_alive
    )
    w1 = fleet.worker(
        slow, "w1", concurrency=8, DATABASE_URL="postgresql://postgres@127.0.0.1:6000/tickwork",
        **LEASE,
    )  # fmt: skip
    w1_id = worker_id(sql, w1)
    round_trip = time.monotonic()
    tasks.enqueue_many([JobSpec(task="e2e.work", args={"seconds": LONG_SECONDS})] * LONG_JOBS)
    wait_until(
        lambda: count(sql, "SELECT count(*) FROM runs") == LONG_JOBS,
        "w1 runs the long jobs",
        guard=fleet.assert_alive,
        detail=fleet.logs,
    )
    first_pickup = time.monotonic() - round_trip
    w2 = fleet.worker(fast, "w2", concurrency=8, **LEASE)
    w2_id = worker_id(sql, w2)

    started = time.monotonic()
    tasks.enqueue_many([JobSpec(task="e2e.noop")] * BACKLOG)
    wait_until(
        lambda: (
            count(sql, "SELECT count(*) FROM jobs WHERE state = 'SUCCEEDED' AND task = 'e2e.noop'")
            == BACKLOG
        ),
        "the backlog drains",
        timeout=300,
        guard=fleet.assert_alive,
        detail=fleet.logs,
    )
    seconds = time.monotonic() - started
    total = LONG_JOBS + BACKLOG
    wait_until(
        lambda: count(sql, "SELECT count(*) FROM jobs WHERE state = 'SUCCEEDED'") == total,
        "the long jobs SUCCEEDED too",
        guard=fleet.assert_alive,
        detail=fleet.logs,
    )

    timed_out = count(sql, "SELECT count(*) FROM executions WHERE state = 'TIMED_OUT'")
    assert timed_out == 0, "a healthy attempt was reclaimed"
    assert count(sql, "SELECT count(*) FROM executions") == total  # one attempt each
    long_by = {
        row[0]
        for row in sql.execute("SELECT worker_id FROM executions e JOIN jobs j ON j.id = e.job_id"
                               " WHERE j.task = 'e2e.work'")
    }  # fmt: skip
    assert long_by == {w1_id}, "the long jobs ran on the slow host, through many renewals"
    per_worker = dict(
        sql.execute(
            "SELECT worker_id, count(*) FROM executions e JOIN jobs j ON j.id = e.job_id"
            " WHERE j.task = 'e2e.noop' GROUP BY worker_id"
        ).fetchall()
    )

    record("reliability", CHECK, "attempts reclaimed (TIMED_OUT)", timed_out,
           lease_ttl=5, long_jobs_seconds=LONG_SECONDS)  # fmt: skip
    record("reliability", CHECK, "jobs drained by both hosts, per second",
           round(BACKLOG / seconds), jobs=BACKLOG)  # fmt: skip
    record("reliability", CHECK, "share of the backlog run by the slow host",
           f"{per_worker.get(w1_id, 0) / BACKLOG:.0%}",
           slow=per_worker.get(w1_id, 0), fast=per_worker.get(w2_id, 0))  # fmt: skip
    record("reliability", CHECK, "seconds from enqueue to the slow host running 4 jobs",
           round(first_pickup, 2))  # fmt: skip
