"""``tickwork bench``: throughput and latency of the job path on a real database.

A run works in a schema it makes for itself (``tickwork_bench_<random>``, or the
``TICKWORK_SCHEMA`` named when that schema does not exist yet), marks it as its own, empties
it before each workload and drops it at the end. It refuses a schema it did not make: its
tables would be emptied and dropped.

Workloads:
- enqueue-single: one ``enqueue`` per transaction, one after another;
- enqueue-batch: ``enqueue_many`` in batches of ``--batch`` jobs;
- drain: pre-enqueued no-op jobs run by ``--processes`` worker processes (1 = in this process),
  timed from the first claim to the last outcome on the database clock;
- latency: an idle worker; jobs enqueued at ``--rate`` per second; time from the enqueue's
  commit to the handler starting.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import logging
import multiprocessing
import os
import platform
import resource
import secrets
import statistics
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import AbstractContextManager
from dataclasses import asdict, dataclass, field
from typing import Any

from tickwork.app import App
from tickwork.db.scratch import empty, is_scratch, refusal, scratch_schema
from tickwork.queue.enqueue import JobSpec
from tickwork.queue.vacuum import VACUUM_CHECK_INTERVAL, JobVacuum
from tickwork.services.periodic import run_periodically
from tickwork.worker.attempt import Outcome

BENCH_SCHEMA_PREFIX = "tickwork_bench_"
"""A run with no ``TICKWORK_SCHEMA`` makes a schema named this plus 8 random hex digits."""
BENCH_QUEUE = "bench"
WORKLOADS = (
    "enqueue-single",
    "enqueue-batch",
    "drain",
    "latency",
    "latency-loaded",
    "memory",
    "steady",
)
NOOP = "bench.noop"
STAMP = "bench.stamp"
HOLD = "bench.hold"
_release: list[asyncio.Event] = []  # the memory workload's: held jobs wait for it

started_at: dict[int, float] = {}
"""Handler start times by job id (perf_counter), filled by the ``bench.stamp`` task."""


def bench_schema() -> str:
    """The schema a run asks for: ``TICKWORK_SCHEMA`` when set, else a new random name."""
    return os.environ.get("TICKWORK_SCHEMA") or BENCH_SCHEMA_PREFIX + secrets.token_hex(4)


def make_app(**overrides: Any) -> App:
    """An App with the benchmark's tasks (on :func:`bench_schema` unless told otherwise)."""
    overrides.setdefault("schema", bench_schema())
    app = App(**overrides)

    @app.task(name=NOOP, queue=BENCH_QUEUE)
    async def noop(n: int = 0) -> None:
        return None

    @app.task(name=STAMP, queue=BENCH_QUEUE, pass_context=False)
    async def stamp(key: int) -> None:
        started_at[key] = time.perf_counter()

    @app.task(name=HOLD, queue=BENCH_QUEUE)
    async def hold(n: int = 0) -> None:
        await _release[-1].wait()

    return app


def __getattr__(name: str) -> Any:
    # ``tickwork worker --app tickwork.cli.bench:bench_app`` (the drain's worker processes)
    if name == "bench_app":
        return make_app()
    raise AttributeError(name)


@dataclass(slots=True)
class BenchResult:
    """One workload's measurement."""

    workload: str
    jobs: int
    seconds: float
    per_second: float
    details: dict[str, Any] = field(default_factory=dict)


@dataclass(slots=True)
class Environment:
    """Where the numbers were measured."""

    postgres: str
    settings: dict[str, str]
    python: str
    cpus: int
    machine: str


def environment(app: App) -> Environment:
    with app.db.pool().connection() as conn:
        version = conn.execute("SHOW server_version").fetchone()
        names = ("synchronous_commit", "shared_buffers", "fsync", "max_connections")
        values = {n: str(conn.execute(f"SHOW {n}").fetchone()[0]) for n in names}  # type: ignore[index]
    return Environment(
        postgres=str(version[0]) if version else "?",
        settings=values,
        python=platform.python_version(),
        cpus=os.cpu_count() or 0,
        machine=platform.machine(),
    )


def own_schema(app: App) -> AbstractContextManager[None]:
    """The app's schema as the bench's own for the length of the block (see
    :mod:`tickwork.db.scratch`)."""
    return scratch_schema(app.db, "bench", close=app.close)


