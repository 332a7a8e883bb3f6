"""The framework's own retention: a sweep-only reactor that purges COMPLETED and DEAD signals
after ``signals.retention_days``. Not organisation-scoped (it maintains tickwork's tables; a
tenant filter would disable it for good). PENDING and PROCESSING signals are never purged."""

from __future__ import annotations

import logging

from tickwork.config import SIGNAL_RETENTION_REACTOR
from tickwork.db.store import Store
from tickwork.signals.reactor import Reactor
from tickwork.signals.records import ReactorContext

log = logging.getLogger("tickwork.signals")

PURGE_BATCH = 1000
DAY = 86400.0


class SignalRetention(Reactor):
    """Purges settled signals past the retention window, daily."""

    name = SIGNAL_RETENTION_REACTOR
    sweep_cron = "23 3 * * *"
    organisation_scoped = False

    def __init__(self, store: Store, days: float) -> None:
        self.store = store
        self.days = days
        self.purged = 0
        """Signals the last sweep deleted (or would have, in dry-run)."""

    async def sweep(self, ctx: ReactorContext) -> None:
        purged = 0
        while True:
            deleted = await self.store.signal_purge(
                ctx.conn, older_than=self.days * DAY, limit=PURGE_BATCH
            )
            purged += deleted
            if deleted < PURGE_BATCH:
                break
        self.purged = purged
        log.info("signal retention", extra={"purged": purged, "dry_run": ctx.dry_run})
