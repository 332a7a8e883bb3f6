"""A worker counts the sync handlers running, not the threads of its pool: idle threads stay
alive after their handler returned (and for a moment after shutdown), and a process that took
them for running handlers would end itself with ``os._exit``, skipping its cleanup."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from contextlib import AbstractAsyncContextManager
from typing import Any

from tickwork import App, JobSpec

HANG_GUARD = 60.0
"""Not a timing assertion: only stops a broken test from hanging."""


async def test_idle_threads_are_not_running_handlers(
    app: App, background: Callable[..., AbstractAsyncContextManager[tuple[Any, Any]]]
) -> None:
    entered, release = threading.Event(), threading.Event()

    @app.task(name="threads.quick")
    def quick() -> None:
        return None

    @app.task(name="threads.held")
    def held() -> None:
        entered.set()
        release.wait(HANG_GUARD)

    async with background(app, concurrency=4) as (worker, outcomes):
        quick_jobs = await app.enqueue_many_async([JobSpec("threads.quick") for _ in range(4)])
        for job in quick_jobs:
            await outcomes.for_job(job.id)
        idle = [t for t in threading.enumerate() if t.name.startswith("tickwork-task")]
        assert idle, "the pool keeps its threads once their handlers returned"
        assert worker.handlers_running == 0

        job = await app.enqueue_async("threads.held")
        assert await asyncio.to_thread(entered.wait, HANG_GUARD)
        assert worker.handlers_running == 1
        release.set()
        await outcomes.for_job(job.id)
        assert worker.handlers_running == 0
