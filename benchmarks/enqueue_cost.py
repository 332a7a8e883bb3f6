"""Client CPU of the enqueue path: per ``enqueue_many`` batch and per single ``enqueue``.

In a scratch schema (made, marked and dropped as ``tickwork bench``'s is) it enqueues
``--batches`` batches of ``--batch`` no-op jobs (``App.enqueue_many``, one transaction each)
and ``--single`` jobs one at a time (``App.enqueue``), sync and async, and prints for each
mode the client CPU per call (``time.process_time``: robust to other load on the machine)
and the wall time per call. With ``--profile`` it prints cProfile's top 20 (by own time)
of each mode too.

    .venv/bin/python benchmarks/enqueue_cost.py [--url postgresql://127.0.0.1:5432/test] \
        [--batches 30] [--batch 1000] [--single 1000] [--modes batch,single,...] [--profile]

To compare two versions of the code in one session, run it alternately with
``PYTHONPATH=<other checkout>/src``.
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import io
import os
import pstats
import time
from collections.abc import Callable

from tickwork.app import App
from tickwork.cli.bench import NOOP, make_app, own_schema, reset
from tickwork.queue.enqueue import JobSpec

DEFAULT_URL = os.environ.get("BENCH_DATABASE_URL", "postgresql://127.0.0.1:5432/test")
MODES = ("batch", "batch-async", "single", "single-async")


def _measure(
    name: str, calls: int, run: Callable[[int], None], profile: bool
) -> tuple[float, float]:
    """CPU and wall seconds per call of ``run(i)`` for i in range(calls)."""
    profiler = cProfile.Profile() if profile else None
    cpu, wall = time.process_time(), time.perf_counter()
    if profiler is not None:
        profiler.enable()
    for i in range(calls):
        run(i)
    if profiler is not None:
        profiler.disable()
    cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
    if profiler is not None:
        out = io.StringIO()
        pstats.Stats(profiler, stream=out).sort_stats("tottime").print_stats(20)
        print(f"--- {name}: cProfile top 20 by own time\n{out.getvalue()}")
    return cpu / calls, wall / calls


def run_modes(
    app: App, modes: list[str], batches: int, batch: int, single: int, profile: bool
) -> None:
    loop = asyncio.new_event_loop()

    def one_batch(i: int) -> None:
        app.enqueue_many([JobSpec(NOOP, {"n": i * batch + j}) for j in range(batch)])

    def one_batch_async(i: int) -> None:
        specs = [JobSpec(NOOP, {"n": i * batch + j}) for j in range(batch)]
        loop.run_until_complete(app.enqueue_many_async(specs))

    def one(i: int) -> None:
        app.enqueue(NOOP, {"n": i})

    async def singles_async(count: int) -> None:
        for i in range(count):
            await app.enqueue_async(NOOP, {"n": i})

    try:
        for mode in modes:
            reset(app)
            if mode == "batch":
                one_batch(-1)  # warm the pool and the prepared statement
                cpu, wall = _measure(mode, batches, one_batch, profile)
                unit = f"per batch of {batch}"
            elif mode == "batch-async":
                one_batch_async(-1)
                cpu, wall = _measure(mode, batches, one_batch_async, profile)
                unit = f"per batch of {batch}"
            elif mode == "single":
                one(-1)
                cpu, wall = _measure(mode, single, one, profile)
                unit = "per job"
            else:  # single-async: one loop run for all, as an async caller would
                loop.run_until_complete(singles_async(1))
                cpu, wall = _measure(
                    mode, 1, lambda _: loop.run_until_complete(singles_async(single)), profile
                )
                cpu, wall = cpu / single, wall / single
                unit = "per job"
            scale, label = (1e3, "ms") if mode.startswith("batch") else (1e6, "us")
            print(
                f"{mode:13} client CPU {cpu * scale:8.3f} {label}  wall {wall * scale:8.3f} {label}"
                f"  {unit}",
                flush=True,
            )
    finally:
        loop.run_until_complete(app.db.close_async_pool())
        loop.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", default=DEFAULT_URL)
    parser.add_argument("--batches", type=int, default=30)
    parser.add_argument("--batch", type=int, default=1000)
    parser.add_argument("--single", type=int, default=1000)
    parser.add_argument("--modes", default=",".join(MODES))
    parser.add_argument("--profile", action="store_true")
    options = parser.parse_args()
    modes = [m for m in options.modes.split(",") if m]
    unknown = set(modes) - set(MODES)
    if unknown:
        parser.error(f"--modes: unknown {sorted(unknown)}; choose from {', '.join(MODES)}")
    app = make_app(database_url=options.url)
    with own_schema(app):
        run_modes(app, modes, options.batches, options.batch, options.single, options.profile)


if __name__ == "__main__":
    main()
