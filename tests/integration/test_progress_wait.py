"""ctx.progress (reported by handlers, stored in batches, fenced) and app.wait (woken by the
database's notification when a job ends)."""

from __future__ import annotations

import asyncio
import math
import threading
from collections.abc import AsyncIterator
from typing import Any

import pytest

from tickwork import App, JobContext, JobState, WaitTimeout
from tickwork.auth import Role
from tickwork.queue import wait as waiting

from .api_support import Api, start_api

HANG_GUARD = 60.0  # not a timing assertion: only stops a broken test from hanging


@pytest.fixture
async def api(app: App) -> AsyncIterator[Api]:
    async for found in start_api(app):
        yield found


async def test_progress_is_stored_while_running_and_kept_when_the_job_ends(
    app: App, api: Api
) -> None:
    reported = asyncio.Event()
    release = asyncio.Event()

    @app.task(pass_context=True)
    async def resize(ctx: JobContext, images: int) -> None:
        ctx.progress(3, images, "resizing")
        reported.set()
        await release.wait()
        ctx.progress(images, images, "done")

    job = resize.defer(images=10)
    async with app.worker() as worker:
        running = asyncio.create_task(worker.run_once())
        await asyncio.wait_for(reported.wait(), HANG_GUARD)
        await worker._write_progress()  # the periodic writer's pass
        seen = await app.get_job_async(job.id)
        assert seen.progress is not None
        assert (seen.progress.current, seen.progress.total) == (3, 10)
        assert seen.progress.message == "resizing" and seen.progress.attempt == 1
        assert seen.progress.fraction == 0.3 and seen.progress.at is not None
        answer = await api.client.get(f"/api/jobs/{job.id}", headers=api.headers(Role.VIEWER))
        assert answer.json()["progress"]["message"] == "resizing"
        release.set()
        await asyncio.wait_for(running, HANG_GUARD)
    done = app.get_job(job.id)
    assert done.state is JobState.SUCCEEDED
    assert done.progress is not None and done.progress.message == "done"
    listing = await api.client.get("/api/jobs", headers=api.headers(Role.VIEWER))
    assert listing.json()["items"][0]["progress"]["current"] == 10


async def test_a_sync_handler_reports_from_its_thread_and_the_last_report_is_kept(
    app: App,
) -> None:
    @app.task(pass_context=True, max_attempts=1)
    def count(ctx: JobContext) -> None:
        for n in range(1, 101):
            ctx.progress(n, 100)
        raise RuntimeError("gave up at the end")

    job = count.defer()
    async with app.worker() as worker:
        await worker.run_once()
    done = app.get_job(job.id)
    assert done.state is JobState.DEAD_LETTER  # how far a failed attempt got is kept
    assert done.progress is not None and done.progress.current == 100


async def test_a_report_of_an_attempt_that_is_no_longer_live_is_not_stored(app: App) -> None:
    @app.task(pass_context=True)
    def once(ctx: JobContext) -> None:
        ctx.progress(1, 2)

    job = once.defer()
    async with app.worker() as worker:
        (outcome,) = (await worker.run_once()).outcomes
        worker._progress.report(job.id, outcome.execution_id, {"current": 99, "attempt": 1})
        await worker._write_progress()
    stored = app.get_job(job.id).progress
    assert stored is not None and stored.current == 1


@pytest.mark.parametrize(
    ("args", "error", "named"),
    [
        ((math.nan,), ValueError, "current"),
        ((-1,), ValueError, "current"),
        ((1, math.inf), ValueError, "total"),
        (("3",), TypeError, "current"),
        ((True,), TypeError, "current"),
        ((1, None, 7), TypeError, "message"),
    ],
)
async def test_bad_progress_is_refused_naming_the_argument(
    app: App, args: tuple[Any, ...], error: type[Exception], named: str
) -> None:
    seen: list[Exception] = []

    @app.task(pass_context=True)
    def report(ctx: JobContext) -> None:
        try:
            ctx.progress(*args)
        except Exception as exc:
            seen.append(exc)

    job = report.defer()
    async with app.worker() as worker:
        await worker.run_once()
    assert len(seen) == 1 and isinstance(seen[0], error) and named in str(seen[0])
    assert app.get_job(job.id).progress is None


