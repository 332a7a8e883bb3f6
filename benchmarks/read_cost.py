"""What the reads operators make all the time cost as the history grows: each periodic read's
median time on a database holding 100,000 jobs and on one holding 10,000,000, with the same
live work in both (5,000 pending, 100 failed awaiting a retry, 50 running), the finished
jobs (98% succeeded, 1% dead-lettered, 1% cancelled, one execution each) spread over the
retention window, settled signals a tenth of the jobs, and a stopped worker's record per
10,000 jobs, as a fleet leaves behind over time.

The tables are filled server-side (``generate_series``), vacuumed and analysed as autovacuum
would leave them, and the rollups are counted once (``doctor --recount``'s statement), as the
write path would have tallied them. Each read is then timed ``--runs`` times (after one
warm-up) through the same functions the API routes call:

    .venv/bin/python benchmarks/read_cost.py [--url URL] [--sizes 100000,10000000] [--runs 15]
        [--keep] [--reuse]

``--keep`` leaves the schemas (``bench_reads_<size>``) for another run; ``--reuse`` times
reads on kept schemas without filling them again. Run with another checkout's code first on
``PYTHONPATH`` to time its reads on the same tables (reads it does not have print ``-``).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import statistics
import time
from collections.abc import Awaitable, Callable
from typing import Any

import psycopg

from tickwork import App
from tickwork.ops import metrics
from tickwork.queue import admin
from tickwork.signals import admin as signal_admin

DEFAULT_URL = os.environ.get("BENCH_DATABASE_URL", "postgresql://127.0.0.1:5432/bench_compare")
PENDING, FAILED, RUNNING = 5_000, 100, 50
QUEUES, TASKS = 4, 10

FILL = """
INSERT INTO {s}.jobs (queue, task, args, state, attempts, max_attempts, run_at, created_at,
                      created_by, finished_at)
SELECT 'q' || (g % {queues}), 'task' || (g % {tasks}), '{{"n": 1}}',
       CASE g % 100 WHEN 0 THEN 'DEAD_LETTER' WHEN 1 THEN 'CANCELLED' ELSE 'SUCCEEDED' END,
       1, 1, t, t, 'bench', t + interval '1 second'
FROM generate_series(1, {finished}) AS g,
     LATERAL (SELECT now() - interval '2 seconds'
                     - (g::float8 / {finished}) * interval '1 day' AS t) AS x;

INSERT INTO {s}.executions (job_id, attempt, worker_id, state, started_at, lease_expires_at,
                            finished_at)
SELECT id, 1, '00000000-0000-0000-0000-000000000001',
       CASE state WHEN 'SUCCEEDED' THEN 'SUCCEEDED' WHEN 'CANCELLED' THEN 'CANCELLED'
                  ELSE 'FAILED' END,
       run_at, run_at + interval '60 seconds', finished_at
FROM {s}.jobs;

INSERT INTO {s}.jobs (queue, task, args, state, attempts, max_attempts, run_at, created_by)
SELECT 'q' || (g % {queues}), 'task' || (g % {tasks}), '{{"n": 1}}', 'PENDING', 0, 3,
       now() - (g % 60) * interval '1 second', 'bench'
FROM generate_series(1, {pending}) AS g;

INSERT INTO {s}.jobs (queue, task, args, state, attempts, max_attempts, run_at, created_by)
SELECT 'q' || (g % {queues}), 'task' || (g % {tasks}), '{{"n": 1}}', 'FAILED', 1, 3,
       now() + interval '1 hour', 'bench'
FROM generate_series(1, {failed}) AS g;

WITH running AS (
    INSERT INTO {s}.jobs (queue, task, args, state, attempts, max_attempts, run_at, created_by)
    SELECT 'q' || (g % {queues}), 'task' || (g % {tasks}), '{{"n": 1}}', 'RUNNING', 1, 3,
           now(), 'bench'
    FROM generate_series(1, {running}) AS g
    RETURNING id
)
INSERT INTO {s}.executions (job_id, attempt, worker_id, lease_expires_at)
SELECT id, 1, '00000000-0000-0000-0000-000000000002', now() + interval '1 hour' FROM running;

INSERT INTO {s}.signals (signal_type, aggregate_key, status, created_at, process_after,
                         processed_at)
