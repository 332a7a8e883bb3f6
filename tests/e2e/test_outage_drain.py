"""The database taken away from worker processes in the middle of a drain: every connection
cut and new ones refused for a while (what a database restart looks like from the workers),
then every worker session terminated on the server (``pg_terminate_backend``). Nothing may
be lost, every job ends SUCCEEDED, and the workers resume by themselves; how long that took
is recorded for docs/reliability.md.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import threading
import time
from collections.abc import Iterator
from concurrent.futures import Future
from pathlib import Path
from typing import Any

import psycopg
import pytest

from tickwork import App, JobSpec

from ..figures import record, scale
from ..integration.tcp_proxy import TcpProxy, tcp_target, through
from .support import worker_command

pytestmark = pytest.mark.e2e

E2E_DIR = Path(__file__).resolve().parent
JOBS = scale(4000, 40000)
OUTAGE = scale(5, 38)
"""Seconds the database stays away (the outside test's outage was 38 s)."""
HANG_GUARD = 180.0  # not a timing assertion: only stops a broken run from hanging


class ProxyThread:
    """A :class:`TcpProxy` on an event loop of its own thread, driven from a sync test."""

    def __init__(self, host: str, port: int) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()
        self.proxy = TcpProxy(host, port)
        self.call(self.proxy.start())

    def call(self, coroutine: Any) -> Any:
        done: Future[Any] = asyncio.run_coroutine_threadsafe(coroutine, self.loop)
        return done.result(HANG_GUARD)

    def close(self) -> None:
        self.call(self.proxy.aclose())
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(HANG_GUARD)


@pytest.fixture
def proxy(tcp_database_url: str) -> Iterator[ProxyThread]:
    target = tcp_target(tcp_database_url)
    assert target is not None, tcp_database_url
    found = ProxyThread(*target)
    try:
        yield found
    finally:
        found.close()


def count(sql: psycopg.Connection[Any], query: str, params: list[Any] | None = None) -> int:
    row = sql.execute(query, params).fetchone()
    assert row is not None
    return int(row[0])


def succeeded(sql: psycopg.Connection[Any]) -> int:
    return count(sql, "SELECT count(*) FROM jobs WHERE state = 'SUCCEEDED'")


def wait(predicate: Any, what: str, procs: list[subprocess.Popen[bytes]]) -> None:
    deadline = time.monotonic() + HANG_GUARD
    while not predicate():
        for proc in procs:
            assert proc.poll() is None, f"a worker exited ({proc.returncode}) while {what}"
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting until {what}")
        time.sleep(0.02)


def recovery(sql: psycopg.Connection[Any], procs: list[subprocess.Popen[bytes]]) -> float:
    """Seconds until the next job finishes, from now (the database is back)."""
    back = time.monotonic()
    before = succeeded(sql)
    wait(lambda: succeeded(sql) > before, "the workers finish a job again", procs)
    return time.monotonic() - back


def test_restart_and_killed_sessions_mid_drain_lose_nothing(
    noop_app: App,
    sql: psycopg.Connection[Any],
    proxy: ProxyThread,
    db_env: dict[str, str],
    tcp_database_url: str,
    tmp_path: Path,
) -> None:
    env = dict(
        db_env,
        TICKWORK_DATABASE_URL=through(tcp_database_url, proxy.proxy.port),
        PYTHONPATH=os.pathsep.join(p for p in (str(E2E_DIR), db_env.get("PYTHONPATH")) if p),
        TICKWORK_WORKER__LEASE_TTL="3",
        TICKWORK_WORKER__LEASE_RENEW_INTERVAL="1",
        TICKWORK_WORKER__WATCHDOG_INTERVAL="1",
        TICKWORK_WORKER__POLL_INTERVAL="0.5",
        TICKWORK_SCHEDULER__ENABLED="false",
        TICKWORK_CONNECT_TIMEOUT="2",
    )
    procs = []
    for n in range(2):
        log = (tmp_path / f"w{n}.log").open("wb")
        procs.append(
            subprocess.Popen(
                worker_command(20, "WARNING"),
                env=env | {"PGAPPNAME": f"outage-{db_env['TICKWORK_SCHEMA']}-w{n}"},
                cwd=tmp_path,
                stdout=log,
                stderr=subprocess.STDOUT,
            )
        )
    try:
        # both workers up (past their start-up's migration, which a cut would fail) first
        wait(lambda: count(sql, "SELECT count(*) FROM workers") >= 2, "the workers start", procs)
        noop_app.enqueue_many([JobSpec("e2e.noop") for _ in range(JOBS)])
        wait(lambda: succeeded(sql) >= JOBS // 5, "a fifth of the jobs are done", procs)

        proxy.call(proxy.proxy.cut())
        cut_at = time.monotonic()
        done_at_cut = succeeded(sql)
        while time.monotonic() - cut_at < OUTAGE:  # the outage itself: nothing to wait for
            time.sleep(0.1)
            for proc in procs:
                assert proc.poll() is None, "a worker exited during the outage"
        proxy.call(proxy.proxy.restore())
        after_restart = recovery(sql, procs)

        wait(lambda: succeeded(sql) >= JOBS * 3 // 5, "three fifths of the jobs are done", procs)
        terminated = count(
            sql,
            "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity"
            " WHERE application_name LIKE %s",
            [f"outage-{db_env['TICKWORK_SCHEMA']}-w%"],
        )
        assert terminated > 0
        after_terminate = recovery(sql, procs)

        wait(lambda: succeeded(sql) == JOBS, "every job is SUCCEEDED", procs)
    finally:
        for proc in procs:
            proc.kill()
            proc.wait(HANG_GUARD)
    lost = count(sql, "SELECT count(*) FROM jobs WHERE state <> 'SUCCEEDED'")
    assert lost == 0
    rerun = count(
        sql, "SELECT count(*) FROM (SELECT job_id FROM executions GROUP BY 1 HAVING count(*) > 1) r"
    )
    check = "database away mid-drain: all connections cut, then sessions terminated"
    record("reliability", check, "jobs", JOBS, workers=2)
    record("reliability", check, "jobs lost", lost)
    record("reliability", check, "outage seconds", OUTAGE, done_before=done_at_cut)
    record(
        "reliability",
        check,
        "seconds from restore to the next finished job",
        round(after_restart, 2),
    )
    record("reliability", check, "sessions terminated", terminated)
    record(
        "reliability",
        check,
        "seconds from pg_terminate_backend to the next finished job",
        round(after_terminate, 2),
    )
    record("reliability", check, "jobs re-run (in flight when the connections went)", rerun)
