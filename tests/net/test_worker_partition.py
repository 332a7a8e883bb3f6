"""A worker host cut off from the database (every packet dropped, no reset) for longer than
the lease TTL, in the middle of jobs: its attempts are reclaimed by the watchdog of a worker
on another host and run there; the cut-off worker stops its async handlers by its own clock
before its leases expire; when the network heals, the outcomes it still holds are fenced off.
Every job ends with exactly one SUCCEEDED attempt."""

from __future__ import annotations

import re
import time
from pathlib import Path
from typing import Any

import pytest

from tickwork import App, JobSpec

from ..figures import record, scale
from .hosts import Fleet, wait_until, worker_id

CHECK = "a worker host partitioned from the database past the lease TTL"
LEASE = {
    "WORKER__LEASE_TTL": 10,  # handlers stop 1 s (10%) before expiry: room for a busy machine
    "WORKER__LEASE_RENEW_INTERVAL": 0.5,
    "WORKER__WATCHDOG_INTERVAL": 0.5,
    "WORKER__POLL_INTERVAL": 0.2,
}
ASYNC_JOBS = 2
"""Async handlers on the cut-off worker: interrupted at its own lease deadline."""
SYNC_SECONDS = 6.0
"""The sync handlers' length: they cannot be interrupted, finish while the host is cut off,
and their outcomes wait for the network."""
PARTITION_AFTER_RECOVERY = float(scale(0, 20))
"""Extra seconds the partition lasts once the other host has finished every job (the long
version keeps it past the TCP user timeout, so the cut-off worker's connections fail too)."""


def settled(log: str) -> tuple[int, int]:
    """A worker's outcomes fenced off, and those it gave up writing, from its log."""
    fenced = log.count("attempt was fenced off")
    given_up = sum(int(n) for n in re.findall(r"could not record outcomes.* outcomes=(\d+)", log))
    return fenced, given_up


def scalar(sql: Any, query: str, params: list[Any] | None = None) -> Any:
    row = sql.execute(query, params or []).fetchone()
    return None if row is None else row[0]


def test_partitioned_workers_jobs_are_rerun_elsewhere_and_its_late_outcomes_fenced(
    tasks: App, fleet: Fleet, net_sql: Any, tmp_path: Path
) -> None:
    sql = net_sql
    notes = tmp_path / "notes"
    notes.mkdir()
    h1, h2 = fleet.host(), fleet.host()
    w1 = fleet.worker(h1, "w1", concurrency=ASYNC_JOBS + 2, **LEASE)
    w1_id = worker_id(sql, w1)
    jobs = tasks.enqueue_many(
        [JobSpec(task="e2e.linger", args={"seconds": 3600, "notes": str(notes)})] * ASYNC_JOBS
        + [JobSpec(task="e2e.work", args={"seconds": SYNC_SECONDS})] * 2
    )
    wait_until(
        lambda: scalar(sql, "SELECT count(*) FROM runs") == len(jobs),
        "w1 runs every job",
        guard=fleet.assert_alive,
    )
    w2 = fleet.worker(h2, "w2", **LEASE)
    w2_id = worker_id(sql, w2)

    fleet.network.partition(h1)
    cut_at = time.monotonic()
    done = wait_until(
        lambda: scalar(sql, "SELECT count(*) FROM jobs WHERE state = 'SUCCEEDED'") == len(jobs),
        "every job SUCCEEDED on the other host",
        guard=fleet.assert_alive,
        detail=fleet.logs,
    )
    recovered_in = time.monotonic() - cut_at
    assert done
    extra_until = time.monotonic() + PARTITION_AFTER_RECOVERY
    wait_until(lambda: time.monotonic() >= extra_until, "the partition's extra time passes")
    fleet.network.heal(h1)
    healed_at = time.monotonic()

    # w1's outcomes (the sync handlers' successes, the async ones' interruptions) are
    # written once the network is back and meet the fence, or, where the partition used up
    # the wait for a connection, are given up (the watchdog has reclaimed them anyway)
    wait_until(
        lambda: sum(settled(w1.log())) == len(jobs),
        "every outcome of w1 is fenced off or given up",
        guard=fleet.assert_alive,
        detail=fleet.logs,
    )
    fenced, given_up = settled(w1.log())
    # each job: exactly one SUCCEEDED attempt, by w2; w1's attempts TIMED_OUT, none overwritten
    per_job = sql.execute(
        "SELECT j.id, array_agg(e.state ORDER BY e.id), array_agg(e.worker_id ORDER BY e.id)"
        " FROM jobs j JOIN executions e ON e.job_id = j.id GROUP BY j.id"
    ).fetchall()
    for job_id, states, workers in per_job:
        assert states == ["TIMED_OUT", "SUCCEEDED"], (job_id, states)
        assert workers == [w1_id, w2_id], (job_id, workers)
    # the async handlers were stopped by w1's own clock before their leases expired
    expiries = dict(
        sql.execute(
            "SELECT id, extract(epoch FROM lease_expires_at) FROM executions WHERE worker_id = %s",
            [w1_id],
        ).fetchall()
    )
    interrupted = {int(p.name): float(p.read_text()) for p in notes.iterdir()}
    assert len(interrupted) == ASYNC_JOBS, interrupted
    margins = [float(expiries[e]) - at for e, at in interrupted.items()]
    assert all(m > 0 for m in margins), f"interrupted after the lease expired: {margins}"

    # w1 recovers: with w2 gone, a new job runs on w1
    w2.popen.kill()
    w2.popen.wait()
    fleet.processes.remove(w2)
    [job] = tasks.enqueue_many([JobSpec(task="e2e.work", args={"seconds": 0})])
    wait_until(
        lambda: scalar(sql, "SELECT state FROM jobs WHERE id = %s", [job.id]) == "SUCCEEDED",
        "w1 runs a new job after the heal",
        guard=fleet.assert_alive,
        detail=fleet.logs,
    )
    back_in = time.monotonic() - healed_at
    ran_by = scalar(sql, "SELECT worker_id FROM executions WHERE job_id = %s", [job.id])
    assert ran_by == w1_id

    record("reliability", CHECK, "jobs in flight on the cut-off host", len(jobs), lease_ttl=4)
    record("reliability", CHECK, "jobs with other than one SUCCEEDED attempt", 0)
    record(
        "reliability",
        CHECK,
        "late outcomes of the cut-off worker fenced off",
        fenced,
        given_up_unwritten=given_up,
    )
    record(
        "reliability",
        CHECK,
        "seconds an async handler stopped before its lease expired (least)",
        round(min(margins), 2),
    )
    record(
        "reliability",
        CHECK,
        "seconds from the cut to every job SUCCEEDED on the other host",
        round(recovered_in, 2),
    )
    record(
        "reliability",
        CHECK,
        "seconds from the heal to the cut-off worker running a new job",
        round(back_in, 2),
        partition_seconds=round(healed_at - cut_at, 1),
    )


pytestmark = pytest.mark.e2e