async def test_any_text_is_stored_and_a_total_of_zero_shows_no_fraction(app: App) -> None:
    @app.task(pass_context=True)
    def odd(ctx: JobContext) -> None:
        ctx.progress(0, 0, "nul \x00 and a lone surrogate \ud800")  # jsonb refuses both

    @app.task(pass_context=True)
    def fine(ctx: JobContext) -> None:
        ctx.progress(1, 2, "fine")

    odd_job, fine_job = odd.defer(), fine.defer()
    async with app.worker() as worker:
        await worker.run_once()
    stored = app.get_job(odd_job.id).progress
    assert stored is not None and stored.fraction is None
    assert stored.message == "nul \ufffd and a lone surrogate ?"
    other = app.get_job(fine_job.id).progress  # written in the same batch
    assert other is not None and other.message == "fine"


async def test_wait_refuses_a_timeout_that_is_not_a_number_of_seconds(app: App) -> None:
    with pytest.raises(ValueError, match="timeout"):
        await app.wait_async(1, timeout=math.nan)
    with pytest.raises(ValueError, match="timeout"):
        app.wait(1, timeout=-1)


def test_a_notification_names_the_job_or_every_job() -> None:
    assert waiting.names("4,12,7", 12)
    assert not waiting.names("4,120,7", 12)
    assert waiting.names("", 12)  # a batch too large for one payload: everyone looks


async def first_read_done(app: App, monkeypatch: pytest.MonkeyPatch) -> asyncio.Event:
    """An event set once a waiter has read its job the first time (it LISTENs before that),
    and no fallback look while the test runs: only the notification can wake it."""
    done = asyncio.Event()
    read = app.db.store.job_get

    async def reading(*args: Any, **kwargs: Any) -> Any:
        found = await read(*args, **kwargs)
        done.set()
        return found

    monkeypatch.setattr(app.db.store, "job_get", reading)
    monkeypatch.setattr(waiting, "RECHECK_INTERVAL", 3600.0)
    return done


async def test_wait_returns_the_finished_job_when_its_worker_records_it(
    app: App, monkeypatch: pytest.MonkeyPatch
) -> None:
    @app.task
    def add(a: int, b: int) -> int:
        return a + b

    job = add.defer(a=2, b=3)
    listening = await first_read_done(app, monkeypatch)
    waiter = asyncio.create_task(app.wait_async(job))
    await asyncio.wait_for(listening.wait(), HANG_GUARD)
    assert not waiter.done()
    async with app.worker() as worker:
        await worker.run_once()
    done = await asyncio.wait_for(waiter, HANG_GUARD)
    assert done.state is JobState.SUCCEEDED and done.result == 5


async def test_wait_is_woken_by_a_cancel_and_by_a_dead_letter(
    app: App, monkeypatch: pytest.MonkeyPatch
) -> None:
    @app.task(max_attempts=1)
    def breaks() -> None:
        raise ValueError("no")

    cancelled, dead = breaks.defer(), breaks.defer()
    listening = await first_read_done(app, monkeypatch)
    waiter = asyncio.create_task(app.wait_async(cancelled.id))
    await asyncio.wait_for(listening.wait(), HANG_GUARD)
    app.cancel(cancelled.id)
    assert (await asyncio.wait_for(waiter, HANG_GUARD)).state is JobState.CANCELLED

    listening.clear()
    waiter = asyncio.create_task(app.wait_async(dead))
    await asyncio.wait_for(listening.wait(), HANG_GUARD)
    async with app.worker() as worker:
        await worker.run_once()
    done = await asyncio.wait_for(waiter, HANG_GUARD)
    assert done.state is JobState.DEAD_LETTER and done.error is not None


async def test_the_sync_wait_blocks_until_the_job_ends(app: App) -> None:
    started = threading.Event()

    @app.task
    def slow_enough() -> str:
        return "ok"

    job = slow_enough.defer()

    def wait_in_a_thread() -> Any:
        started.set()
        return app.wait(job, timeout=HANG_GUARD)

    waiter = asyncio.create_task(asyncio.to_thread(wait_in_a_thread))
    await asyncio.to_thread(started.wait, HANG_GUARD)
    async with app.worker() as worker:
        await worker.run_once()
    assert (await asyncio.wait_for(waiter, HANG_GUARD)).result == "ok"


async def test_wait_gives_up_after_its_timeout_and_says_the_state(app: App) -> None:
    @app.task
    def never_run() -> None:
        pass

    job = never_run.defer()
    with pytest.raises(WaitTimeout) as raised:
        await app.wait_async(job, timeout=0.05)
    assert isinstance(raised.value, TimeoutError)
    assert raised.value.job_id == job.id and raised.value.state == "PENDING"
    with pytest.raises(WaitTimeout):
        app.wait(job.id, timeout=0.05)