SELECT 'T' || (g % 5), NULL, CASE WHEN g % 50 = 0 THEN 'DEAD' ELSE 'COMPLETED' END,
       now() - (g::float8 / {signals}) * interval '7 days',
       now() - (g::float8 / {signals}) * interval '7 days',
       now() - (g::float8 / {signals}) * interval '7 days'
FROM generate_series(1, {signals}) AS g;

INSERT INTO {s}.signals (signal_type, aggregate_key, status, process_after)
SELECT 'T' || (g % 5), 'k' || g, 'PENDING', now() + interval '1 minute'
FROM generate_series(1, 200) AS g;

INSERT INTO {s}.workers (id, host, pid, queues, concurrency, started_at, last_seen_at,
                         stopped_at, tasks)
SELECT gen_random_uuid(), 'host' || (g % 10), g, ARRAY['q0'], 10,
       now() - interval '6 days', now() - interval '5 days', now() - interval '5 days',
       ARRAY['task0']
FROM generate_series(1, {workers}) AS g;

INSERT INTO {s}.workers (id, host, pid, queues, concurrency, tasks)
VALUES ('00000000-0000-0000-0000-000000000002', 'live', 1,
        ARRAY['q0', 'q1', 'q2', 'q3'], 50,
        ARRAY['task0', 'task1', 'task2', 'task3', 'task4', 'task5', 'task6', 'task7', 'task8',
              'task9']);
