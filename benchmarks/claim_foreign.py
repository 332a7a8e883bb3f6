"""The claim's cost with jobs of other tasks waiting in front of the worker's own.

A worker claims only the tasks it has (``job_claim`` reads one index range per (queue,
task) pair). This times the claim, rolled back after each run so every run sees the same
rows, with 0, 10,000 and 100,000 jobs of a task the worker lacks queued at a higher priority
than its own 1,000, next to the obvious alternative (one range per queue of the old
``(queue, priority, run_at, id)`` index, other tasks filtered out while reading it), which
has to read past every foreign job first::

    .venv/bin/python benchmarks/claim_foreign.py [--url postgresql://127.0.0.1:5432/test]

It works in a schema of its own (``tickwork_claim_bench``), dropped at the end.
"""

from __future__ import annotations

import argparse
import statistics
import time
import uuid
from typing import Any

import psycopg

from tickwork import App

SCHEMA = "tickwork_claim_bench"
OWN_JOBS = 1_000
BACKLOGS = (0, 10_000, 100_000)
RUNS = 200
LIMIT = 10

OLD_INDEX = """
DROP INDEX {schema}.jobs_runnable_idx;
CREATE INDEX jobs_runnable_idx ON {schema}.jobs (queue, priority DESC, run_at, id)
    WHERE state IN ('PENDING', 'FAILED')
"""


def filtered(claim: str) -> str:
    """job_claim with one range per queue, other tasks filtered out while it is read."""
    per_queue = claim.replace("CROSS JOIN unnest(%(tasks)s::text[]) AS t(name)", "")
    per_queue = per_queue.replace("AND task = t.name", "AND task = ANY(%(tasks)s)")
    assert per_queue.count("ANY(%(tasks)s)") == 1, "job_claim changed: update this benchmark"
    return per_queue


def time_claims(conn: psycopg.Connection[Any], statement: str, params: dict[str, Any]) -> float:
    """Median milliseconds of one claim (each rolled back)."""
    times = []
    for _ in range(RUNS):
        started = time.perf_counter()
        with conn.transaction(force_rollback=True):
            rows = conn.execute(statement, params).fetchall()
        times.append((time.perf_counter() - started) * 1000)
        assert len(rows) == LIMIT, f"claimed {len(rows)} of {LIMIT}"
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", default="postgresql://127.0.0.1:5432/test")
    url = parser.parse_args().url
    with psycopg.connect(url, autocommit=True) as admin:
        admin.execute(f"DROP SCHEMA IF EXISTS {SCHEMA} CASCADE")
    app = App(database_url=url, schema=SCHEMA)
    app.migrate()
    statements = app.db.statements
    params = {
        "queues": ["default"],
        "tasks": ["own.task"],
        "limit": LIMIT,
        "worker_id": uuid.uuid4(),
        "lease_ttl": 30.0,
    }
    print(f"claim of {LIMIT} from {OWN_JOBS:,} own jobs, median of {RUNS} runs (ms)")
    results: dict[int, list[float]] = {backlog: [] for backlog in BACKLOGS}
    try:
        with psycopg.connect(url, autocommit=True) as conn:
            for statement, index in (
                (statements["job_claim"], None),
                (filtered(statements["job_claim"]), OLD_INDEX.replace("{schema}", SCHEMA)),
            ):
                conn.execute(f"TRUNCATE {SCHEMA}.jobs")
                if index is not None:
                    conn.execute(index)
                insert = f"""INSERT INTO {SCHEMA}.jobs (queue, task, priority, max_attempts,
                    created_by) SELECT 'default', %s, %s, 1, 'bench' FROM generate_series(1, %s)"""
                conn.execute(insert, ("own.task", 0, OWN_JOBS))
                present = 0
                for backlog in BACKLOGS:
                    conn.execute(insert, ("foreign.task", 50, backlog - present))
                    present = backlog
                    conn.execute(f"VACUUM ANALYZE {SCHEMA}.jobs")
                    results[backlog].append(time_claims(conn, statement, params))
    finally:
        app.close()
        with psycopg.connect(url, autocommit=True) as admin:
            admin.execute(f"DROP SCHEMA IF EXISTS {SCHEMA} CASCADE")
    print("| foreign jobs in front | job_claim: a range per task | a range per queue, filtered |")
    print("|---|---|---|")
    for backlog, (per_task, per_queue) in results.items():
        print(f"| {backlog:,} | {per_task:.2f} | {per_queue:.2f} |")


if __name__ == "__main__":
    main()
