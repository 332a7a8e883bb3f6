"""Leader leases: named roles held in a row by one process at a time, on the database clock.

Every process competing for roles runs ONE :class:`LeaseManager` (one holder id), whatever
services it hosts: each adds the roles it needs (:meth:`LeaseManager.compete`), each with its
own time to live. Each heartbeat the manager acquires or renews all its roles with ONE
statement (``lease_attempt_elect``): a lease is taken over only when it is the holder's own
or has expired. The answer lists the roles held and the
database's now(), which the manager turns into a local deadline measured from *before* the
request was sent, so a holder never believes it holds a lease later than the database says
it expires. A process paused past its deadline (SIGSTOP, a long GC, a frozen VM) finds on
waking that it no longer holds anything, before it does any leader work.

Holder ids are host name + start time + a random suffix, so a restarted process never
inherits the lease its previous life held.
"""

from __future__ import annotations

import asyncio
import contextlib
import enum
import logging
import os
import secrets
import socket
import time
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, TypeVar

from psycopg_pool import AsyncConnectionPool

from tickwork.config import LeaseSettings
from tickwork.db.driver_errors import CONNECTION_ERRORS
from tickwork.db.store import Store
from tickwork.services.periodic import run_periodically
from tickwork.types import Leader

log = logging.getLogger("tickwork.leases")
T = TypeVar("T")


class Role(enum.StrEnum):
    """The singleton duties a lease gates."""

    SCHEDULER = "SCHEDULER"
    """Materialises due schedules into jobs."""
    RETENTION = "RETENTION"
    """Deletes finished jobs past their window (one process at a time: a second deleting the
    same rows would only wait on the first's locks). The watchdog has no lease: every
    executor process reclaims expired attempts (SKIP LOCKED), so recovery never waits for a
    lease to change hands."""
    SIGNAL_MASTER = "SIGNAL_MASTER"
    """Processes matured signals."""
    SWEEP_MASTER = "SWEEP_MASTER"
    """Runs reactors' sweeps."""


async def leaders(pool: AsyncConnectionPool[Any], store: Store) -> list[Leader]:
    """Every lease, live or expired: who holds it, and until when (database time)."""
    async with pool.connection() as conn:
        return await store.lease_list(conn)


async def holder_of(pool: AsyncConnectionPool[Any], store: Store, role: str) -> str | None:
    """Who holds ``role`` now, per the database (None: nobody)."""
    for found in await leaders(pool, store):
        if found.name == role and found.live:
            return found.holder
    return None


def new_holder_id() -> str:
    """``host:start-time:random`` — unique per process life."""
    started = datetime.now(UTC).strftime("%Y%m%dT%H%M%S.%fZ")
    return f"{socket.gethostname()}:{os.getpid()}:{started}:{secrets.token_hex(4)}"


@dataclass(frozen=True, slots=True)
class ElectionResult:
    """What one heartbeat won."""

    held: frozenset[str]
    """Roles this process holds after the heartbeat."""
    gained: frozenset[str]
    """Roles it did not hold before."""
    lost: frozenset[str]
    """Roles it held before and holds no longer."""


class LeaseManager:
    """Competes for ``roles`` (and those added by :meth:`compete`) every heartbeat;
    :meth:`holds` answers from a local deadline."""

    def __init__(
        self,
        pool: AsyncConnectionPool[Any],
        store: Store,
        settings: LeaseSettings,
        roles: Iterable[str],
        *,
        holder_id: str | None = None,
    ) -> None:
        self.pool = pool
        self.store = store
        self.heartbeat = settings.heartbeat
        """Seconds between heartbeats: the shortest of the roles' settings."""
        self._ttls: dict[str, float] = {str(role): settings.ttl for role in roles}
        self.holder_id = holder_id or new_holder_id()
        self._deadlines: dict[str, float] = {}  # role -> time.monotonic() deadline
        # one heartbeat at a time: two at once (the first heartbeat of `run` and a caller's
        # own) would each see a role gained, and log it twice for one holder
        self._heartbeat = asyncio.Lock()

    @property
    def roles(self) -> list[str]:
        """The roles this process competes for."""
        return sorted(self._ttls)

    def compete(self, roles: Iterable[str], settings: LeaseSettings) -> None:
        """Compete for ``roles`` too, each held for ``settings.ttl`` once won; heartbeats come
        at the shortest of the heartbeats asked for. Takes effect at the next heartbeat (call
        :meth:`run_once` to take them now)."""
        for role in roles:
            self._ttls[str(role)] = settings.ttl
        self.heartbeat = min(self.heartbeat, settings.heartbeat)

    def gate(
        self, role: str, run_once: Callable[[], Awaitable[T]]
    ) -> Callable[[], Awaitable[T | None]]:
        """``run_once`` run only while this process holds ``role`` (None otherwise): how a
        singleton service's pass is gated."""

        async def gated() -> T | None:
            return await run_once() if self.holds(role) else None

        return gated

    def holds(self, role: str) -> bool:
        """True while this process holds ``role`` (never past the database's expiry)."""
        deadline = self._deadlines.get(str(role))
        return deadline is not None and time.monotonic() < deadline

    @property
    def held(self) -> frozenset[str]:
        """Roles held right now."""
        return frozenset(r for r in self.roles if self.holds(r))

    async def run_once(self) -> ElectionResult:
        """One heartbeat: acquire or renew every role in one statement."""
        async with self._heartbeat:
            before = self.held
            sent = time.monotonic()
            async with self.pool.connection() as conn:
                found = await self.store.lease_attempt_elect(
                    conn, holder=self.holder_id, ttls=dict(self._ttls)
                )
            self._deadlines = {
                row["name"]: sent + (row["expires_at"] - row["db_now"]).total_seconds()
                for row in found
            }
            after = self.held
        result = ElectionResult(after, after - before, before - after)
        for role in sorted(result.gained):
            log.info("lease acquired", extra={"role": role, "holder": self.holder_id})
        for role in sorted(result.lost):
            log.warning("lease lost", extra={"role": role, "holder": self.holder_id})
        return result

    async def release(self) -> None:
        """Give up every lease this process holds (clean shutdown)."""
        self._deadlines = {}
        async with self.pool.connection() as conn:
            await self.store.lease_release(conn, holder=self.holder_id, names=self.roles)

    async def run(self, stop: asyncio.Event) -> None:
        """Heartbeat until ``stop`` is set, then release. The jitter only shortens the wait,
        so a heartbeat never comes later than ``leases.heartbeat``."""
        await run_periodically(
            self.run_once,
            interval=lambda: self.heartbeat * 0.95,
            jitter=0.05,
            stop=stop,
            log=log,
            name="lease heartbeat",
        )
        with contextlib.suppress(*CONNECTION_ERRORS):
            await self.release()
