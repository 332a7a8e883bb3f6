"""The worker's LISTEN connection: every notification on its channels goes to a callback, and
a dropped connection is opened again (with a growing pause), for as long as the worker runs."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

import psycopg
from psycopg import sql

from tickwork.db.driver_errors import CONNECTION_ERRORS
from tickwork.services.periodic import raise_if_cancelled, wait_for_stop

log = logging.getLogger("tickwork.worker")

FIRST_RECONNECT_DELAY = 0.1
"""First pause before opening a lost listen connection again (doubles each time)."""
RECONNECT_MAX_DELAY = 5.0
"""Longest pause between attempts to re-open the listen connection."""


class Listener:
    """Listens on ``channels`` over connections from ``connect``; ``on_notify(channel,
    payload)`` for each notification, ``on_connected()`` each time it listens again (what was
    sent while it did not is lost: the owner should look for itself), ``on_lost()`` when the
    connection drops."""

    def __init__(
        self,
        connect: Callable[[], Awaitable[psycopg.AsyncConnection[Any]]],
        channels: Sequence[str],
        *,
        on_notify: Callable[[str, str], None],
        on_connected: Callable[[], None],
        on_lost: Callable[[], None],
    ) -> None:
        self._connect = connect
        self.channels = tuple(channels)
        self._on_notify = on_notify
        self._on_connected = on_connected
        self._on_lost = on_lost

    async def run(self, stop: asyncio.Event) -> None:
        """Listen until ``stop`` is set."""
        delay = FIRST_RECONNECT_DELAY
        while not stop.is_set():
            try:
                async with await self._connect() as conn:
                    for channel in self.channels:
                        await conn.execute(sql.SQL("LISTEN {}").format(sql.Identifier(channel)))
                    raise_if_cancelled()  # not to listen on after a dropped cancellation
                    self._on_connected()
                    delay = FIRST_RECONNECT_DELAY
                    async for note in conn.notifies():
                        self._on_notify(note.channel, note.payload)
            except CONNECTION_ERRORS as exc:
                log.warning("listen connection lost; reconnecting", extra={"error": str(exc)})
            self._on_lost()
            raise_if_cancelled()
            await wait_for_stop(stop, delay)
            delay = min(delay * 2, RECONNECT_MAX_DELAY)
