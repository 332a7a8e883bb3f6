"""The ``tickwork bench`` workloads, run on PgQueuer and on Procrastinate.

Runs inside ``benchmarks/.venv-peers`` (see ``setup_peers.sh``); tickwork itself is not
imported. Prints JSON in the shape of ``tickwork bench --json``::

    {"environment": {...}, "results": [{"workload", "jobs", "seconds", "per_second", "details"}]}

Workloads (each starts from a freshly installed schema of the peer's own, dropped first):

- enqueue-single: one enqueue per transaction, one after another (capped at 5000 jobs);
- enqueue-batch: the peer's batch enqueue, ``--batch`` jobs per call;
- drain: ``--jobs`` pre-enqueued no-op async jobs run by one worker in this process, once
  per ``--drain-config`` (``default`` = the library's defaults, or a preset / JSON object);
  timed from the worker's start until every job's completion is written to the database;
- latency: an idle worker; jobs enqueued at ``--rate`` per second; time from the enqueue's
  commit to the handler starting (``time.perf_counter`` in this process).

PgQueuer lives in schema ``pgqueuer_bench`` (set through ``PGQUEUER_SCHEMA``, as its CLI
does) and Procrastinate in schema ``procrastinate_bench`` (through the connections'
``search_path``); their schemas are installed with the libraries' own installers.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import importlib.metadata
import itertools
import json
import logging
import os
import platform
import statistics
import sys
import time
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import asdict, dataclass, field
from datetime import timedelta
from typing import Any, Protocol

PGQ_SCHEMA = "pgqueuer_bench"
PROC_SCHEMA = "procrastinate_bench"
# PgQueuer reads its object names from the environment once (``db_settings()``, cached);
# this is how its own CLI (``pgq --schema``) points it at a schema.
os.environ["PGQUEUER_SCHEMA"] = PGQ_SCHEMA

import asyncpg  # noqa: E402
import psycopg  # noqa: E402

SYSTEMS = ("pgqueuer", "procrastinate")
WORKLOADS = ("enqueue-single", "enqueue-batch", "drain", "latency")
NOOP = "bench.noop"
STAMP = "bench.stamp"
QUEUE = "bench"
SINGLE_CAP = 5000  # as tickwork bench: enqueue-single is capped at 5000 jobs
FILL_CHUNK = 5000

# Drain settings. "default" is the library's defaults; the others are the best settings
# ``--sweep`` (then 3 runs of the front-runners at 20,000 jobs) found on the 2-core
# reference machine, see benchmarks/README.md. compare.py reports the best median of all.
DRAIN_PRESETS: dict[str, dict[str, dict[str, Any]]] = {
    "pgqueuer": {
        # PgQueuer.run / ``pgq run``: batch_size=10, no max_concurrent_tasks, one connection
        "default": {},
        "tuned": {"batch_size": 500},
        "tuned-pool": {"batch_size": 500, "driver": "pool", "pool_size": 4},
    },
    "procrastinate": {
        # run_worker_async: concurrency=1, the connector's pool (psycopg_pool: 4 connections)
        "default": {},
        "tuned": {"concurrency": 10},
    },
}

SWEEP_GRID: dict[str, list[dict[str, Any]]] = {
    "pgqueuer": [
        {"batch_size": b, "driver": d, **({"pool_size": p} if d == "pool" else {})}
        for b, (d, p) in itertools.product(
            (10, 25, 50, 100, 200, 500), (("connection", 0), ("pool", 4), ("pool", 10))
        )
    ]
    + [{"batch_size": 100, "max_concurrent_tasks": m} for m in (200, 1000)],
    "procrastinate": [
        {"concurrency": c, "pool_size": p}
        for c, p in itertools.product((1, 5, 10, 20, 50, 100), (4, 10, 25))
        if p <= max(4, c + 2)
    ]
    + [{"concurrency": c, "pool_size": 10, "delete_jobs": "successful"} for c in (10, 50)],
}


def log(message: str) -> None:
    print(f"[peers] {message}", file=sys.stderr, flush=True)


@dataclass(slots=True)
class BenchResult:
    """One workload's measurement (the fields of tickwork's ``BenchResult``)."""

    workload: str
    jobs: int
    seconds: float
    per_second: float
    details: dict[str, Any] = field(default_factory=dict)


@dataclass(slots=True)
class Environment:
    """Where the numbers were measured (tickwork's fields, plus the system measured)."""

    postgres: str
    settings: dict[str, str]
    python: str
    cpus: int
    machine: str
    system: str
    versions: dict[str, str]
    event_loop: str


def environment(url: str, system: str, loop: str) -> Environment:
    with psycopg.connect(url, autocommit=True) as conn:
        version = conn.execute("SHOW server_version").fetchone()
        names = ("synchronous_commit", "shared_buffers", "fsync", "max_connections")
        values = {}
        for name in names:
            row = conn.execute(f"SHOW {name}").fetchone()
            values[name] = str(row[0]) if row else "?"
    packages = {
        "pgqueuer": ("pgqueuer", "asyncpg", "uvloop"),
        "procrastinate": ("procrastinate", "psycopg", "psycopg-binary", "psycopg-pool"),
    }[system]
    versions = {}
    for package in packages:
        with contextlib.suppress(importlib.metadata.PackageNotFoundError):
            versions[package] = importlib.metadata.version(package)
    return Environment(
        postgres=str(version[0]) if version else "?",
        settings=values,
        python=platform.python_version(),
        cpus=os.cpu_count() or 0,
        machine=platform.machine(),
        system=system,
        versions=versions,
        event_loop=loop,
    )


def admin(url: str, *statements: str) -> None:
    """Run statements on a short-lived autocommit connection."""
    with psycopg.connect(url, autocommit=True) as conn:
        for statement in statements:
            conn.execute(statement)  # type: ignore[arg-type]


def count(url: str, query: str) -> int:
    with psycopg.connect(url, autocommit=True) as conn:
        row = conn.execute(query).fetchone()  # type: ignore[arg-type]
    return int(row[0]) if row else 0


def latency_result(latencies: list[float], rate: float, extra: dict[str, Any]) -> BenchResult:
    ordered = sorted(latencies)
    p50 = statistics.median(ordered)
    p99 = ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))]
    return BenchResult(
        "latency",
        len(latencies),
        sum(latencies) / 1000,
        rate,
        {
            "rate": rate,
            "p50_ms": round(p50, 3),
            "p99_ms": round(p99, 3),
            "max_ms": round(ordered[-1], 3),
            **extra,
        },
    )


