"""The App that e2e tests run in real worker processes (``--app worker_app:app``).

Settings come from the environment the test sets (TICKWORK_DATABASE_URL, TICKWORK_SCHEMA,
TICKWORK_WORKER__*). Every handler records that it ran in ``runs`` (created by the tests),
so a test can count real executions independently of tickwork's own tables.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import psycopg

from tickwork import App, JobContext

app = App()


def _record(ctx: JobContext, label: str) -> None:
    with psycopg.connect(app.db.url, autocommit=True) as conn:
        conn.execute(
            f"INSERT INTO {app.settings.schema_name}.runs (job_id, execution_id, pid, label)"
            " VALUES (%s, %s, %s, %s)",
            (ctx.job.id, ctx.execution_id, os.getpid(), label),
        )


@app.task(name="e2e.work", max_attempts=50, pass_context=True)
def work(ctx: JobContext, seconds: float = 0.0) -> int:
    """Record the run, hold for ``seconds``, return this process's pid."""
    _record(ctx, "work")
    if seconds:
        time.sleep(seconds)
    return os.getpid()


@app.task(name="e2e.hold", max_attempts=5, pass_context=True)
def hold(ctx: JobContext, marker: str) -> int:
    """Record the run, then wait until the file ``marker`` exists; return this pid."""
    _record(ctx, "hold")
    while not Path(marker).exists():
        time.sleep(0.02)
    return os.getpid()


@app.task(name="e2e.nap", pass_context=True)
async def nap(ctx: JobContext, seconds: float) -> int:
    """An async handler that sleeps (cancellable at its await)."""
    import asyncio

    await asyncio.to_thread(_record, ctx, "nap")
    await asyncio.sleep(seconds)
    return os.getpid()


@app.task(name="e2e.noop")
async def noop() -> None:
    """Nothing at all: the soak measures tickwork's own cost per job."""


@app.task(name="e2e.linger", max_attempts=5, pass_context=True)
async def linger(ctx: JobContext, seconds: float, notes: str) -> int:
    """An async handler that sleeps ``seconds`` on its first attempt only (a re-run returns at
    once). Interrupted, it notes when (wall clock) in the file ``notes``/<execution id>: a
    note that needs no database, for a worker cut off from it."""
    import asyncio

    await asyncio.to_thread(_record, ctx, "linger")
    try:
        await asyncio.sleep(seconds if ctx.job.attempts <= 1 else 0)
    except asyncio.CancelledError:
        # at once, in the loop: the interrupted handler must not await anything more
        Path(notes, str(ctx.execution_id)).write_text(repr(time.time()))  # noqa: ASYNC240
        raise
    return os.getpid()
