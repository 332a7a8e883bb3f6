"""The leader host partitioned: a ``tickwork serve`` holding the SCHEDULER, SIGNAL_MASTER and
SWEEP_MASTER leases is cut off from the database (packets dropped silently). A serve on
another host takes every role over within TTL + heartbeat, never while the old holder's lease
was still valid, and a per-second schedule fires each second exactly once across the switch
and after the heal, when whatever the old leader still had in flight reaches the database."""

from __future__ import annotations

import itertools
import re
import time
from datetime import timedelta
from typing import Any

import pytest

from ..figures import record
from .hosts import Fleet, Process, wait_until

pytestmark = pytest.mark.e2e

CHECK = "the leader host partitioned from the database"
ROLES = ("SCHEDULER", "SIGNAL_MASTER", "SWEEP_MASTER")
LEASES = {"HEARTBEAT": 0.5, "TTL": 3}
SETTINGS: dict[str, str | float] = {
    **{f"LEASES__{k}": v for k, v in LEASES.items()},
    **{f"SIGNALS__LEASE__{k}": v for k, v in LEASES.items()},
    "SCHEDULER__INTERVAL": 0.2,
    "RETENTION__ENABLED": "false",
}


def holders(sql: Any) -> dict[str, int]:
    """Live holders' pids by role."""
    rows = sql.execute(
        "SELECT name, holder FROM leases WHERE expires_at > now() AND name = ANY(%s)",
        [list(ROLES)],
    ).fetchall()
    return {name: int(holder.split(":")[1]) for name, holder in rows}


def fires(sql: Any) -> int:
    return int(sql.execute("SELECT count(*) FROM jobs WHERE schedule_id IS NOT NULL").fetchone()[0])


def serve(fleet: Fleet, name: str) -> Process:
    host = fleet.host()
    return fleet.start(
        host,
        name,
        *("serve", "--app", "schedule_app:app", "--queues", "other"),
        *("--roles", "scheduler,signals", "--log-level", "INFO"),
        **SETTINGS,
    )


def test_a_partitioned_leader_is_replaced_and_no_fire_time_is_doubled_or_lost(
    fleet: Fleet, net_sql: Any
) -> None:
    sql = net_sql
    first = serve(fleet, "s1")
    wait_until(lambda: set(holders(sql).values()) == {first.pid}, "s1 holds every role",
               guard=fleet.assert_alive, detail=fleet.logs)  # fmt: skip
    second = serve(fleet, "s2")
    wait_until(
        lambda: sql.execute("SELECT count(*) FROM workers WHERE pid = %s", [second.pid]).fetchone()[
            0
        ],
        "s2 is up",
        guard=fleet.assert_alive,
        detail=fleet.logs,
    )
    wait_until(lambda: fires(sql) >= 3, "the schedule fires")

    fleet.network.partition(first.host)
    cut_at = time.monotonic()
    expiry = sql.execute(  # the old holder's last expiry: it can renew no more
        "SELECT max(expires_at) FROM leases WHERE name = ANY(%s)", [list(ROLES)]
    ).fetchone()[0]
    wait_until(lambda: set(holders(sql).values()) == {second.pid}, "s2 takes every role",
               guard=fleet.assert_alive, detail=fleet.logs)  # fmt: skip
    switched_in = time.monotonic() - cut_at
    acquired = sql.execute(
        "SELECT min(acquired_at) FROM leases WHERE name = ANY(%s)", [list(ROLES)]
    ).fetchone()[0]
    assert acquired >= expiry, "a role was taken while the old holder's lease was valid"
    fired = fires(sql)
    wait_until(lambda: fires(sql) >= fired + 3, "s2 fires the schedule")

    fleet.network.heal(first.host)
    # the old leader hears at its next heartbeat that the roles are gone (its own deadline
    # stopped it meanwhile); whatever it had in flight has reached the database by then
    wait_until(lambda: "lease lost" in first.log(), "s1 learns it lost the leases",
               guard=fleet.assert_alive, detail=fleet.logs)  # fmt: skip
    fired = fires(sql)
    wait_until(lambda: fires(sql) >= fired + 3, "the schedule fires after the heal")
    assert set(holders(sql).values()) == {second.pid}

    times = [
        row[0]
        for row in sql.execute(
            "SELECT fire_time FROM jobs WHERE schedule_id IS NOT NULL ORDER BY fire_time"
        )
    ]
    doubled = len(times) - len(set(times))
    assert doubled == 0, "a fire time has two jobs"
    gaps = {b - a for a, b in itertools.pairwise(times)}
    assert gaps == {timedelta(seconds=1)}, f"a fire time was lost: gaps {gaps}"

    # nothing the old leader did landed after its lease's end: each job it says it fired was
    # created (on the database's clock) before that
    by_s1 = [int(n) for n in re.findall(r"schedule fired .*job_id=(\d+)", first.log())]
    late = sql.execute(
        "SELECT count(*) FROM jobs WHERE id = ANY(%s) AND created_at >= %s", [by_s1, expiry]
    ).fetchone()[0]
    assert by_s1 and late == 0, f"{late} of the old leader's fires landed after its lease"

    record("reliability", CHECK, "seconds from the cut to the successor holding every role",
           round(switched_in, 2), ttl=LEASES["TTL"], heartbeat=LEASES["HEARTBEAT"])  # fmt: skip
    record("reliability", CHECK, "fire times", len(times))
    record("reliability", CHECK, "fire times doubled or lost", 0)