"""

MINUTES = """
INSERT INTO {s}.tally_minutes (subject, minute, name, state, n)
SELECT 'job', date_trunc('minute', finished_at), queue, state, count(*) FROM {s}.jobs
WHERE state IN ('SUCCEEDED', 'CANCELLED', 'DEAD_LETTER')
GROUP BY 2, 3, 4;
"""


def fill(url: str, schema: str, size: int) -> None:
    """Make the schema (tickwork's migrations) and fill it to ``size`` jobs."""
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(f"DROP SCHEMA IF EXISTS {schema} CASCADE")
    app = App(database_url=url, schema=schema)
    app.migrate()
    app.close()
    finished = size - PENDING - FAILED - RUNNING
    text = FILL.format(
        s=schema,
        queues=QUEUES,
        tasks=TASKS,
        finished=finished,
        pending=PENDING,
        failed=FAILED,
        running=RUNNING,
        signals=size // 10,
        workers=max(size // 10_000, 1),
    )
    started = time.perf_counter()
    with psycopg.connect(url, autocommit=True) as conn:
        for statement in text.split(";\n\n"):
            conn.execute(statement)
        has_rollups = conn.execute(
            "SELECT to_regclass(%s) IS NOT NULL", [f"{schema}.tally_totals"]
        ).fetchone()
        if has_rollups and has_rollups[0]:
            conn.execute(MINUTES.format(s=schema))
        conn.execute(f"VACUUM (ANALYZE) {schema}.jobs, {schema}.executions, {schema}.signals")
        conn.execute(f"VACUUM (ANALYZE) {schema}.workers")
    if has_rollups and has_rollups[0]:
        app = App(database_url=url, schema=schema)
        asyncio.run(_recount(app))
    print(f"filled {schema}: {size:,} jobs in {time.perf_counter() - started:.0f} s", flush=True)


async def _recount(app: App) -> None:
    from tickwork.ops.rollups import recount

    await recount(await app.db.async_pool(), app.db.store)
    await app.aclose()


Read = Callable[[App, Any], Awaitable[Any]]


def reads() -> dict[str, Read]:
    """Each periodic read, as the route that serves it calls it."""
    found: dict[str, Read] = {
        "GET /api/queues": lambda app, pool: admin.queue_stats(pool, app.db.store),
        "GET /metrics": lambda app, pool: metrics.render(pool, app.db.store),
        "GET /api/admin/signals/stats": lambda app, pool: signal_admin.stats(pool, app.db.store),
        "GET /api/workers": lambda app, pool: admin.list_workers(pool, app.db.store),
        "GET /api/leaders": lambda app, pool: _leaders(app, pool),
        "GET /api/health": lambda app, pool: _health(app, pool),
        "GET /api/jobs (first page)": lambda app, pool: admin.list_jobs(
            pool, app.db.store, admin.JobFilter()
        ),
        "GET /api/jobs?state=DEAD_LETTER": lambda app, pool: admin.list_jobs(
            pool, app.db.store, admin.JobFilter.parse(state=["DEAD_LETTER"])
        ),
    }
    if hasattr(admin, "throughput"):
        found["GET /api/queues/throughput (24 h by hour)"] = lambda app, pool: admin.throughput(
            pool, app.db.store
        )
    if hasattr(admin, "MAX_COUNT"):
        found["GET /api/jobs?state=SUCCEEDED&count=true (capped)"] = lambda app, pool: (
            admin.list_jobs(
                pool, app.db.store, admin.JobFilter.parse(state=["SUCCEEDED"]), count=True
            )
        )
        found["GET /api/jobs?state=DEAD_LETTER&count=true (a rare state)"] = lambda app, pool: (
            admin.list_jobs(
                pool, app.db.store, admin.JobFilter.parse(state=["DEAD_LETTER"]), count=True
            )
        )
    if hasattr(admin, "SEARCH_WINDOW"):
        found["GET /api/jobs?q=nowhere (a page of search, no match)"] = lambda app, pool: (
            admin.list_jobs(pool, app.db.store, admin.JobFilter(), text="nowhere")
        )
        found["GET /api/jobs?q=task3 (a page of search, many match)"] = lambda app, pool: (
            admin.list_jobs(pool, app.db.store, admin.JobFilter(), text="task3")
        )
    return found


async def _leaders(app: App, pool: Any) -> Any:
    async with pool.connection() as conn:
        return await app.db.store.lease_list(conn)


async def _health(app: App, pool: Any) -> Any:
    from tickwork.ops.health import check

    async with pool.connection() as conn:
        return await check(conn, app.db.store)


async def time_reads(url: str, schema: str, runs: int) -> dict[str, float]:
    """Median milliseconds of each read."""
    app = App(database_url=url, schema=schema)
    pool = await app.db.async_pool()
    medians: dict[str, float] = {}
    try:
        for name, read in reads().items():
            await read(app, pool)  # warm-up: plans and pages cached as in a running server
            times = []
            for _ in range(runs):
                started = time.perf_counter()
                await read(app, pool)
                times.append((time.perf_counter() - started) * 1000)
            medians[name] = statistics.median(times)
    finally:
        await app.aclose()
    return medians


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--url", default=DEFAULT_URL)
    parser.add_argument("--sizes", default="100000,10000000")
    parser.add_argument("--runs", type=int, default=15)
    parser.add_argument("--keep", action="store_true")
    parser.add_argument("--reuse", action="store_true")
    parser.add_argument("--json", action="store_true")
    options = parser.parse_args()
    sizes = [int(s) for s in options.sizes.split(",")]
    results: dict[int, dict[str, float]] = {}
    for size in sizes:
        schema = f"bench_reads_{size}"
        if not options.reuse:
            fill(options.url, schema, size)
        results[size] = asyncio.run(time_reads(options.url, schema, options.runs))
        if not options.keep:
            with psycopg.connect(options.url, autocommit=True) as conn:
                conn.execute(f"DROP SCHEMA IF EXISTS {schema} CASCADE")
    if options.json:
        print(json.dumps({str(k): v for k, v in results.items()}, indent=2))
        return
    with psycopg.connect(options.url) as conn:
        version = conn.execute("SHOW server_version").fetchone()
    print(
        f"PostgreSQL {version[0] if version else '?'}, Python {platform.python_version()}, "
        f"{os.cpu_count()} CPUs; median of {options.runs} runs, ms"
    )
    names = list(results[sizes[0]])
    header = "| read | " + " | ".join(f"{s:,} jobs" for s in sizes) + " | ratio |"
    print(header)
    print("|---" * (len(sizes) + 2) + "|")
    for name in names:
        cells = [results[s].get(name) for s in sizes]
        shown = ["-" if c is None else f"{c:.1f}" for c in cells]
        ratio = f"{cells[-1] / cells[0]:.2f}x" if cells[0] and cells[-1] is not None else "-"
        print(f"| {name} | " + " | ".join(shown) + f" | {ratio} |")


if __name__ == "__main__":
    main()
