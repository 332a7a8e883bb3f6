"""Drain rates of a worker with its default settings, by kind of handler.

``tickwork bench`` drains async no-op jobs; a worker's defaults must also suit sync handlers
(which run in its thread pool) and slow ones. This drains, one workload at a time, with
``app.worker()`` given no options but the queue:

- ``async-noop``: async handlers that return at once;
- ``sync-noop``: sync handlers that return at once;
- ``async-slow``: async handlers that wait 20 ms (``asyncio.sleep``: I/O, say);
- ``sync-slow``: sync handlers that block 20 ms (``time.sleep``);
- ``sync-slow-2w``: the same with two workers in one process sharing the queue (a worker
  that claims more jobs than it can run leaves the other idle).

Each prints jobs per second from the first claim to the last outcome on the database clock.
Only the public API is used, so the same script measures any version of tickwork (put its
``src`` first on ``PYTHONPATH`` for an A/B run)::

    .venv/bin/python benchmarks/handler_kinds.py --url postgresql://127.0.0.1:5432/test
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
import uuid
from typing import Any

import psycopg

from tickwork import App, JobSpec, Outcome

QUEUE = "kinds"
SLOW = 0.02
WORKLOADS = {
    # name: (task, jobs, workers)
    "async-noop": ("async_noop", 20_000, 1),
    "sync-noop": ("sync_noop", 5_000, 1),
    "async-slow": ("async_slow", 2_000, 1),
    "sync-slow": ("sync_slow", 500, 1),
    "sync-slow-2w": ("sync_slow", 1_000, 2),
}


def build(url: str, schema: str) -> App:
    app = App(database_url=url, schema=schema)

    @app.task(name="async_noop")
    async def async_noop(n: int) -> None:
        return None

    @app.task(name="sync_noop")
    def sync_noop(n: int) -> None:
        return None

    @app.task(name="async_slow")
    async def async_slow(n: int) -> None:
        await asyncio.sleep(SLOW)

    @app.task(name="sync_slow")
    def sync_slow(n: int) -> None:
        time.sleep(SLOW)

    return app


async def drain(app: App, task: str, jobs: int, workers: int) -> dict[str, Any]:
    for start in range(0, jobs, 1000):
        await app.enqueue_many_async(
            [JobSpec(task, {"n": i}, queue=QUEUE) for i in range(start, min(jobs, start + 1000))]
        )
    done = 0
    finished = asyncio.Event()

    def on_finished(outcome: Outcome) -> None:
        nonlocal done
        done += 1
        if done >= jobs:
            finished.set()

    running = [app.worker(queues=[QUEUE], on_finished=on_finished) for _ in range(workers)]
    tasks = [asyncio.create_task(w.run()) for w in running]
    await asyncio.wait_for(finished.wait(), 600)
    for worker in running:
        worker.request_stop()
    await asyncio.gather(*tasks)
    pool = await app.db.async_pool()
    async with pool.connection() as conn:
        cur = await conn.execute(
            f"SELECT extract(epoch FROM max(finished_at) - min(started_at))::float8,"
            f" count(*) FILTER (WHERE state = 'SUCCEEDED')"
            f" FROM {app.settings.schema_name}.executions"
        )
        row = await cur.fetchone()
    assert row is not None
    seconds, succeeded = float(row[0]), int(row[1])
    return {
        "jobs": jobs,
        "succeeded": succeeded,
        "seconds": round(seconds, 3),
        "per_second": round(jobs / seconds, 1),
        "concurrency": running[0].concurrency,
        "threads": getattr(running[0], "threads", running[0].concurrency),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--url", required=True, help="PostgreSQL URL (a scratch schema is made)")
    parser.add_argument("--workloads", default=",".join(WORKLOADS))
    parser.add_argument("--scale", type=float, default=1.0, help="jobs per workload times this")
    args = parser.parse_args()
    results = {}
    for name in args.workloads.split(","):
        task, jobs, workers = WORKLOADS[name]
        jobs = max(workers, int(jobs * args.scale))
        schema = f"kinds_{uuid.uuid4().hex[:8]}"
        app = build(args.url, schema)
        try:
            app.migrate()
            results[name] = asyncio.run(drain(app, task, jobs, workers))
        finally:
            app.close()
            with psycopg.connect(args.url, autocommit=True) as conn:
                conn.execute(f"DROP SCHEMA IF EXISTS {schema} CASCADE")
        print(name, json.dumps(results[name]), file=sys.stderr)
    print(json.dumps(results))


if __name__ == "__main__":
    main()
