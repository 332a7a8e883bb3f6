"""The command line as a user runs it: demo, migrate, doctor, bench."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest

from .support import tickwork

pytestmark = pytest.mark.e2e


def test_demo_settles_every_job_and_prints_a_summary(db_env: dict[str, str]) -> None:
    schema, url = db_env["TICKWORK_SCHEMA"], db_env["TICKWORK_DATABASE_URL"]
    with psycopg.connect(url, autocommit=True) as conn:
        # a `serve` on the configured schema holds the leases the demo once waited for
        conn.execute(
            f"INSERT INTO {schema}.leases (name, holder, acquired_at, renewed_at, expires_at) "
            "SELECT n, 'serve-elsewhere', now(), now(), now() + interval '1 hour' "
            "FROM unnest(ARRAY['SCHEDULER', 'SIGNAL_MASTER']) AS n "
            "ON CONFLICT (name) DO UPDATE SET holder = EXCLUDED.holder, "
            "expires_at = EXCLUDED.expires_at"
        )
        try:
            done = tickwork(db_env, "demo")
        finally:
            conn.execute(f"DELETE FROM {schema}.leases WHERE holder = 'serve-elsewhere'")
        # the demo ran in a schema of its own and left nothing, there or here
        left = conn.execute(
            f"SELECT (SELECT count(*) FROM {schema}.schedules WHERE task LIKE 'demo.%%'), "
            f"(SELECT count(*) FROM {schema}.jobs WHERE task LIKE 'demo.%%'), "
            "(SELECT count(*) FROM pg_namespace WHERE nspname = %s)",
            [f"{schema}_demo"],
        ).fetchone()
    assert done.returncode == 0, done.stderr
    assert left == (0, 0, 0)
    for expected in ("SUCCEEDED", "DEAD_LETTER", "CANCELLED", "job.dead_lettered"):
        assert expected in done.stdout
    # captured through a pipe: the tables keep their width instead of wrapping at 80
    assert max(len(line) for line in done.stdout.splitlines()) > 80
    assert "job.cancel_requested" in done.stdout  # the deferred cancel of a running job
    assert "schedule demo-heartbeat" in done.stdout  # the schedule fired
    assert "1 signal (19 squashed into" in " ".join(done.stdout.split())  # signals squashed
    assert "reactor demo-recalc handled signal" in " ".join(done.stdout.split())


def test_migrate_is_idempotent_and_doctor_reports(db_env: dict[str, str]) -> None:
    first = tickwork(db_env, "migrate")
    assert first.returncode == 0, first.stderr
    assert "schema is up to date" in first.stdout  # the session fixture migrated already
    doctor = tickwork(db_env, "doctor", "--xmin-warning", "86400")
    assert doctor.returncode in (0, 1), doctor.stderr  # 1 only when it has warnings
    assert "jobs_runnable_idx" in doctor.stdout
    assert "xmin horizon" in doctor.stdout


@pytest.fixture
def bench_env(db_env: dict[str, str]) -> Iterator[dict[str, str]]:
    schema = db_env["TICKWORK_SCHEMA"] + "_bench"
    yield dict(db_env, TICKWORK_SCHEMA=schema)
    with psycopg.connect(db_env["TICKWORK_DATABASE_URL"], autocommit=True) as conn:
        conn.execute(f"DROP SCHEMA IF EXISTS {schema} CASCADE")


def test_bench_runs_every_workload_and_prints_json(bench_env: dict[str, str]) -> None:
    env = bench_env
    done = tickwork(
        env,
        "bench",
        "--json",
        "--jobs",
        "300",
        "--concurrency",
        "50",
        "--latency-jobs",
        "20",
        "--rate",
        "200",
    )
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["environment"]["postgres"]
    assert "synchronous_commit" in report["environment"]["settings"]
    by_name = {r["workload"]: r for r in report["results"]}
    assert set(by_name) == {"enqueue-single", "enqueue-batch", "drain", "latency"}
    assert all(r["per_second"] > 0 for r in report["results"])
    assert by_name["latency"]["details"]["p99_ms"] >= by_name["latency"]["details"]["p50_ms"]


def test_bench_refuses_a_schema_it_did_not_make_in_one_line(db_env: dict[str, str]) -> None:
    # the test schema: migrated by the session, not made by a bench
    done = tickwork(db_env, "bench", "-w", "enqueue-single", "--jobs", "10")
    assert done.returncode == 2
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    schema = db_env["TICKWORK_SCHEMA"]
    assert lines[0].startswith(f"error: schema ('{schema}') was not made by tickwork bench")


def test_bad_options_get_a_clear_error(db_env: dict[str, str]) -> None:
    done = tickwork(db_env, "bench", "--workload", "sprint")
    assert done.returncode != 0
    assert "--workload ('sprint') must be one of" in done.stderr
    bad = tickwork(dict(db_env, TICKWORK_WORKER__LEASE_TTL="1"), "worker")
    assert bad.returncode == 2
    assert "worker.lease_ttl (1.0s) must be greater than" in bad.stderr


def test_schedules_commands(db_env: dict[str, str]) -> None:
    env = dict(db_env, PYTHONPATH=str(Path(__file__).parent))
    listed = tickwork(env, "schedules", "list")
    assert listed.returncode == 0, listed.stderr
    missing = tickwork(env, "schedules", "pause", "no-such-schedule")
    assert missing.returncode == 2
    assert "name ('no-such-schedule') is not a stored schedule" in missing.stderr
    with psycopg.connect(env["TICKWORK_DATABASE_URL"], autocommit=True) as conn:
        # a schedule defined by code that no longer runs (no live worker defines it)
        conn.execute(
            f"INSERT INTO {env['TICKWORK_SCHEMA']}.schedules (name, task, cron, next_run_at) "
            "VALUES ('left-behind', 'gone.task', '* * * * *', now())"
        )
    # it asks first: no answer (or no) deletes nothing
    kept = tickwork(env, "schedules", "delete", "left-behind", stdin="n\n")
    assert kept.returncode == 1 and "Delete schedule left-behind (* * * * *" in kept.stdout
    deleted = tickwork(env, "schedules", "delete", "left-behind", stdin="y\n")
    assert deleted.returncode == 0, deleted
    assert deleted.stdout.strip().endswith("deleted left-behind"), deleted
    again = tickwork(env, "schedules", "delete", "left-behind", "--yes")
    assert again.returncode == 2 and "left-behind" in again.stderr