def reset(app: App) -> None:
    """Migrate the bench schema and empty it (refused unless a bench made the schema)."""
    with app.db.pool().connection() as conn:
        if not is_scratch(conn, app.db):
            raise refusal(app.db, "bench")
    app.migrate()
    schema = app.settings.schema_name
    with app.db.pool().connection() as conn:
        empty(conn, app.db)
        conn.execute(f"VACUUM ANALYZE {schema}.jobs")
        conn.execute(f"VACUUM ANALYZE {schema}.executions")


WARM_RUNS = 6
"""Runs of a statement before the timing starts: psycopg prepares a statement on the server
at its sixth run (``prepare_threshold`` 5), as a long-running application's statements are;
the peers' driver (asyncpg) prepares at the first."""


def _warm(app: App, batch: int) -> None:
    """The pool opened, the enqueue statement of ``batch`` jobs (one, or the batch statement)
    prepared, and the set-up's garbage collected."""
    for _ in range(WARM_RUNS):
        app.enqueue_many([JobSpec(NOOP, {"n": -1}) for _ in range(batch)])
    gc.collect()


def bench_enqueue_single(app: App, jobs: int, progress: Callable[[int], None]) -> BenchResult:
    reset(app)
    _warm(app, 1)
    start = time.perf_counter()
    for n in range(jobs):
        app.enqueue(NOOP, {"n": n})
        if n % 500 == 0:
            progress(n)
    seconds = time.perf_counter() - start
    return BenchResult("enqueue-single", jobs, seconds, jobs / seconds)


def bench_enqueue_batch(
    app: App, jobs: int, batch: int, progress: Callable[[int], None]
) -> BenchResult:
    reset(app)
    _warm(app, min(batch, 2))
    start = time.perf_counter()
    done = 0
    while done < jobs:
        size = min(batch, jobs - done)
        app.enqueue_many([JobSpec(NOOP, {"n": done + i}) for i in range(size)])
        done += size
        progress(done)
    seconds = time.perf_counter() - start
    return BenchResult("enqueue-batch", jobs, seconds, jobs / seconds, {"batch": batch})


def _fill(app: App, jobs: int) -> None:
    reset(app)
    for offset in range(0, jobs, 5000):
        size = min(5000, jobs - offset)
        app.enqueue_many([JobSpec(NOOP, {"n": offset + i}) for i in range(size)])
    with app.db.pool().connection() as conn:
        conn.execute(f"VACUUM ANALYZE {app.settings.schema_name}.jobs")


RSS_EARLY_MARK = 50_000
"""Jobs after which the drain notes the worker's peak RSS, to compare with the end."""


@contextlib.asynccontextmanager
async def _vacuumed(app: App) -> AsyncIterator[None]:
    """The jobs table vacuumed by its dead rows for the block's duration, as the retention
    leader of ``tickwork worker`` does (the bench's own worker runs no retention)."""
    vacuum = JobVacuum(
        await app.db.async_pool(),
        app.db.store,
        app.settings.retention,
        connect=app.db.connect_async,  # as retention's: no statement_timeout on a vacuum
    )
    stop = asyncio.Event()
    running = asyncio.create_task(
        run_periodically(
            vacuum.run_once,
            interval=VACUUM_CHECK_INTERVAL,
            stop=stop,
            log=logging.getLogger("tickwork.bench"),
            name="vacuum",
        )
    )
    try:
        yield
    finally:
        stop.set()
        await running


def _peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # kB on Linux


async def _drain_here(
    app: App, jobs: int, concurrency: int | None, progress: Callable[[int], None]
) -> dict[str, float]:
    done = 0
    finished = asyncio.Event()
    memory: dict[str, float] = {}

    def on_finished(outcome: Outcome) -> None:
        nonlocal done
        done += 1
        if done % 1000 == 0:
            progress(done)
        if done == RSS_EARLY_MARK:
            memory["peak_rss_mb_at_50k"] = round(_peak_rss_mb(), 1)
        if done >= jobs:
            finished.set()

    worker = app.worker(
        queues=[BENCH_QUEUE], concurrency=concurrency, on_finished=on_finished, poll_interval=0.5
    )
    await worker.open()
    start = time.perf_counter()
    running = asyncio.create_task(worker.run())
    async with _vacuumed(app):
        await finished.wait()
    memory["peak_rss_mb_at_end"] = round(_peak_rss_mb(), 1)
    memory["wall_seconds"] = round(time.perf_counter() - start, 3)
    worker.request_stop()
    await running
    return memory


