"""``benchmarks/job_cost.py`` and ``benchmarks/history_partitioning.py``: what a job costs the
database, measured in scratch schemas they drop. Tiny settings: this checks that the rows
each phase reports are the rows the job path writes (the figures ``docs/scaling.md`` is
built on), never how fast anything is."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import psycopg
import pytest

pytestmark = pytest.mark.e2e

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"
HANG_GUARD = 300.0
"""Not a timing assertion: only stops a broken run from hanging the test."""
SINGLE, BATCHED = 20, 480
HELD, ROUND_JOBS = 2_000, 300


@pytest.fixture
def measurable(database_url: str) -> str:
    """The scripts read the WAL back (pg_walinspect), count dead rows (pgstattuple) and hold
    a temporary replication slot: a superuser on a server that ships both extensions."""
    with psycopg.connect(database_url, autocommit=True) as conn:
        superuser = conn.execute("SELECT rolsuper FROM pg_roles WHERE rolname = current_user")
        row = superuser.fetchone()
        available = conn.execute(
            "SELECT count(*) FROM pg_available_extensions"
            " WHERE name IN ('pg_walinspect', 'pgstattuple')"
        ).fetchone()
    if not (row and row[0]):
        pytest.skip("the test database's role is not a superuser: job_cost.py needs one")
    if not (available and available[0] == 2):
        pytest.skip("pg_walinspect or pgstattuple is not installed on the test server")
    return database_url


def run(script: str, *args: str) -> dict[str, Any]:
    proc = subprocess.run(
        [sys.executable, str(BENCHMARKS / script), "--json", *args],
        capture_output=True,
        text=True,
        timeout=HANG_GUARD,
        check=False,
        cwd=BENCHMARKS.parent,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    report: dict[str, Any] = json.loads(proc.stdout)
    return report


def schema_exists(url: str, schema: str) -> bool:
    with psycopg.connect(url, autocommit=True) as conn:
        found = conn.execute("SELECT 1 FROM pg_namespace WHERE nspname = %s", [schema])
        return bool(found.fetchall())


def test_job_cost_reports_the_rows_and_wal_each_phase_writes(measurable: str) -> None:
    report = run(
        "job_cost.py",
        "--url",
        measurable,
        "--jobs",
        str(BATCHED),
        "--single",
        str(SINGLE),
        "--concurrency",
        "50",
    )
    total = SINGLE + BATCHED
    assert report["jobs"] == total
    phases = {p["name"]: p for p in report["phases"]}
    assert list(phases) == [
        "enqueue-single",
        "enqueue-batch",
        "drain",
        "rollup fold",
        "vacuum after drain",
        "retention delete",
        "vacuum after delete",
    ]
    assert phases["enqueue-single"]["rows"]["jobs"]["ins"] == SINGLE
    assert phases["enqueue-batch"]["rows"]["jobs"]["ins"] == BATCHED
    drain = phases["drain"]["rows"]
    # the claim and the outcome update each job, never in place (HOT); the attempt is
    # inserted, then updated by its outcome (and by lease renewals, if a slow machine makes
    # the drain outlast a renewal interval)
    assert drain["jobs"]["upd"] == 2 * total
    assert drain["jobs"]["hot_upd"] == 0
    assert drain["executions"]["ins"] == total
    assert drain["executions"]["upd"] >= total
    assert drain["tallies"]["ins"] >= 1
    deleted = phases["retention delete"]
    assert deleted["extra"]["deleted"] == total
    assert deleted["rows"]["jobs"]["del"] == deleted["rows"]["executions"]["del"] == total
    assert deleted["rows"]["jobs"]["live_rows"] == deleted["rows"]["executions"]["live_rows"] == 0
    # WAL of the schema's own relations, every phase that wrote rows: one commit per
    # single enqueue, and a drain writing more per job than an enqueue does
    wal = {name: p["wal"] for name, p in phases.items()}
    assert wal["enqueue-single"]["by_kind"]["Transaction COMMIT"]["records"] == SINGLE
    for name in ("enqueue-single", "enqueue-batch", "drain", "retention delete"):
        assert wal[name]["bytes"] > 0, name
    assert wal["drain"]["bytes"] / total > wal["enqueue-batch"]["bytes"] / BATCHED
    assert not schema_exists(measurable, report["schema"])


def test_history_partitioning_retires_every_round_in_both_modes(measurable: str) -> None:
    report = run(
        "history_partitioning.py",
        "--url",
        measurable,
        "--held",
        str(HELD),
        "--rounds",
        "2",
        "--round-jobs",
        str(ROUND_JOBS),
        "--concurrency",
        "50",
    )
    rounds = report["rounds"]
    assert sorted(r["mode"] for r in rounds) == ["delete", "delete", "move", "move"]
    for r in rounds:
        # retention deletes as many of the oldest held jobs as the round added (the window
        # moves with the clock while it runs, so a few more may be past it); the move takes
        # exactly the round's finished jobs
        if r["mode"] == "move":
            assert r["retired"] == ROUND_JOBS, r
        else:
            assert ROUND_JOBS <= r["retired"] <= ROUND_JOBS + 50, r
        assert r["retire_wal_bytes"] > 0, r
    last = {r["mode"]: r for r in rounds}
    # the window lives in history, not in the hot tables
    assert last["move"]["hot_bytes"]["jobs"] < last["delete"]["hot_bytes"]["jobs"]
    assert 0 < report["drop"]["jobs"] <= HELD
    for schema in report["schemas"].values():
        assert not schema_exists(measurable, schema)