async def paced(jobs: int, rate: float, enqueue: Callable[[int], Awaitable[None]]) -> None:
    """Call ``enqueue(n)`` for n in range(jobs), ``rate`` per second (as tickwork bench)."""
    interval = 1.0 / rate
    next_at = time.perf_counter()
    for n in range(jobs):
        next_at += interval
        await enqueue(n)
        await asyncio.sleep(max(0.0, next_at - time.perf_counter()))


async def wait_or_fail(event: asyncio.Event, worker: asyncio.Task[Any], timeout: float) -> None:
    """Wait for ``event``; fail if the worker task ends first or time runs out."""
    waiter = asyncio.ensure_future(event.wait())
    done, _ = await asyncio.wait({waiter, worker}, timeout=timeout, return_when="FIRST_COMPLETED")
    if waiter not in done:
        waiter.cancel()
        if worker in done:
            worker.result()  # raises the worker's exception, if any
            raise RuntimeError("the worker stopped before all jobs ran")
        raise TimeoutError(f"jobs not done after {timeout:.0f} s")


class Runner(Protocol):
    name: str

    async def enqueue_single(self, jobs: int) -> BenchResult: ...
    async def enqueue_batch(self, jobs: int, batch: int) -> BenchResult: ...
    async def drain(self, jobs: int, name: str, config: dict[str, Any]) -> BenchResult: ...
    async def latency(self, jobs: int, rate: float) -> BenchResult: ...


# -- PgQueuer ------------------------------------------------------------------------------


