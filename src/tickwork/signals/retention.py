"""The framework's own retention: a sweep-only reactor that purges COMPLETED and DEAD signals
after ``signals.retention_days``. Not organisation-scoped (it maintains tickwork's tables; a
tenant filter would disable it for good). PENDING and PROCESSING signals are never purged."""

from __future__ import annotations

import logging

from tickwork.config import SIGNAL_RETENTION_REACTOR
from tickwork.db.database import fetch_async
from tickwork.db.statements import Statements
from tickwork.signals.reactor import Reactor
from tickwork.signals.types import ReactorContext

log = logging.getLogger("tickwork.signals")

PURGE_BATCH = 1000
DAY = 86400.0


class SignalRetention(Reactor):
    """Purges settled signals past the retention window, daily."""

    name = SIGNAL_RETENTION_REACTOR
    sweep_cron = "23 3 * * *"
    organisation_scoped = False

    def __init__(self, statements: Statements, days: float) -> None:
        self.statements = statements
        self.days = days
        self.purged = 0
        """Signals the last sweep deleted (or would have, in dry-run)."""

    async def sweep(self, ctx: ReactorContext) -> None:
        purged = 0
        while True:
            found = await fetch_async(
                ctx.conn,
                self.statements["signal_purge"],
                {"older_than": self.days * DAY, "limit": PURGE_BATCH},
            )
            purged += len(found)
            if len(found) < PURGE_BATCH:
                break
        self.purged = purged
        log.info("signal retention", extra={"purged": purged, "dry_run": ctx.dry_run})
