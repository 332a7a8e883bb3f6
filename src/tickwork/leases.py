"""Leader leases: named roles held in a row by one process at a time, on the database clock.

Every process competing for roles runs a :class:`LeaseManager`. Each heartbeat it acquires
or renews all its roles with ONE statement (``lease_attempt_elect``): a lease is taken over
only when it is the holder's own or has expired. The answer lists the roles held and the
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
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import psycopg
from psycopg_pool import AsyncConnectionPool

from tickwork.config import LeaseSettings
from tickwork.db.store import Store
from tickwork.service import run_periodically

log = logging.getLogger("tickwork.leases")


class Role(enum.StrEnum):
    """The singleton duties a lease gates."""

    SCHEDULER = "SCHEDULER"
    """Materialises due schedules into jobs."""
    WATCHDOG = "WATCHDOG"
    """Reclaims attempts whose lease expired (safe without it; the lease saves duplicate scans)."""
    RETENTION = "RETENTION"
    """Deletes finished jobs past their window."""
    SIGNAL_MASTER = "SIGNAL_MASTER"
    """Processes matured signals."""
    SWEEP_MASTER = "SWEEP_MASTER"
    """Runs reactors' sweeps."""


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
    """Competes for ``roles`` every heartbeat; :meth:`holds` answers from a local deadline."""

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
        self.settings = settings
        self.roles = sorted({str(r) for r in roles})
        self.holder_id = holder_id or new_holder_id()
        self._deadlines: dict[str, float] = {}  # role -> time.monotonic() deadline
        # one heartbeat at a time: two at once (the first heartbeat of `run` and a caller's
        # own) would each see a role gained, and log it twice for one holder
        self._heartbeat = asyncio.Lock()

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
                    conn, holder=self.holder_id, names=self.roles, ttl=self.settings.ttl
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
            interval=self.settings.heartbeat * 0.95,
            jitter=0.05,
            stop=stop,
            log=log,
            name="lease heartbeat",
        )
        with contextlib.suppress(psycopg.Error, OSError):
            await self.release()