class PgQueuerRunner:
    """PgQueuer: asyncpg driver, ``Queries.enqueue`` and ``PgQueuer.run`` (as ``pgq run``)."""

    name = "pgqueuer"

    def __init__(self, url: str) -> None:
        self.url = url

    async def reset(self) -> None:
        """Drop the bench schema; install PgQueuer's (``Queries.install``, as ``pgq install``)."""
        from pgqueuer import AsyncpgDriver, Queries

        admin(self.url, f"DROP SCHEMA IF EXISTS {PGQ_SCHEMA} CASCADE")
        conn = await asyncpg.connect(self.url)
        try:
            await Queries(AsyncpgDriver(conn)).install()
        finally:
            await conn.close()

    @contextlib.asynccontextmanager
    async def queries(self) -> Any:
        from pgqueuer import AsyncpgDriver, Queries

        conn = await asyncpg.connect(self.url)
        try:
            yield Queries(AsyncpgDriver(conn))
        finally:
            await conn.close()

    async def enqueue_single(self, jobs: int) -> BenchResult:
        await self.reset()
        async with self.queries() as q:
            await q.enqueue(NOOP, b"-1")  # warm the connection and the statement
            start = time.perf_counter()
            for n in range(jobs):
                await q.enqueue(NOOP, str(n).encode())
            seconds = time.perf_counter() - start
        return BenchResult("enqueue-single", jobs, seconds, jobs / seconds)

    async def _enqueue_many(self, q: Any, first: int, size: int) -> None:
        await q.enqueue([NOOP] * size, [str(first + i).encode() for i in range(size)], [0] * size)

    async def enqueue_batch(self, jobs: int, batch: int) -> BenchResult:
        await self.reset()
        async with self.queries() as q:
            await self._enqueue_many(q, -1, 1)
            start = time.perf_counter()
            done = 0
            while done < jobs:
                size = min(batch, jobs - done)
                await self._enqueue_many(q, done, size)
                done += size
            seconds = time.perf_counter() - start
        return BenchResult("enqueue-batch", jobs, seconds, jobs / seconds, {"batch": batch})

    @contextlib.asynccontextmanager
    async def driver(self, config: dict[str, Any]) -> Any:
        """The documented drivers: one asyncpg connection (default) or an asyncpg pool."""
        from pgqueuer import AsyncpgDriver, AsyncpgPoolDriver

        if config.get("driver", "connection") == "pool":
            size = int(config.get("pool_size", 4))
            pool = await asyncpg.create_pool(self.url, min_size=size, max_size=size)
            try:
                yield AsyncpgPoolDriver(pool)
            finally:
                await pool.close()
        else:
            conn = await asyncpg.connect(self.url)
            try:
                yield AsyncpgDriver(conn)
            finally:
                await conn.close()

    @staticmethod
    def run_kwargs(config: dict[str, Any]) -> dict[str, Any]:
        kwargs: dict[str, Any] = {}
        if "batch_size" in config:
            kwargs["batch_size"] = int(config["batch_size"])
        if config.get("max_concurrent_tasks"):
            kwargs["max_concurrent_tasks"] = int(config["max_concurrent_tasks"])
        return kwargs

    async def drain(self, jobs: int, name: str, config: dict[str, Any]) -> BenchResult:
        from pgqueuer import Job, PgQueuer

        await self.reset()
        async with self.queries() as q:
            for offset in range(0, jobs, FILL_CHUNK):
                await self._enqueue_many(q, offset, min(FILL_CHUNK, jobs - offset))
        admin(self.url, f"VACUUM ANALYZE {PGQ_SCHEMA}.pgqueuer")

        ran = 0
        all_ran = asyncio.Event()
        async with self.driver(config) as driver:
            pgq = PgQueuer(driver)

            @pgq.entrypoint(NOOP, accepts_context=False)
            async def noop(job: Job) -> None:
                nonlocal ran
                ran += 1
                if ran >= jobs:
                    all_ran.set()

            start = time.perf_counter()
            worker = asyncio.create_task(pgq.run(**self.run_kwargs(config)))
            await wait_or_fail(all_ran, worker, timeout=max(600.0, jobs / 10))
            handlers_done = time.perf_counter() - start
            # Shutting down flushes the buffered status writes (the jobs' completions):
            # the clock stops once every completion is in the database.
            pgq.shutdown.set()
            await worker
            seconds = time.perf_counter() - start
        left = count(self.url, f"SELECT count(*) FROM {PGQ_SCHEMA}.pgqueuer")
        if left:
            raise RuntimeError(f"pgqueuer drain: {left} jobs still in the queue table")
        kwargs = {"batch_size": 10, **self.run_kwargs(config)}
        details = {
            "config": name,
            "driver": config.get("driver", "connection"),
            **kwargs,
            "handlers_done_s": round(handlers_done, 3),
        }
        if config.get("driver") == "pool":
            details["pool_size"] = int(config.get("pool_size", 4))
        return BenchResult("drain", jobs, seconds, jobs / seconds, details)

    async def latency(self, jobs: int, rate: float) -> BenchResult:
        from pgqueuer import Job, PgQueuer
        from pgqueuer.errors import FailingListenerError

        await self.reset()
        started: dict[int, float] = {}
        committed: dict[int, float] = {}
        all_ran = asyncio.Event()
        async with self.driver({}) as driver:
            pgq = PgQueuer(driver)

            @pgq.entrypoint(STAMP, accepts_context=False)
            async def stamp(job: Job) -> None:
                started[int(job.payload or b"0")] = time.perf_counter()
                if len(started) >= jobs:
                    all_ran.set()

            worker = asyncio.create_task(pgq.run())
            # Idle and listening: a NOTIFY/LISTEN round trip through the worker's listener.
            for _ in range(100):
                await asyncio.sleep(0.1)
                if worker.done():
                    worker.result()
                with contextlib.suppress(FailingListenerError):
                    await pgq.qm.listener_healthy(timeout=timedelta(seconds=1))
                    break
            else:
                raise RuntimeError("pgqueuer worker never started listening")
            await asyncio.sleep(0.5)
            async with self.queries() as q:

                async def enqueue(n: int) -> None:
                    await q.enqueue(STAMP, str(n).encode())  # autocommit: committed on return
                    committed[n] = time.perf_counter()

                await paced(jobs, rate, enqueue)
            await wait_or_fail(all_ran, worker, timeout=60)
            pgq.shutdown.set()
            await worker
        return latency_result(
            [(started[n] - committed[n]) * 1000 for n in range(jobs)],
            rate,
            {"driver": "connection", "batch_size": 10},
        )


