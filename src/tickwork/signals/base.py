"""What the signal processor and the sweep scheduler share."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from psycopg_pool import AsyncConnectionPool

from tickwork.config import SignalSettings
from tickwork.db.store import Store
from tickwork.services.leases import LeaseManager, Role
from tickwork.signals.control import RuntimeControl
from tickwork.signals.reactor import Reactors


@dataclass
class SignalService:
    """Base of the lease-gated signal services: their pool, store, settings, the
    registered reactors, runtime control and the process's lease manager."""

    pool: AsyncConnectionPool[Any]
    store: Store
    settings: SignalSettings
    reactors: Reactors
    control: RuntimeControl
    leases: LeaseManager

    async def sync_control(self) -> None:
        """While this process holds a signal lease: publish its configuration for the other
        processes (when it changed) and take the overrides stored for its holder id. A
        process that holds neither lease applies no override."""
        if not (self.leases.holds(Role.SIGNAL_MASTER) or self.leases.holds(Role.SWEEP_MASTER)):
            self.control.load({})
            return
        holder = self.leases.holder_id
        published = json.dumps(
            self.control.published(self.reactors.describe(self.settings)), sort_keys=True
        )
        async with self.pool.connection() as conn:
            if self.control.published_as != (holder, published):
                await self.store.signal_config_publish(conn, holder=holder, config=published)
                self.control.published_as = (holder, published)
            self.control.load(await self.store.signal_overrides_of(conn, holder=holder))
