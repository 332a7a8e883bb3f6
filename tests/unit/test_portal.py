"""The portal: sync callers run coroutines on one loop in a thread of its own."""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
from typing import Any

import pytest

from tickwork.portal import Portal, PortalError


def test_a_call_answers_with_the_coroutines_result_or_its_exception() -> None:
    portal = Portal("test-portal")
    try:

        async def double(n: int) -> int:
            return 2 * n

        async def fail() -> None:
            raise LookupError("missing")

        assert portal.call(lambda: double(21)) == 42
        with pytest.raises(LookupError, match="missing"):
            portal.call(fail)
    finally:
        portal.close()


def test_every_call_runs_on_the_one_portal_thread() -> None:
    portal = Portal("test-portal")
    try:

        async def where() -> str:
            return threading.current_thread().name

        names = {portal.call(where)}
        threads = [threading.Thread(target=lambda: names.add(portal.call(where))) for _ in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert names == {"test-portal"}
    finally:
        portal.close()


async def test_a_caller_inside_another_event_loop_is_answered() -> None:
    portal = Portal("test-portal")
    try:

        async def loop_of() -> asyncio.AbstractEventLoop:
            return asyncio.get_running_loop()

        assert portal.call(loop_of) is not asyncio.get_running_loop()
    finally:
        portal.close()


def test_close_runs_the_closing_coroutine_ends_the_thread_and_a_later_call_starts_again() -> None:
    closed: list[str] = []

    async def on_close() -> None:
        closed.append(threading.current_thread().name)

    portal = Portal("test-portal", on_close=on_close)

    async def thread() -> threading.Thread:
        return threading.current_thread()

    first = portal.call(thread)
    portal.close()
    assert closed == ["test-portal"]
    assert not first.is_alive()
    second = portal.call(thread)
    assert second is not first and second.is_alive()
    portal.close()
    portal.close()  # closing twice is harmless
    assert closed == ["test-portal", "test-portal"]


def test_a_coroutine_on_the_portal_may_not_call_back_into_it() -> None:
    portal = Portal("test-portal")
    try:

        async def inner() -> int:
            return 1

        async def reenter() -> int:
            return portal.call(inner)

        with pytest.raises(PortalError):
            portal.call(reenter)
    finally:
        portal.close()


def test_a_portal_never_called_closes_without_starting() -> None:
    started: list[bool] = []

    async def on_close() -> None:
        started.append(True)

    Portal("test-portal", on_close=on_close).close()
    assert started == []


def test_close_ends_a_call_still_in_flight() -> None:
    portal = Portal("test-portal")
    started = threading.Event()
    answers: list[BaseException | None] = []

    async def forever() -> None:
        started.set()
        await asyncio.Event().wait()

    def caller() -> None:
        try:
            portal.call(forever)
            answers.append(None)
        except BaseException as exc:  # what the caller gets
            answers.append(exc)

    waiting = threading.Thread(target=caller)
    waiting.start()
    assert started.wait(10)
    portal.close()
    waiting.join(10)
    assert not waiting.is_alive()  # without the cancel in close() it waits for ever
    [answer] = answers
    assert isinstance(answer, concurrent.futures.CancelledError)


def test_close_ends_a_call_whose_coroutine_ran_before_the_call_recorded_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The caller's thread is descheduled between handing its coroutine over and recording
    the call, while the coroutine runs and close() comes: close() must still end the call
    (it once stopped the loop under it, and the caller waited for ever)."""
    portal = Portal("test-portal")
    started = threading.Event()
    captured = threading.Event()
    closing = threading.Event()
    answers: list[BaseException | None] = []
    submit = asyncio.run_coroutine_threadsafe

    def descheduled(coro: Any, loop: asyncio.AbstractEventLoop) -> Any:
        future = submit(coro, loop)
        if getattr(coro, "__name__", "") == "forever":
            started.wait(10)
            thread = portal._thread  # close() has not begun: the loop's thread is here
            captured.set()
            closing.wait(10)
            if thread is not None:  # let close() run to its end first, if it can
                thread.join(1.0)
        return future

    async def forever() -> None:
        started.set()
        await asyncio.Event().wait()

    def caller() -> None:
        try:
            portal.call(forever)
            answers.append(None)
        except BaseException as exc:
            answers.append(exc)

    monkeypatch.setattr(asyncio, "run_coroutine_threadsafe", descheduled)
    waiting = threading.Thread(target=caller)
    waiting.start()
    assert started.wait(10) and captured.wait(10)
    closing.set()
    portal.close()
    waiting.join(10)
    assert not waiting.is_alive()
    [answer] = answers
    assert isinstance(answer, concurrent.futures.CancelledError)
