"""A process that competes for the SCHEDULER lease and reports, at every heartbeat, whether
it believed it held the lease when it woke (before renewing) and whether it holds it after.

Run by tests/e2e/test_lease_pause.py with TICKWORK_DATABASE_URL and TICKWORK_SCHEMA set.
"""

from __future__ import annotations

import asyncio

from tickwork import App
from tickwork.config import LeaseSettings
from tickwork.services.leases import LeaseManager, Role

SETTINGS = LeaseSettings(heartbeat=0.2, ttl=1.0)


async def main() -> None:
    app = App()
    pool = await app.db.async_pool()
    manager = LeaseManager(pool, app.db.store, SETTINGS, [Role.SCHEDULER])
    print(f"holder {manager.holder_id}", flush=True)
    while True:
        believed = manager.holds(Role.SCHEDULER)
        result = await manager.run_once()
        print(
            f"tick believed={believed} holds={manager.holds(Role.SCHEDULER)}"
            f" lost={','.join(sorted(result.lost)) or '-'}",
            flush=True,
        )
        await asyncio.sleep(SETTINGS.heartbeat)


if __name__ == "__main__":
    asyncio.run(main())
