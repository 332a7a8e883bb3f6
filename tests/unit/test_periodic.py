"""The loop every background service runs."""

from __future__ import annotations

import asyncio
import logging

import pytest

from tickwork.services.periodic import run_periodically, wait_for_stop

HANG_GUARD = 60.0  # not a timing assertion: only stops a broken test from hanging
log = logging.getLogger("test")


async def test_a_loop_whose_pass_drops_the_cancellation_still_ends() -> None:
    # Python 3.11's asyncio.wait_for drops a cancellation that arrives while the awaited
    # thing completes; a pass that met one must not go on to wait out its interval.
    entered = asyncio.Event()
    passes = 0

    async def dropping_pass() -> None:
        nonlocal passes
        passes += 1
        entered.set()
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            pass  # dropped, as wait_for does

    loop = asyncio.create_task(
        run_periodically(dropping_pass, interval=3600, stop=asyncio.Event(), log=log, name="t")
    )
    await asyncio.wait_for(entered.wait(), HANG_GUARD)
    loop.cancel()
    with pytest.raises(asyncio.CancelledError):
        await asyncio.wait_for(loop, HANG_GUARD)
    assert passes == 1


async def test_the_loop_ends_at_stop_without_another_pass() -> None:
    stop = asyncio.Event()
    passes = 0

    async def one_pass() -> None:
        nonlocal passes
        passes += 1
        stop.set()

    await asyncio.wait_for(
        run_periodically(one_pass, interval=3600, stop=stop, log=log, name="t"), HANG_GUARD
    )
    assert passes == 1


async def test_wait_for_stop_says_whether_stop_was_set() -> None:
    stop = asyncio.Event()
    assert await wait_for_stop(stop, 0) is False
    stop.set()
    assert await wait_for_stop(stop, 3600) is True