def _drain_processes(
    app: App, jobs: int, concurrency: int | None, processes: int, progress: Callable[[int], None]
) -> float:
    env = dict(os.environ)
    env["TICKWORK_SCHEMA"] = app.settings.schema_name
    env["TICKWORK_DATABASE_URL"] = app.db.url
    command = [
        sys.executable,
        "-m",
        "tickwork",
        "worker",
        "--app",
        "tickwork.cli.bench:bench_app",
        "--queues",
        BENCH_QUEUE,
        *(["--concurrency", str(concurrency)] if concurrency is not None else []),
        "--log-level",
        "ERROR",
    ]
    query = f"SELECT count(*) FROM {app.settings.schema_name}.jobs WHERE state = 'SUCCEEDED'"
    start = time.perf_counter()
    procs = [subprocess.Popen(command, env=env) for _ in range(processes)]
    try:
        with app.db.pool().connection() as conn:
            while True:
                row = conn.execute(query).fetchone()
                done = int(row[0]) if row else 0
                progress(done)
                if done >= jobs:
                    break
                if any(p.poll() is not None for p in procs):
                    raise RuntimeError("a bench worker process exited early")
                time.sleep(0.01)
        return time.perf_counter() - start
    finally:
        for proc in procs:
            proc.terminate()
        for proc in procs:
            proc.wait(30)


def _drain_span(app: App) -> float:
    """Seconds from the first claim to the last outcome, on the database clock (process
    start-up is not counted)."""
    schema = app.settings.schema_name
    with app.db.pool().connection() as conn:
        row = conn.execute(
            f"SELECT extract(epoch FROM max(finished_at) - min(started_at))::float8"
            f" FROM {schema}.executions"
        ).fetchone()
    return float(row[0]) if row and row[0] else 0.0


def bench_drain(
    app: App, jobs: int, concurrency: int | None, processes: int, progress: Callable[[int], None]
) -> BenchResult:
    """Drain ``jobs`` no-op async jobs with ``processes`` workers at ``concurrency`` (None:
    the worker's defaults, as ``tickwork worker`` with no options runs)."""
    _fill(app, jobs)
    resolved = app.worker(concurrency=concurrency)
    details: dict[str, Any] = {
        "concurrency": resolved.concurrency,
        "threads": resolved.threads,
        "defaults": concurrency is None,
        "processes": processes,
    }
    if processes <= 1:
        details |= asyncio.run(_drain_here(app, jobs, concurrency, progress))
    else:
        _drain_processes(app, jobs, concurrency, processes, progress)
    seconds = _drain_span(app)
    return BenchResult(
        "drain",
        jobs,
        seconds,
        jobs / seconds,
        details,
    )


def _produce(url: str, schema: str, rate: float, stop: Any) -> None:
    """A producer process: enqueue no-op jobs at ``rate`` a second (a batch every 20 ms, one
    transaction each) until ``stop`` (a multiprocessing event) is set."""
    app = make_app(database_url=url, schema=schema)
    try:
        enqueued = 0
        start = time.perf_counter()
        while not stop.is_set():
            due = int(rate * (time.perf_counter() - start)) - enqueued
            if due > 0:
                app.enqueue_many([JobSpec(NOOP, {"n": enqueued + i}) for i in range(due)])
                enqueued += due
            stop.wait(0.02)
    finally:
        app.close()


@contextlib.contextmanager
def _background(app: App, rate: float) -> Iterator[None]:
    """A producer process enqueueing at ``rate`` (none when 0) for the block's duration: the
    load comes from another process, as from a web application, not from the worker's."""
    if not rate:
        yield
        return
    context = multiprocessing.get_context("spawn")
    stop = context.Event()
    producer = context.Process(
        target=_produce, args=(app.db.url, app.settings.schema_name, rate, stop), daemon=True
    )
    producer.start()
    try:
        yield
    finally:
        stop.set()
        producer.join(30)


async def _latency(
    app: App,
    jobs: int,
    rate: float,
    progress: Callable[[int], None],
    background: float = 0.0,
    concurrency: int | None = None,
) -> list[float]:
    started_at.clear()
    committed: dict[int, float] = {}
    seen = 0
    finished = asyncio.Event()

    def on_finished(outcome: Outcome) -> None:
        nonlocal seen
        if outcome.task != STAMP:
            return
        seen += 1
        if seen >= jobs:
            finished.set()

    # idle: 10 slots, as the peers' latency workers; under load, ``concurrency`` (None: the
    # worker's defaults)
    worker = app.worker(
        queues=[BENCH_QUEUE],
        concurrency=concurrency if background else 10,
        on_finished=on_finished,
        poll_interval=5.0,
    )
    running = asyncio.create_task(worker.run())
    await asyncio.wait_for(worker.listening.wait(), 30)
    pool = await app.db.async_pool()
    async with _vacuumed(app), pool.connection() as conn:
        interval = 1.0 / rate
        next_at = time.perf_counter()
        for n in range(jobs):
            next_at += interval
            job = await app.enqueue_async(STAMP, {"key": n}, conn=conn)
            committed[n] = time.perf_counter()  # autocommit: the insert committed on return
            del job
            progress(n + 1)
            await asyncio.sleep(max(0.0, next_at - time.perf_counter()))
    await asyncio.wait_for(finished.wait(), 60)
    worker.request_stop()
    await running
    return [(started_at[n] - committed[n]) * 1000 for n in range(jobs)]


