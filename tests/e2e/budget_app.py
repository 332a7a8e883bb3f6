"""The App whose processes the connection-budget and PgBouncer tests run (``--app
budget_app:app``): handlers that touch no database themselves, so every connection a process
holds is one of tickwork's own."""

from __future__ import annotations

import asyncio
import time

from tickwork import App, FixedBackoff, JobContext

app = App()


@app.task(name="budget.sync")
def sync_work(seconds: float = 0.0) -> str:
    """A sync handler: holds one of the worker's threads for ``seconds``."""
    time.sleep(seconds)
    return "sync"


@app.task(name="budget.async")
async def async_work(seconds: float = 0.0) -> str:
    """An async handler: holds a slot for ``seconds``."""
    await asyncio.sleep(seconds)
    return "async"


@app.task(name="budget.flaky", max_attempts=3, backoff=FixedBackoff(0), pass_context=True)
def flaky(ctx: JobContext) -> int:
    """Fails its first attempt, succeeds on the second: the attempt number it succeeded on."""
    if ctx.job.attempts < 2:
        raise RuntimeError("first attempt fails")
    return ctx.job.attempts


@app.task(name="budget.too_slow", timeout=0.2, max_attempts=1)
async def too_slow() -> None:
    """Outlives its timeout: the attempt fails as timed out and the job is dead-lettered."""
    await asyncio.Event().wait()
