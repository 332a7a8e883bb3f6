"""One holder that takes a lease logs it once. The scheduler service runs its lease manager's
first heartbeat and its own call to take the lease at once (``SchedulerService.run``), and
both used to see the lease as gained, so ``serve`` logged ``lease acquired role=SCHEDULER``
twice for one holder."""

from __future__ import annotations

import asyncio
import logging

import pytest

from tickwork import App
from tickwork.services.leases import LeaseManager, Role


async def test_two_heartbeats_at_once_gain_and_log_a_lease_once(
    app: App, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="tickwork.leases")
    pool = await app.db.async_pool()
    leases = LeaseManager(pool, app.db.store, app.settings.leases, [Role.SCHEDULER])
    first, second = await asyncio.gather(leases.run_once(), leases.run_once())
    assert first.held == second.held == {Role.SCHEDULER}
    assert [first.gained, second.gained] == [{Role.SCHEDULER}, frozenset()]
    acquired = [r for r in caplog.records if r.getMessage() == "lease acquired"]
    assert [getattr(r, "role", None) for r in acquired] == [Role.SCHEDULER]