def bench_latency(
    app: App,
    jobs: int,
    rate: float,
    progress: Callable[[int], None],
    background: float = 0.0,
    concurrency: int | None = None,
) -> BenchResult:
    """Pickup latency (enqueue commit to handler start) of jobs enqueued at ``rate``; with
    ``background``, while no-op jobs are enqueued to the same queue at that rate too."""
    reset(app)
    with _background(app, background):
        latencies = asyncio.run(_latency(app, jobs, rate, progress, background, concurrency))
    ordered = sorted(latencies)
    p50 = statistics.median(ordered)
    p99 = ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))]
    details: dict[str, Any] = {
        "rate": rate,
        "p50_ms": round(p50, 3),
        "p99_ms": round(p99, 3),
        "max_ms": round(ordered[-1], 3),
    }
    if background:
        details["background_rate"] = background
        details["concurrency"] = app.worker(concurrency=concurrency).concurrency
    name = "latency-loaded" if background else "latency"
    return BenchResult(name, jobs, sum(latencies) / 1000, rate, details)


def _rss_mb() -> float:
    """This process's resident memory now (Linux), else its peak."""
    try:
        with open("/proc/self/statm") as statm:
            pages = int(statm.read().split()[1])
        return pages * os.sysconf("SC_PAGE_SIZE") / 2**20
    except OSError:
        return _peak_rss_mb()


async def _memory(app: App, in_flight: int, progress: Callable[[int], None]) -> dict[str, Any]:
    _release.append(asyncio.Event())
    for start in range(0, in_flight, 1000):
        count = min(1000, in_flight - start)
        await app.enqueue_many_async([JobSpec(HOLD, {"n": start + i}) for i in range(count)])
    worker = app.worker(queues=[BENCH_QUEUE], concurrency=in_flight, poll_interval=0.5)
    await worker.open()
    gc.collect()
    idle = _rss_mb()
    running = asyncio.create_task(worker.run())
    while worker.in_flight < in_flight:  # a benchmark's progress poll, not a test's wait
        progress(worker.in_flight)
        await asyncio.sleep(0.05)
    gc.collect()
    loaded = _rss_mb()
    _release[-1].set()
    worker.request_stop()
    await running
    return {
        "in_flight": in_flight,
        "rss_idle_mb": round(idle, 1),
        "rss_loaded_mb": round(loaded, 1),
        "mb_per_1000": round((loaded - idle) / (in_flight / 1000), 2),
    }


def bench_memory(app: App, in_flight: int, progress: Callable[[int], None]) -> BenchResult:
    """What ``in_flight`` running async jobs cost the worker's memory: RSS with them all
    running against RSS with the worker open and idle."""
    reset(app)
    details = asyncio.run(_memory(app, in_flight, progress))
    return BenchResult("memory", in_flight, 0.0, details["mb_per_1000"], details)


STEADY_RETENTION_SECONDS = 60.0
"""In the steady workload finished jobs are kept this long, then deleted by retention."""
STEADY_SAMPLE_EVERY = 60.0
STEADY_EARLY_MARK = 300.0


async def _sizes(app: App) -> dict[str, Any]:
    from tickwork.ops.health import check

    async with (await app.db.async_pool()).connection() as conn:
        report = await check(conn, app.db.store)
    out: dict[str, Any] = {}
    for table in report.tables:
        if table.name in ("jobs", "executions"):
            out[f"{table.name}_kb"] = (table.table_bytes + table.index_bytes) // 1024
            out[f"{table.name}_dead"] = table.dead_tuples
            out[f"{table.name}_hot_ratio"] = (
                None if table.hot_ratio is None else round(table.hot_ratio, 3)
            )
    return out


