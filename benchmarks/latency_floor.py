"""The floor under tickwork's pickup latency: the same round trips with no tickwork in them.

``tickwork bench -w latency`` times enqueue commit -> handler start for jobs enqueued at 50/s.
Whatever tickwork does, a pickup needs a commit to reach a listener as a notification and a
claim statement's round trip. This times exactly those, in one asyncio process as the bench
does, with psycopg and nothing else: tickwork's own ``job_insert`` of one job (its
notification included) committed on one connection, then, once the notification arrived on a
second, ``job_claim`` of one job on a third with the claim connections' settings, until its
answer is read: the SQL of a pickup, with no worker around it.

With ``--background-rate`` (``tickwork bench -w latency-loaded``'s load) the same producer
process as the bench's enqueues no-op jobs into the queue at that rate, and the pickup is a
loop of SQL alone draining them: ``job_claim`` of up to ``--claim`` jobs (50, the default
worker's claims), then ``job_complete_many`` of them as the completer writes no-op outcomes,
again at once, or after a notification when the queue was empty; a latency job's pickup ends
when a claim returns it. The jobs table is vacuumed by its dead rows meanwhile, as by
``tickwork worker`` (``retention.vacuum_dead_rows``).

It prints p50, p99 and p99/p50 in milliseconds, over ``--jobs`` events at ``--rate`` a
second, so the bench's ratio can be read against what this machine's scheduler and database
allow::

    .venv/bin/python benchmarks/latency_floor.py --url postgresql://127.0.0.1:5432/test
    .venv/bin/python benchmarks/latency_floor.py --url ... --background-rate 5000
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import statistics
import time
import uuid
from typing import Any

import psycopg

from tickwork.app import App
from tickwork.cli.bench import BENCH_QUEUE, NOOP, STAMP, _background, _vacuumed, make_app
from tickwork.db.store.jobs import _insert_params
from tickwork.queue.enqueue import JobSpec, insert_plan
from tickwork.types import ExecutionState
from tickwork.worker.completer import Completion, _outcomes
from tickwork.worker.worker import CLAIM_SERVER_SETTINGS

SCHEMA = "tickwork_latency_floor"


def summary(samples: list[float]) -> dict[str, float]:
    ordered = sorted(samples)
    p50 = statistics.median(ordered)
    p99 = ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))]
    return {"p50_ms": round(p50, 3), "p99_ms": round(p99, 3), "p99_over_p50": round(p99 / p50, 2)}


def claim_params(tasks: list[str], limit: int) -> dict[str, Any]:
    """``job_claim``'s parameters for up to ``limit`` jobs of ``tasks`` in the bench's queue."""
    return {
        "queues": [BENCH_QUEUE],
        "tasks": tasks,
        "limit": limit,
        "worker_id": uuid.uuid4(),
        "lease_ttl": 30.0,
    }


async def claim_connection(url: str) -> psycopg.AsyncConnection[Any]:
    """A connection with the worker's claim connections' settings."""
    options = " ".join(f"-c {k}={v}" for k, v in CLAIM_SERVER_SETTINGS.items())
    return await psycopg.AsyncConnection.connect(url, autocommit=True, options=options)


async def measure(app: App, jobs: int, rate: float) -> list[float]:
    url, statements = app.db.url, app.db.statements
    task = app.get_task(NOOP)
    plan = insert_plan([task.row(JobSpec(NOOP, {"n": 0}))], [{"n": 0}])
    insert = _insert_params(plan.sent[0], plan.args)
    channel = statements.channel("jobs")
    params = claim_params([NOOP], 1)
    async with (
        await psycopg.AsyncConnection.connect(url, autocommit=True) as sender,
        await psycopg.AsyncConnection.connect(url, autocommit=True) as listener,
        await claim_connection(url) as claimer,
    ):
        for _ in range(6):  # prepared, as the worker's claim is after its fifth run
            await claimer.execute(statements["job_claim"], params)
        await listener.execute(f'LISTEN "{channel}"')
        sent: dict[int, float] = {}
        arrived: dict[int, float] = {}  # read after the run: a note may beat its sent time

        async def receive() -> None:
            async for _ in listener.notifies():
                claimed = await claimer.execute(statements["job_claim"], params)
                assert len(await claimed.fetchall()) == 1, "the job was not claimed"
                arrived[len(arrived)] = time.perf_counter()
                if len(arrived) >= jobs:
                    return

        receiving = asyncio.create_task(receive())
        interval = 1.0 / rate
        next_at = time.perf_counter()
        for n in range(jobs):
            next_at += interval
            await sender.execute(statements["job_insert"], insert)
            sent[n] = time.perf_counter()  # autocommit: committed on return, as the bench's
            await asyncio.sleep(max(0.0, next_at - time.perf_counter()))
        await asyncio.wait_for(receiving, 60)
    return [(arrived[n] - sent[n]) * 1000 for n in range(jobs)]


async def measure_loaded(app: App, jobs: int, rate: float, claim: int) -> list[float]:
    """The pickup of jobs enqueued at ``rate`` while a SQL-only loop drains the queue (the
    producer's background jobs and these) ``claim`` jobs at a time."""
    url, statements = app.db.url, app.db.statements
    stamp = app.get_task(STAMP)
    inserts = []
    for n in range(jobs):
        plan = insert_plan([stamp.row(JobSpec(STAMP, {"key": n}))], [{"key": n}])
        inserts.append(_insert_params(plan.sent[0], plan.args))
    params = claim_params([NOOP, STAMP], claim)
    async with (
        await psycopg.AsyncConnection.connect(url, autocommit=True) as sender,
        await psycopg.AsyncConnection.connect(url, autocommit=True) as listener,
        await claim_connection(url) as claimer,
        await psycopg.AsyncConnection.connect(url, autocommit=True) as completer,
        _vacuumed(app),
    ):
        await listener.execute(f'LISTEN "{statements.channel("jobs")}"')
        noted = asyncio.Event()
        sent: dict[int, float] = {}
        arrived: dict[int, float] = {}

        async def listen() -> None:
            async for _ in listener.notifies():
                noted.set()

        async def drain() -> None:
            while len(arrived) < jobs:
                noted.clear()
                rows = await (await claimer.execute(statements["job_claim"], params)).fetchall()
                now = time.perf_counter()
                if not rows:
                    with contextlib.suppress(TimeoutError):
                        await asyncio.wait_for(noted.wait(), 0.5)  # the worker's poll is 5 s
                    continue
                for row in rows:  # by position: id, queue, task, args, ... execution_id
                    if row[2] == STAMP:
                        arrived[json.loads(row[3])["key"]] = now
                done = [
                    Completion(r[0], r[17], ExecutionState.SUCCEEDED, None, None, 0.0) for r in rows
                ]
                await completer.execute(
                    statements["job_complete_many"], {"outcomes": _outcomes(done)}
                )

        listening = asyncio.create_task(listen())
        draining = asyncio.create_task(drain())
        interval = 1.0 / rate
        next_at = time.perf_counter()
        for n in range(jobs):
            next_at += interval
            await sender.execute(statements["job_insert"], inserts[n])
            sent[n] = time.perf_counter()  # autocommit: committed on return, as the bench's
            await asyncio.sleep(max(0.0, next_at - time.perf_counter()))
        await asyncio.wait_for(draining, 60)
        listening.cancel()
    return [(arrived[n] - sent[n]) * 1000 for n in range(jobs)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--url", required=True)
    parser.add_argument("--jobs", type=int, default=500)
    parser.add_argument("--rate", type=float, default=50.0)
    parser.add_argument("--background-rate", type=float, default=0.0)
    parser.add_argument("--claim", type=int, default=50)
    args = parser.parse_args()
    app = make_app(database_url=args.url, schema=SCHEMA)  # tickwork bench's task
    try:
        app.migrate()
        if args.background_rate:
            with _background(app, args.background_rate):
                samples = asyncio.run(measure_loaded(app, args.jobs, args.rate, args.claim))
        else:
            samples = asyncio.run(measure(app, args.jobs, args.rate))
        results = summary(samples)
    finally:
        app.close()
        with psycopg.connect(args.url, autocommit=True) as conn:
            conn.execute(f"DROP SCHEMA IF EXISTS {SCHEMA} CASCADE")
    print(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