# -- Procrastinate -------------------------------------------------------------------------


class ProcrastinateRunner:
    """Procrastinate: ``PsycopgConnector``, ``defer_async``/``batch_defer_async`` and
    ``App.run_worker_async``."""

    name = "procrastinate"

    def __init__(self, url: str) -> None:
        self.url = url
        self.ran = 0
        self.ran_target = 0
        self.all_ran = asyncio.Event()
        self.started: dict[int, float] = {}

    def app(self, pool_size: int | None = None) -> Any:
        from procrastinate import App, PsycopgConnector

        pool: dict[str, Any] = {}
        if pool_size:
            pool = {"min_size": pool_size, "max_size": pool_size}
        connector = PsycopgConnector(
            conninfo=self.url, kwargs={"options": f"-c search_path={PROC_SCHEMA}"}, **pool
        )
        app = App(connector=connector)

        @app.task(name=NOOP, queue=QUEUE)
        async def noop(n: int = 0) -> None:
            self.ran += 1
            if self.ran >= self.ran_target:
                self.all_ran.set()

        @app.task(name=STAMP, queue=QUEUE)
        async def stamp(key: int) -> None:
            self.started[key] = time.perf_counter()
            if len(self.started) >= self.ran_target:
                self.all_ran.set()

        return app

    async def reset(self) -> None:
        """Drop the bench schema and apply Procrastinate's (``SchemaManager``, as
        ``procrastinate schema --apply``)."""
        admin(
            self.url,
            f"DROP SCHEMA IF EXISTS {PROC_SCHEMA} CASCADE",
            f"CREATE SCHEMA {PROC_SCHEMA}",
        )
        async with self.app().open_async() as app:
            await app.schema_manager.apply_schema_async()

    async def enqueue_single(self, jobs: int) -> BenchResult:
        await self.reset()
        async with self.app().open_async() as app:
            task = app.tasks[NOOP]
            await task.defer_async(n=-1)  # warm the pool
            start = time.perf_counter()
            for n in range(jobs):
                await task.defer_async(n=n)
            seconds = time.perf_counter() - start
        return BenchResult("enqueue-single", jobs, seconds, jobs / seconds)

    async def enqueue_batch(self, jobs: int, batch: int) -> BenchResult:
        await self.reset()
        async with self.app().open_async() as app:
            task = app.tasks[NOOP]
            await task.batch_defer_async({"n": -1})
            start = time.perf_counter()
            done = 0
            while done < jobs:
                size = min(batch, jobs - done)
                await task.batch_defer_async(*({"n": done + i} for i in range(size)))
                done += size
            seconds = time.perf_counter() - start
        return BenchResult("enqueue-batch", jobs, seconds, jobs / seconds, {"batch": batch})

    async def drain(self, jobs: int, name: str, config: dict[str, Any]) -> BenchResult:
        await self.reset()
        async with self.app().open_async() as app:
            task = app.tasks[NOOP]
            for offset in range(0, jobs, FILL_CHUNK):
                size = min(FILL_CHUNK, jobs - offset)
                await task.batch_defer_async(*({"n": offset + i} for i in range(size)))
        admin(self.url, f"VACUUM ANALYZE {PROC_SCHEMA}.procrastinate_jobs")

        self.ran, self.ran_target, self.all_ran = 0, jobs, asyncio.Event()
        concurrency = int(config.get("concurrency", 1))
        pool_size = int(config["pool_size"]) if config.get("pool_size") else None
        async with self.app(pool_size).open_async() as app:
            kwargs: dict[str, Any] = {"queues": [QUEUE], "install_signal_handlers": False}
            if "concurrency" in config:
                kwargs["concurrency"] = concurrency
            if "delete_jobs" in config:
                kwargs["delete_jobs"] = config["delete_jobs"]
            start = time.perf_counter()
            worker = asyncio.create_task(app.run_worker_async(**kwargs))
            await wait_or_fail(self.all_ran, worker, timeout=max(600.0, jobs / 10))
            handlers_done = time.perf_counter() - start
            # Cancelling run_worker_async stops the worker gracefully: it waits for the
            # running jobs, whose completions (finish_job) are written before they end.
            worker.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await worker
            seconds = time.perf_counter() - start
        unfinished = count(
            self.url,
            f"SELECT count(*) FROM {PROC_SCHEMA}.procrastinate_jobs WHERE status <> 'succeeded'",
        )
        if unfinished or self.ran != jobs:
            raise RuntimeError(f"procrastinate drain: {unfinished} jobs left, {self.ran} ran")
        details = {
            "config": name,
            "concurrency": concurrency,
            "pool_size": pool_size or 4,
            "delete_jobs": config.get("delete_jobs", "never"),
            "handlers_done_s": round(handlers_done, 3),
        }
        return BenchResult("drain", jobs, seconds, jobs / seconds, details)

    async def latency(self, jobs: int, rate: float) -> BenchResult:
        await self.reset()
        committed: dict[int, float] = {}
        self.started, self.ran_target, self.all_ran = {}, jobs, asyncio.Event()
        async with self.app().open_async() as app:
            # concurrency 10, as tickwork bench's latency worker; LISTEN/NOTIFY is the default
            worker = asyncio.create_task(
                app.run_worker_async(queues=[QUEUE], concurrency=10, install_signal_handlers=False)
            )
            await asyncio.sleep(1.0)  # no public "listening" hook: let the listener start
            if worker.done():
                worker.result()
            task = app.tasks[STAMP]

            async def enqueue(n: int) -> None:
                await task.defer_async(key=n)  # the pool's transaction committed on return
                committed[n] = time.perf_counter()

            await paced(jobs, rate, enqueue)
            await wait_or_fail(self.all_ran, worker, timeout=60)
            worker.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await worker
        return latency_result(
            [(self.started[n] - committed[n]) * 1000 for n in range(jobs)],
            rate,
            {"concurrency": 10},
        )


