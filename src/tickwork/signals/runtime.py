"""The signal runtime of one process: its lease roles (SIGNAL_MASTER, SWEEP_MASTER, on the
process's lease manager), runtime control, the processor and the sweep scheduler, run
together until stopped."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from psycopg_pool import AsyncConnectionPool

from tickwork.config import SignalSettings
from tickwork.db.store import Store
from tickwork.errors import NotLeaderError
from tickwork.services.leases import LeaseManager, Role, holder_of
from tickwork.services.periodic import run_periodically
from tickwork.signals.control import RuntimeControl
from tickwork.signals.processor import SignalProcessor
from tickwork.signals.reactor import Reactors
from tickwork.signals.sweeps import SweepScheduler

log = logging.getLogger("tickwork.signals")

SWEEP_TICK = 1.0
"""Seconds between checks for due sweeps (cron granularity is one second)."""


class SignalRuntime:
    """Everything signal processing needs in one process."""

    def __init__(
        self,
        pool: AsyncConnectionPool[Any],
        store: Store,
        settings: SignalSettings,
        reactors: Reactors,
        *,
        holder_id: str | None = None,
        leases: LeaseManager | None = None,
    ) -> None:
        """``leases``: the process's lease manager, whose heartbeat its host runs; without
        one the runtime makes its own (``holder_id``) and runs its heartbeat."""
        self.pool = pool
        self.store = store
        self.settings = settings
        self.control = RuntimeControl(settings)
        self._own_leases = leases is None
        if leases is None:
            leases = LeaseManager(pool, self.store, settings.lease, [], holder_id=holder_id)
        leases.compete([Role.SIGNAL_MASTER, Role.SWEEP_MASTER], settings.lease)
        self.leases = leases
        args = (pool, self.store, settings, reactors, self.control, self.leases)
        self.processor = SignalProcessor(*args)
        self.sweeps = SweepScheduler(*args)

    async def require(self, role: str) -> None:
        """Raise :class:`NotLeaderError` (naming the holder) unless this process holds
        ``role``: a setter read only by the lease holder would otherwise change nothing
        while reporting success."""
        if not self.leases.holds(role):
            raise NotLeaderError(role, await holder_of(self.pool, self.store, role))

    async def sync_control(self) -> None:
        """Take the overrides stored for this process now (and publish its configuration),
        as each pass of the processor and the sweeps does."""
        await self.processor.sync_control()

    async def run(self, stop: asyncio.Event) -> None:
        """Process signals and run due sweeps until ``stop`` (and heartbeat the leases,
        when the manager is the runtime's own)."""
        processor = self.settings.processor
        heartbeat = [self.leases.run(stop)] if self._own_leases else []
        await asyncio.gather(
            *heartbeat,
            run_periodically(
                self.processor.run_once,
                interval=processor.poll_interval,
                stop=stop,
                log=log,
                name="signal processor pass",
            ),
            run_periodically(
                self.sweeps.run_once,
                interval=SWEEP_TICK,
                jitter=0.0,
                stop=stop,
                log=log,
                name="sweep check",
            ),
        )
