"""Runs the scheduler tick in a tight loop WITHOUT the lease, until the file named by argv[1]
exists: several of these at once show the tick alone never doubles a fire time."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

from schedule_app import app

from tickwork.schedule.scheduler import Scheduler


async def main(stop_file: Path) -> None:
    pool = await app.db.async_pool()
    scheduler = Scheduler(pool, app.db.store, lambda name: app.tasks[name].options)
    await scheduler.sync(list(app.schedules.values()))
    ticks = 0
    while not stop_file.exists():  # noqa: ASYNC240 (a local stat, between ticks)
        await scheduler.run_once()
        ticks += 1
    print(f"ticks {ticks}", flush=True)
    await app.aclose()


if __name__ == "__main__":
    asyncio.run(main(Path(sys.argv[1])))