# -- driver --------------------------------------------------------------------------------


def drain_configs(system: str, specs: list[str]) -> Iterator[tuple[str, dict[str, Any]]]:
    for spec in specs:
        if spec.lstrip().startswith("{"):
            config = json.loads(spec)
            yield ",".join(f"{k}={v}" for k, v in config.items()) or "default", config
        elif spec in DRAIN_PRESETS[system]:
            yield spec, DRAIN_PRESETS[system][spec]
        else:
            choices = ", ".join(DRAIN_PRESETS[system])
            raise SystemExit(f"--drain-config {spec!r}: a JSON object or one of {choices}")


async def run(args: argparse.Namespace) -> list[BenchResult]:
    runner: Runner
    runner = (
        PgQueuerRunner(args.url) if args.system == "pgqueuer" else ProcrastinateRunner(args.url)
    )
    results: list[BenchResult] = []
    if args.sweep:
        for config in SWEEP_GRID[args.system]:
            name = ",".join(f"{k}={v}" for k, v in config.items())
            result = await runner.drain(args.jobs, name, config)
            log(f"{args.system} drain {name}: {result.per_second:,.0f} jobs/s")
            results.append(result)
        return results
    for workload in args.workloads:
        if workload == "enqueue-single":
            jobs = min(args.jobs, SINGLE_CAP)
            results.append(await runner.enqueue_single(jobs))
        elif workload == "enqueue-batch":
            results.append(await runner.enqueue_batch(args.jobs, args.batch))
        elif workload == "drain":
            for name, config in drain_configs(args.system, args.drain_config):
                results.append(await runner.drain(args.jobs, name, config))
        elif workload == "latency":
            results.append(await runner.latency(args.latency_jobs, args.rate))
        last = results[-1]
        log(f"{args.system} {workload}: {last.per_second:,.1f}/s {last.details}")
    return results


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("system", choices=SYSTEMS)
    parser.add_argument(
        "--url",
        default=os.environ.get("BENCH_DATABASE_URL", "postgresql://127.0.0.1:5432/bench_compare"),
        help="database URL (default: $BENCH_DATABASE_URL or bench_compare on 127.0.0.1)",
    )
    parser.add_argument(
        "-w",
        "--workload",
        default=",".join(WORKLOADS),
        help="comma-separated: " + ", ".join(WORKLOADS),
    )
    parser.add_argument("--jobs", type=int, default=20_000, help="jobs per throughput workload")
    parser.add_argument("--batch", type=int, default=1000, help="batch size (enqueue-batch)")
    parser.add_argument("--rate", type=float, default=50.0, help="jobs per second (latency)")
    parser.add_argument("--latency-jobs", type=int, default=500, help="jobs measured (latency)")
    parser.add_argument(
        "--drain-config",
        action="append",
        help="drain settings: a preset name (default, tuned, ...) or a JSON object; "
        "repeatable (default: every preset)",
    )
    parser.add_argument(
        "--loop",
        choices=("auto", "asyncio", "uvloop"),
        default="auto",
        help="event loop; auto = what the library's own CLI uses "
        "(uvloop for PgQueuer, asyncio for Procrastinate)",
    )
    parser.add_argument("--sweep", action="store_true", help="drain over a grid of settings")
    args = parser.parse_args(argv)
    args.workloads = [w.strip() for w in args.workload.split(",") if w.strip()]
    for name in args.workloads:
        if name not in WORKLOADS:
            parser.error(f"--workload {name!r} must be one of {', '.join(WORKLOADS)}")
    args.drain_config = args.drain_config or list(DRAIN_PRESETS[args.system])
    if args.loop == "auto":
        args.loop = "uvloop" if args.system == "pgqueuer" else "asyncio"
    return args


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    # as ``tickwork bench`` (log level ERROR): no per-job or start-up chatter on stderr
    logging.basicConfig(level=logging.ERROR)
    for name in ("pgqueuer", "procrastinate"):
        logging.getLogger(name).setLevel(logging.ERROR)
    env = environment(args.url, args.system, args.loop)
    if args.loop == "uvloop":
        import uvloop

        results = uvloop.run(run(args))
    else:
        results = asyncio.run(run(args))
    print(json.dumps({"environment": asdict(env), "results": [asdict(r) for r in results]}))


if __name__ == "__main__":
    main()
