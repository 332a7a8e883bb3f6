"""Whether the database takes connections now: an async pool that answers at once, rather
than wait out its whole timeout, while the database refuses them.

psycopg_pool keeps a caller waiting for its full timeout (``api.database_wait``) while it
retries a refused connection in the background, so every API request of an outage took that
long to answer 503. Here the pool's connects report to a :class:`Reach`: a caller that finds
no idle connection is refused at once for :data:`REFUSING_FOR` seconds after a refused
connect, and one that is already waiting is refused by the next refused connect. The pool's
own background retries go on, and the first connect that succeeds ends it.

Only the pool an API opens (with its ``api.database_wait``) refuses so, and the services that
share it in ``serve``, which try again on their own; an application's own calls (``enqueue``
from a web request) keep waiting for a connection up to the pool's 30 s, through a database
restart.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Any

from psycopg_pool import AsyncConnectionPool, PoolTimeout

REFUSING_FOR = 1.0
"""Seconds after a refused connect during which a caller that finds no idle connection is
refused at once, without waiting for one (nor making the pool try a connect of its own): one
caller a second at most goes on to wait, and its wait makes the pool try again."""


class DatabaseRefusing(PoolTimeout):
    """No connection: the database refused the pool's last connect, moments ago."""


class Reach:
    """What the pool's last connects found, and the callers waiting to hear of a refusal."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self.failed_at: float | None = None
        """When the last connect failed (the clock's seconds); None once one succeeds."""
        self.failures = 0
        """Connects that failed."""
        self.refused = 0
        """Callers refused without waiting out the pool's timeout."""
        self._waiting: set[asyncio.Future[None]] = set()

    def failed(self) -> None:
        """A connect failed: callers waiting for a connection are refused now."""
        self.failed_at = self._clock()
        self.failures += 1
        for waiter in self._waiting:
            if not waiter.done():
                waiter.set_result(None)

    def connected(self) -> None:
        """A connect succeeded."""
        self.failed_at = None

    def refusing(self) -> bool:
        """Whether a connect failed within the last :data:`REFUSING_FOR` seconds (and none
        succeeded since)."""
        failed_at = self.failed_at
        return failed_at is not None and self._clock() - failed_at < REFUSING_FOR

    def next_failure(self) -> asyncio.Future[None]:
        """A future of the running loop, done at the next failed connect (:meth:`forget` it
        once done with)."""
        waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiting.add(waiter)
        return waiter

    def forget(self, waiter: asyncio.Future[None]) -> None:
        self._waiting.discard(waiter)


class ReachingPool(AsyncConnectionPool[Any]):
    """An async pool whose callers are refused (:class:`DatabaseRefusing`, a
    ``PoolTimeout``) instead of waiting while the database refuses connections; its
    connection class reports to :attr:`reach`."""

    def __init__(self, *args: Any, reach: Reach, refuse: bool = True, **kwargs: Any) -> None:
        self.reach = reach
        self.refuse = refuse
        """Whether callers are refused at once (else they wait, as psycopg_pool's do)."""
        super().__init__(*args, **kwargs)

    async def getconn(self, timeout: float | None = None) -> Any:
        if not self.refuse or self.get_stats().get("pool_available", 0):
            return await super().getconn(timeout)  # an idle connection: no one waits
        reach = self.reach
        if reach.refusing():
            reach.refused += 1
            raise DatabaseRefusing(
                "the database refused a connection moments ago: not waiting for one"
            )
        refused = reach.next_failure()
        getting = asyncio.ensure_future(super().getconn(timeout))
        try:
            await asyncio.wait({getting, refused}, return_when=asyncio.FIRST_COMPLETED)
        except BaseException:
            self._abandon(getting)
            raise
        finally:
            reach.forget(refused)
        if getting.done():
            return getting.result()
        self._abandon(getting)
        reach.refused += 1
        raise DatabaseRefusing("the database refused a connection: not waiting for one")

    def _abandon(self, getting: asyncio.Future[Any]) -> None:
        """Stop waiting for ``getting``; a connection it was handed all the same goes back."""

        def back(done: asyncio.Future[Any]) -> None:
            if done.cancelled() or done.exception() is not None:
                return
            task = asyncio.ensure_future(self.putconn(done.result()))
            _returning.add(task)
            task.add_done_callback(_returning.discard)

        getting.add_done_callback(back)
        getting.cancel()


_returning: set[asyncio.Future[None]] = set()
