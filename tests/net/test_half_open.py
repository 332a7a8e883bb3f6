"""A half-open connection: every packet between a worker host and the database dropped, with
no reset and no close. The worker's connections must notice by their TCP settings
(``settings.tcp``: keepalives and the user timeout), not after the kernel's two hours, the
server must end the worker's sessions on its side (which may hold locks) by the same
settings, and the worker must carry on by itself once the network heals. The times are figures, not
assertions: the test only asserts that it happens, within a generous deadline."""

from __future__ import annotations

import time
from typing import Any

import psycopg
import pytest

from tickwork import App, JobSpec

from ..figures import record
from .hosts import Fleet, wait_until, worker_id

pytestmark = pytest.mark.e2e

CHECK = "half-open connections: a worker host's packets dropped silently"
NOTICED = {
    "listen connection (idle)": "listen connection lost",
    "a statement in flight": "lease renewal failed",
}
"""What the worker logs when each kind of connection is found dead."""
DETECTION_GUARD = 120.0
"""Not a timing assertion: how long the test waits for the worker to notice at all."""


def backends(sql: Any, name: str) -> int:
    row = sql.execute(
        "SELECT count(*) FROM pg_stat_activity WHERE application_name = %s", [name]
    ).fetchone()
    return int(row[0])


def stale(sql: Any, cut_on_server: Any) -> int:
    """Sessions of w1 on the server from before the cut."""
    row = sql.execute(
        "SELECT count(*) FROM pg_stat_activity WHERE application_name = 'w1'"
        " AND backend_start < %s",
        [cut_on_server],
    ).fetchone()
    return int(row[0])


def test_a_dead_link_is_noticed_by_the_connections_and_the_worker_recovers(
    tasks: App, fleet: Fleet, net_sql: Any
) -> None:
    sql = net_sql
    host = fleet.host()
    w1 = fleet.worker(
        host, "w1", WORKER__LEASE_RENEW_INTERVAL=1, WORKER__LEASE_TTL=30, WORKER__POLL_INTERVAL=1
    )
    w1_id = worker_id(sql, w1)
    wait_until(lambda: backends(sql, "w1") >= 2, "w1 is connected (pool and listener)")
    before = backends(sql, "w1")
    logged_before = w1.log()

    cut_on_server = sql.execute("SELECT now()").fetchone()[0]
    fleet.network.partition(host)
    cut_at = time.monotonic()
    noticed: dict[str, float] = {}

    def all_noticed() -> bool:
        after = w1.log()[len(logged_before) :]
        for kind, line in NOTICED.items():
            if kind not in noticed and line in after:
                noticed[kind] = time.monotonic() - cut_at
        return len(noticed) == len(NOTICED)

    wait_until(all_noticed, "w1 notices its dead connections", timeout=DETECTION_GUARD,
               guard=fleet.assert_alive, detail=fleet.logs)  # fmt: skip
    # the server's side: its sessions of w1 were asked (settings.tcp.server_side) to use the
    # same keepalives, so they end too, rather than after the kernel's two hours
    wait_until(lambda: stale(sql, cut_on_server) == 0, "the server ends w1's old sessions",
               timeout=DETECTION_GUARD, detail=fleet.logs)  # fmt: skip
    server_noticed = time.monotonic() - cut_at

    fleet.network.heal(host)
    healed_at = time.monotonic()
    [job] = tasks.enqueue_many([JobSpec(task="e2e.work", args={"seconds": 0})])
    wait_until(
        lambda: (
            sql.execute("SELECT state FROM jobs WHERE id = %s", [job.id]).fetchone()[0]
            == "SUCCEEDED"
        ),
        "w1 runs a job after the heal",
        guard=fleet.assert_alive,
        detail=fleet.logs,
    )
    back_in = time.monotonic() - healed_at
    ran_by = sql.execute("SELECT worker_id FROM executions WHERE job_id = %s", [job.id])
    assert ran_by.fetchone()[0] == w1_id

    for kind, seconds in noticed.items():
        record(
            "reliability",
            CHECK,
            f"seconds until the worker noticed: {kind}",
            round(seconds, 1),
            bound="tcp.user_timeout 15 + keepalives_interval 2",
        )
    record(
        "reliability",
        CHECK,
        "seconds until the server ended the cut-off worker's sessions",
        round(server_noticed, 1),
        sessions=before,
    )
    record("reliability", CHECK, "seconds from the heal to a job run by it", round(back_in, 2))


LOCKER = """
import sys, time
import psycopg
from tickwork.config import Settings
from tickwork.db.database import Database

url = sys.argv[1]
kwargs = Database(Settings(database_url=url)).connection_kwargs(url) | {"autocommit": False}
conn = psycopg.connect(url, application_name="locker", **kwargs)
conn.execute("SELECT * FROM tickwork.held WHERE id = 1 FOR UPDATE")
print("locked", flush=True)
while True:
    time.sleep(1)
"""
"""A client on a host that takes a row lock in a transaction it never ends, on a connection
made with tickwork's connection settings (a leader's scheduler tick cut off half-way)."""


def test_a_cut_off_sessions_row_lock_is_released_by_the_server(
    fleet: Fleet, net_sql: Any, net_url: str
) -> None:
    sql = net_sql
    sql.execute("CREATE TABLE IF NOT EXISTS held (id int PRIMARY KEY)")
    sql.execute("INSERT INTO held VALUES (1) ON CONFLICT DO NOTHING")
    host = fleet.host()
    locker = fleet.run(host, "locker", "-c", LOCKER, net_url)
    wait_until(lambda: "locked" in locker.log(), "the client holds the lock",
               guard=fleet.assert_alive, detail=fleet.logs)  # fmt: skip

    def lock_free() -> bool:
        with sql.transaction():
            try:
                sql.execute("SELECT * FROM held WHERE id = 1 FOR UPDATE NOWAIT")
            except psycopg.errors.LockNotAvailable:
                return False
            return True

    assert not lock_free()
    fleet.network.partition(host)
    cut_at = time.monotonic()
    wait_until(lock_free, "the server ends the cut-off session and its lock goes",
               timeout=DETECTION_GUARD, detail=fleet.logs)  # fmt: skip
    released_in = time.monotonic() - cut_at
    record(
        "reliability",
        CHECK,
        "seconds until the server released a cut-off session's row lock",
        round(released_in, 1),
        server_side="tcp.server_side on",
    )
