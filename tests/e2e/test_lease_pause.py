"""A lease holder paused with SIGSTOP past its lease finds, on waking, that it lost it — and
it stops believing it holds the lease before it even reaches the database."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import psycopg
import pytest
from psycopg_pool import AsyncConnectionPool

from tickwork import App
from tickwork.config import LeaseSettings
from tickwork.services.leases import LeaseManager, Role

from .support import wait_for

pytestmark = pytest.mark.e2e
HERE = Path(__file__).parent


def read_lines(path: Path) -> list[str]:
    return path.read_text().splitlines() if path.exists() else []


async def test_paused_holder_wakes_to_find_the_lease_lost(
    app: App, db_env: dict[str, str], sql: psycopg.Connection[Any], tmp_path: Path
) -> None:
    out = tmp_path / "holder.out"
    with out.open("w") as sink:
        holder = subprocess.Popen(  # noqa: ASYNC220 (starting it is quick; it runs alone)
            [sys.executable, str(HERE / "lease_holder.py")],
            env=db_env,
            stdout=sink,
            stderr=subprocess.STDOUT,
        )
    try:
        wait_for(lambda: any("holds=True" in line for line in read_lines(out)), "the lease")
        holder_id = read_lines(out)[0].split(" ", 1)[1]
        os.kill(holder.pid, signal.SIGSTOP)
        wait_for(
            lambda: (
                sql.execute(
                    "SELECT now() > expires_at FROM leases WHERE name = 'SCHEDULER'"
                ).fetchone()
                == (True,)
            ),
            "the paused holder's lease to expire",
        )
        async with AsyncConnectionPool(app.db.url, kwargs={"autocommit": True}) as pool:
            rival = LeaseManager(
                pool, app.db.store, LeaseSettings(heartbeat=0.2, ttl=30.0), [Role.SCHEDULER]
            )
            taken = await rival.run_once()
            assert taken.gained == {"SCHEDULER"}
            seen = len(read_lines(out))
            os.kill(holder.pid, signal.SIGCONT)
            wait_for(lambda: len(read_lines(out)) > seen, "the holder's first tick after waking")
            first_after = read_lines(out)[seen]
            # it no longer believed it held the lease when it woke, and did not get it back
            assert first_after.startswith("tick believed=False holds=False"), first_after
            assert rival.holds(Role.SCHEDULER)
            [row] = [leader for leader in app.leaders() if leader.name == "SCHEDULER"]
            assert row.holder == rival.holder_id != holder_id
            await rival.release()
    finally:
        holder.kill()
        holder.wait(10)
