"""Turns: attempts on one key (an account, a client address) wait for each other in memory."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator


class Turns:
    """Keyed locks within one process: ``async with turns.take(*keys)`` waits until no other
    holder of any of ``keys`` is inside.

    The login throttle serialises attempts per account and per address with advisory locks
    in the database; attempts of this process queue here first, so a flood of attempts on one
    account waits without holding a pool connection each (which would stall every other
    request of the API). Keys are taken in the order given (callers use one fixed order, so
    two holders never wait in a cycle); a key's lock lives only while it is held or awaited,
    so the table does not grow with every key ever seen.
    """

    def __init__(self) -> None:
        self._locks: dict[str, tuple[asyncio.Lock, int]] = {}

    @contextlib.asynccontextmanager
    async def take(self, *keys: str) -> AsyncIterator[None]:
        """Hold every key in turn, in the order given."""
        async with contextlib.AsyncExitStack() as held:
            for key in keys:
                await held.enter_async_context(self._one(key))
            yield

    def __len__(self) -> int:
        """Keys held or awaited now."""
        return len(self._locks)

    @contextlib.asynccontextmanager
    async def _one(self, key: str) -> AsyncIterator[None]:
        lock, users = self._locks.get(key, (asyncio.Lock(), 0))
        self._locks[key] = (lock, users + 1)
        try:
            async with lock:
                yield
        finally:
            lock, users = self._locks[key]
            if users == 1:
                del self._locks[key]
            else:
                self._locks[key] = (lock, users - 1)
