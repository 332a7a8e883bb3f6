"""Draining a backlog with 1, 2 and 3 worker hosts against one database, over a network.

Each host is a Linux network namespace on a bridge (the harness of tests/net/); the database
is a PostgreSQL of the harness's own, listening on the bridge. For each host count the
backlog of no-op jobs is enqueued first, then one ``tickwork worker`` per host starts, and
the time from the first worker's start to the last job SUCCEEDED is measured (so start-up is
included, as a fleet that scales out would see it)::

    sudo .venv/bin/python benchmarks/net_hosts.py [--jobs 20000] [--concurrency 20]

Needs root (namespaces). Every host shares this machine's cores with the database: on a
machine of few cores more hosts add processes competing for the same CPUs, not capacity.
"""

from __future__ import annotations

import argparse
import os
import socket
import sys
import tempfile
import time
from pathlib import Path

import psycopg

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

from net import netns, pgserver  # noqa: E402
from net.hosts import Fleet, wait_until  # noqa: E402
from tickwork import App, JobSpec  # noqa: E402


def drain(fleet: Fleet, url: str, hosts: int, jobs: int, concurrency: int) -> float:
    app = App(database_url=url, schema="tickwork")

    @app.task(name="e2e.noop")
    async def noop() -> None:
        """A stub: the workers run the worker app's own."""

    with psycopg.connect(url, autocommit=True) as sql:
        sql.execute("TRUNCATE tickwork.jobs, tickwork.executions, tickwork.workers")
        for start in range(0, jobs, 5000):
            app.enqueue_many([JobSpec(task="e2e.noop")] * min(5000, jobs - start))
        began = time.monotonic()
        for n in range(hosts):
            fleet.worker(fleet.host(), f"w{hosts}-{n + 1}", concurrency=concurrency)
        wait_until(
            lambda: (
                sql.execute(
                    "SELECT count(*) FROM tickwork.jobs WHERE state = 'SUCCEEDED'"
                ).fetchone()[0]  # type: ignore[index]
                == jobs
            ),
            "the backlog drains",
            timeout=1800,
            guard=fleet.assert_alive,
        )
        seconds = time.monotonic() - began
    app.close()
    fleet.close()
    fleet.processes.clear()
    return seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=20_000)
    parser.add_argument("--concurrency", type=int, default=20)
    parser.add_argument("--hosts", default="1,2,3")
    options = parser.parse_args()
    reason = netns.unavailable()
    if reason:
        raise SystemExit(reason)
    network = netns.Network().open()
    server = None
    try:
        with socket.socket() as s:
            s.bind((network.gateway, 0))
            port = s.getsockname()[1]
        server = pgserver.start(network.gateway, str(network.subnet), port)
        with psycopg.connect(server.url(), autocommit=True) as conn:
            conn.execute("CREATE DATABASE tickwork")
        url = server.url("tickwork")
        App(database_url=url, schema="tickwork").migrate()
        env = {k: v for k, v in os.environ.items() if not k.startswith("TICKWORK_")}
        env |= {"TICKWORK_DATABASE_URL": url, "TICKWORK_SCHEMA": "tickwork"}
        env["TICKWORK_WORKER__METRICS_INTERVAL"] = "0"
        print(f"{options.jobs} no-op jobs, one worker per host, concurrency {options.concurrency}")
        print(f"{'hosts':>5} {'seconds':>8} {'jobs/s':>8}")
        with tempfile.TemporaryDirectory() as logs:
            for hosts in (int(h) for h in options.hosts.split(",")):
                fleet = Fleet(network, env, Path(logs))
                seconds = drain(fleet, url, hosts, options.jobs, options.concurrency)
                print(f"{hosts:>5} {seconds:>8.2f} {options.jobs / seconds:>8.0f}", flush=True)
    finally:
        if server is not None:
            server.stop()
        network.close()


if __name__ == "__main__":
    main()