async def _steady(
    app: App, rate: float, duration: float, concurrency: int | None, progress: Callable[[int], None]
) -> dict[str, Any]:
    """Enqueue at ``rate`` jobs/s (a batch every 100 ms) while a worker drains, with a short
    retention window; sample table and index sizes."""
    host = app.services(
        await app.db.async_pool(),
        {"executor", "retention"},
        queues=[BENCH_QUEUE],
        concurrency=concurrency,
        poll_interval=0.5,
    )
    running = asyncio.create_task(host.run())
    samples: list[dict[str, Any]] = []
    start = time.perf_counter()
    next_sample = STEADY_SAMPLE_EVERY
    enqueued = 0
    tick = 0.1
    while (elapsed := time.perf_counter() - start) < duration:
        due = int(rate * elapsed) - enqueued
        if due > 0:
            await app.enqueue_many_async([JobSpec(NOOP, {"n": enqueued + i}) for i in range(due)])
            enqueued += due
        if elapsed >= next_sample:
            sample = await _sizes(app)
            sample["minute"] = round(elapsed / 60, 1)
            sample["rss_mb"] = round(_rss_mb(), 1)
            samples.append(sample)
            next_sample += STEADY_SAMPLE_EVERY
        progress(int(elapsed))
        await asyncio.sleep(tick)
    host.request_stop()
    await running
    final = await _sizes(app)
    final["minute"] = round((time.perf_counter() - start) / 60, 1)
    final["rss_mb"] = round(_rss_mb(), 1)
    samples.append(final)
    early = next((s for s in samples if s["minute"] * 60 >= STEADY_EARLY_MARK), samples[0])
    return {
        "rate": rate,
        "duration_s": duration,
        "enqueued": enqueued,
        "at_5_min": early,
        "at_end": final,
        "samples": samples,
    }


def bench_steady(
    app: App, rate: float, duration: float, concurrency: int | None, progress: Callable[[int], None]
) -> BenchResult:
    """Table health under a constant load: sizes after 5 minutes versus at the end."""
    reset(app)
    steady_app = make_app(
        database_url=app.db.url,
        schema=app.settings.schema_name,
        retention={"finished_after": STEADY_RETENTION_SECONDS, "interval": 10.0},
    )
    try:
        details = asyncio.run(_steady(steady_app, rate, duration, concurrency, progress))
    finally:
        steady_app.close()
    return BenchResult("steady", int(details["enqueued"]), duration, rate, details)


def run(
    workloads: list[str],
    *,
    jobs: int,
    concurrency: int | None,
    processes: int,
    batch: int,
    rate: float,
    latency_jobs: int,
    duration: float = 1800.0,
    steady_rate: float = 5000.0,
    background_rate: float = 5000.0,
    in_flight: int = 5000,
    progress_factory: Callable[[str, int], Callable[[int], None]],
    app: App | None = None,
) -> tuple[Environment, list[BenchResult]]:
    """Run the chosen workloads in a schema made for the run and dropped after it (see
    :func:`own_schema`); ``progress_factory(name, total)`` returns a progress hook."""
    the_app = app or make_app()
    try:
        with own_schema(the_app):
            env = environment(the_app)
            results = []
            for name in workloads:
                if name == "enqueue-single":
                    single = min(jobs, 5000)
                    results.append(
                        bench_enqueue_single(the_app, single, progress_factory(name, single))
                    )
                elif name == "enqueue-batch":
                    results.append(
                        bench_enqueue_batch(the_app, jobs, batch, progress_factory(name, jobs))
                    )
                elif name == "drain":
                    results.append(
                        bench_drain(
                            the_app, jobs, concurrency, processes, progress_factory(name, jobs)
                        )
                    )
                elif name == "steady":
                    hook = progress_factory(name, int(duration))
                    results.append(bench_steady(the_app, steady_rate, duration, concurrency, hook))
                elif name in ("latency", "latency-loaded"):
                    load = background_rate if name == "latency-loaded" else 0.0
                    hook = progress_factory(name, latency_jobs)
                    results.append(
                        bench_latency(the_app, latency_jobs, rate, hook, load, concurrency)
                    )
                elif name == "memory":
                    hook = progress_factory(name, in_flight)
                    results.append(bench_memory(the_app, in_flight, hook))
            return env, results
    finally:
        the_app.close()


def as_json(env: Environment, results: list[BenchResult]) -> dict[str, Any]:
    return {"environment": asdict(env), "results": [asdict(r) for r in results]}


__all__ = ["WORKLOADS", "BenchResult", "Environment", "as_json", "make_app", "run"]
