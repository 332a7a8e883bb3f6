"""The portal: an event loop in a thread of its own, through which sync code runs coroutines.

tickwork's operations are written once, as coroutines. The sync methods of the App (cancel,
retry, get_job, the schedules' pause and trigger, ...) hand them to the portal and wait for
the answer, so the sync API is a thin facade and not a second implementation. The loop
starts on first use, in a daemon thread; its connections are those of the database's async
pool for that loop, closed when the portal closes (by the App, or at interpreter exit).

A call blocks its caller, as a sync call should; it may come from any thread, including one
that runs an event loop of its own (that loop waits, exactly as it would for a psycopg sync
call). Only a coroutine running on the portal's own loop must not call back into it.
"""

from __future__ import annotations

import asyncio
import atexit
import concurrent.futures
import os
import threading
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any, TypeVar

T = TypeVar("T")

CLOSE_TIMEOUT = 10.0
"""Seconds :meth:`Portal.close` waits for its closing coroutine (the pools' close)."""


class PortalError(RuntimeError):
    """A coroutine running on the portal's loop called back into the portal."""


class Portal:
    """Runs coroutines for sync callers on one event loop in a daemon thread."""

    def __init__(self, name: str, *, on_close: Callable[[], Awaitable[None]] | None = None):
        self._name = name
        self._on_close = on_close
        self._lock = threading.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._pid = os.getpid()
        self._calls: set[concurrent.futures.Future[Any]] = set()
        """The calls in flight, which :meth:`close` ends."""
        self._calls_lock = threading.Lock()

    def call(self, make: Callable[[], Coroutine[Any, Any, T]]) -> T:
        """Run ``make()`` on the portal's loop; its result, or its exception, here."""
        while True:
            loop = self._started()
            if threading.current_thread() is self._thread:
                raise PortalError("a coroutine on the portal's loop called a sync facade method")
            # submitted and recorded as one step against close(): a call whose coroutine
            # already runs is always among the calls close() ends, and a call that comes
            # after close() took the loop away starts a new one instead of waiting on it
            with self._calls_lock:
                if loop is not self._loop:
                    continue
                future = asyncio.run_coroutine_threadsafe(make(), loop)
                self._calls.add(future)
            break
        try:
            return future.result()
        except BaseException:
            future.cancel()  # the caller gave up (Ctrl-C): the coroutine stops too
            raise
        finally:
            self._calls.discard(future)

    def _started(self) -> asyncio.AbstractEventLoop:
        with self._lock:
            if self._pid != os.getpid():  # a forked child: the parent's thread is not here
                self._loop = self._thread = None
                self._pid = os.getpid()
            if self._loop is None:
                loop = asyncio.new_event_loop()
                thread = threading.Thread(target=loop.run_forever, name=self._name, daemon=True)
                thread.start()
                self._loop, self._thread = loop, thread
                atexit.register(self.close)
            return self._loop

    def close(self) -> None:
        """Run the closing coroutine, stop the loop and end its thread (a no-op when the
        portal never started, or is closed already). The portal starts again on its next
        call."""
        with self._lock:
            loop, thread = self._loop, self._thread
            self._loop = self._thread = None
        if loop is None or thread is None:
            return
        atexit.unregister(self.close)
        try:
            # calls still in flight end now (their callers get CancelledError), never left
            # waiting on a loop that no longer runs
            with self._calls_lock:
                cancelled = [pending for pending in list(self._calls) if pending.cancel()]
            if cancelled and thread is not threading.current_thread():
                # one pass of the loop: the cancelled coroutines take their cancellation
                asyncio.run_coroutine_threadsafe(asyncio.sleep(0), loop).result(CLOSE_TIMEOUT)
            if self._on_close is not None and thread is not threading.current_thread():
                closing = asyncio.run_coroutine_threadsafe(_awaited(self._on_close), loop)
                closing.result(timeout=CLOSE_TIMEOUT)
        finally:
            loop.call_soon_threadsafe(loop.stop)
            thread.join(timeout=CLOSE_TIMEOUT)
            if not thread.is_alive():
                loop.close()


async def _awaited(make: Callable[[], Awaitable[None]]) -> None:
    await make()
