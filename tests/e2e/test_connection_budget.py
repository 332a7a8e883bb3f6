"""The connection budget of docs/deployment.md ("How many connections") holds for real
processes under load: a ``tickwork worker`` draining jobs with the tables it writes locked
(every caller then holds its connection, and the pools grow toward their limits), and a
``tickwork serve`` whose API pool is filled by requests waiting on a locked table; the
sessions each process has in ``pg_stat_activity`` never pass the formula.

A process's sessions are found by its sockets' local ports (``client_port``): its LISTEN
connections carry names of their own (``tickwork-listen-<id>``, ``tickwork-sessions``), so an
``application_name`` given by PGAPPNAME names only the pooled ones."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from collections import Counter
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import psutil
import psycopg
import pytest
from psycopg import sql as pgsql
from psycopg.conninfo import conninfo_to_dict

from tickwork import App

from . import budget_app
from .support import HANG_GUARD, free_port, wait_for

E2E_DIR = Path(__file__).parent
POOL_MAX_SIZE = 3
"""``pool_max_size`` of the processes under test: small, so the load fills it."""
WRITTEN = ("jobs", "executions", "leases", "workers", "worker_metrics")
"""What a worker's load locks: every pool's callers then wait holding their connections."""


def worker_budget(concurrency: int, pool_max_size: int) -> int:
    """docs/deployment.md: the app's pool (its services), outcomes and renewals, claims, LISTEN."""
    return pool_max_size + (min(concurrency, 8) + 3) + 2 + 1


def executor_budget(concurrency: int) -> int:
    """docs/deployment.md: one runtime's executor in ``serve`` (the app pool is shared): its
    outcomes and renewals, claims, LISTEN."""
    return (min(concurrency, 8) + 3) + 2 + 1


RUNTIME_CONCURRENCY = {"http": 20, "bash": 5, "python": 5, "node": 5, "groovy": 5}
"""The runtimes' concurrency at the defaults (``runtimes.http`` and ``runtimes.scripts``)."""


def serve_budget(concurrency: int, pool_max_size: int, runtimes: tuple[str, ...] = ()) -> int:
    """docs/deployment.md: a worker's (its app pool shared with the API), the session watch's
    LISTEN and the dashboard's event stream's LISTEN, and an executor per runtime."""
    executors = sum(executor_budget(RUNTIME_CONCURRENCY[name]) for name in runtimes)
    return worker_budget(concurrency, pool_max_size) + 2 + executors


@dataclass
class Sessions:
    """Samples, in another thread, the sessions one process has on the server."""

    pid: int
    dsn: str
    server_port: int
    samples: list[int] = field(default_factory=list)
    waiting_on: Counter[str] = field(default_factory=Counter)
    """Of the last sample, the sessions waiting for a lock, by table."""
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def __enter__(self) -> Sessions:
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        assert self._thread is not None
        self._thread.join(HANG_GUARD)

    @property
    def most(self) -> int:
        return max(self.samples, default=0)

    def _ports(self) -> list[int]:
        try:
            sockets = psutil.Process(self.pid).net_connections("tcp")
        except psutil.Error:
            return []
        return [s.laddr.port for s in sockets if s.raddr and s.raddr.port == self.server_port]

    def _run(self) -> None:
        with psycopg.connect(self.dsn, autocommit=True) as conn:
            while not self._stop.wait(0.01):  # a sampling rate, not synchronisation
                rows = conn.execute(
                    "SELECT (SELECT c.relname FROM pg_locks l JOIN pg_class c ON c.oid = l.relation"
                    "        WHERE l.pid = a.pid AND NOT l.granted LIMIT 1)"
                    " FROM pg_stat_activity a"
                    " WHERE client_port = ANY(%s) AND backend_type = 'client backend'",
                    [self._ports()],
                ).fetchall()
                self.samples.append(len(rows))
                self.waiting_on = Counter(table for (table,) in rows if table is not None)


@pytest.fixture
def tcp_server(tcp_database_url: str) -> int:
    """The test database's TCP port: the budget is read by client port."""
    return int(conninfo_to_dict(tcp_database_url).get("port") or 5432)


@pytest.fixture
def budget_env(db_env: dict[str, str], tcp_database_url: str) -> dict[str, str]:
    paths = (str(E2E_DIR), db_env.get("PYTHONPATH"))
    return db_env | {
        "TICKWORK_DATABASE_URL": tcp_database_url,
        "TICKWORK_POOL_MAX_SIZE": str(POOL_MAX_SIZE),
        "TICKWORK_WORKER__WATCHDOG_INTERVAL": "0.2",
        "TICKWORK_WORKER__METRICS_INTERVAL": "0.5",
        "PYTHONPATH": os.pathsep.join(p for p in paths if p),
        "PGAPPNAME": "tickwork-budget",
    }


@pytest.fixture
def started() -> Iterator[list[subprocess.Popen[bytes]]]:
    processes: list[subprocess.Popen[bytes]] = []
    yield processes
    for process in processes:
        if process.poll() is None:
            process.kill()
        process.wait(HANG_GUARD)


def start(
    started: list[subprocess.Popen[bytes]], env: dict[str, str], log: Path, *args: str
) -> subprocess.Popen[bytes]:
    with log.open("wb") as out:
        process = subprocess.Popen(
            [sys.executable, "-m", "tickwork", *args, "--app", "budget_app:app"],
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    started.append(process)
    return process


def locked(conn: psycopg.Connection[tuple[object, ...]], schema: str, *tables: str) -> None:
    """In ``conn``'s open transaction: lock ``tables`` against readers and writers."""
    for table in tables:
        conn.execute(
            pgsql.SQL("LOCK TABLE {}.{} IN ACCESS EXCLUSIVE MODE").format(
                pgsql.Identifier(schema), pgsql.Identifier(table)
            )
        )


def flood(app: App, jobs: int) -> None:
    with app.db.pool().connection() as conn, conn.transaction():
        for n in range(jobs):
            task = "budget.sync" if n % 2 else "budget.async"
            app.enqueue(task, {"seconds": 0.01}, conn=conn)


@pytest.mark.parametrize("concurrency", [2, 20])
def test_a_worker_stays_within_its_connection_budget(
    concurrency: int,
    database_url: str,
    schema: str,
    clean: None,
    tcp_server: int,
    budget_env: dict[str, str],
    started: list[subprocess.Popen[bytes]],
    tmp_path: Path,
) -> None:
    app = App(database_url=database_url, schema=schema)
    app.tasks.update(budget_app.app.tasks)
    budget = worker_budget(concurrency, POOL_MAX_SIZE)
    worker = start(
        started,
        budget_env,
        tmp_path / "worker.log",
        "worker",
        "--concurrency",
        str(concurrency),
    )
    try:
        with Sessions(worker.pid, database_url, tcp_server) as sessions:
            wait_for(lambda: sessions.most >= 4, "the worker's pools and LISTEN to open")
            flood(app, 400)
            with psycopg.connect(database_url) as blocker:
                locked(blocker, schema, *WRITTEN)
                # claims and outcome writes queue behind the locks, each holding its connection
                wait_for(
                    lambda: sessions.waiting_on.total() >= 3,
                    "the worker's callers to wait on locks",
                )
                blocker.rollback()
            wait_for(lambda: done(app, schema) >= 400, "the worker to drain its jobs")
        assert worker.poll() is None, (tmp_path / "worker.log").read_text()
        assert 4 <= sessions.most <= budget, (sessions.most, budget)
    finally:
        app.close()


@pytest.mark.parametrize("runtimes", [(), ("http", "bash", "python")])
def test_serve_stays_within_its_connection_budget(
    runtimes: tuple[str, ...],
    database_url: str,
    schema: str,
    clean: None,
    tcp_server: int,
    budget_env: dict[str, str],
    started: list[subprocess.Popen[bytes]],
    tmp_path: Path,
) -> None:
    concurrency = 4
    app = App(database_url=database_url, schema=schema)
    app.tasks.update(budget_app.app.tasks)
    budget = serve_budget(concurrency, POOL_MAX_SIZE, runtimes)
    port = free_port()
    env = budget_env | {
        "TICKWORK_AUTH__ADMIN_EMAIL": "budget@example.com",
        "TICKWORK_RUNTIMES__SERVE": json.dumps(list(runtimes)),
    }
    serve = start(
        started,
        env,
        tmp_path / "serve.log",
        "serve",
        "--concurrency",
        str(concurrency),
        "--port",
        str(port),
    )
    url = f"http://127.0.0.1:{port}"
    try:
        with Sessions(serve.pid, database_url, tcp_server) as sessions:
            wait_for(lambda: ready(url), "serve to answer /readyz")
            flood(app, 200)
            with (
                psycopg.connect(database_url) as blocker,
                ThreadPoolExecutor(4 * POOL_MAX_SIZE) as requests,
            ):
                locked(blocker, schema, "migrations")
                # every probe waits for the locked migrations table holding an API connection
                # (nothing else reads it): the app's pool is full, the others hold at least one
                answers = [requests.submit(ready, url) for _ in range(4 * POOL_MAX_SIZE)]
                wait_for(
                    lambda: sessions.waiting_on["migrations"] >= POOL_MAX_SIZE,
                    "the API's pool to fill with waiting requests",
                )
                blocker.rollback()
                for answer in answers:
                    answer.result(HANG_GUARD)
            wait_for(lambda: done(app, schema) >= 200, "serve's executor to drain its jobs")
        assert serve.poll() is None, (tmp_path / "serve.log").read_text()
        # full app pool + the executor's outcome and claim pools (one each at least) + 2 LISTENs,
        # and each runtime's executor its outcome and claim pools and its LISTEN
        least = POOL_MAX_SIZE + 4 + 3 * len(runtimes)
        assert least <= sessions.most <= budget, (sessions.most, budget)
        print(f"serve, runtimes {runtimes}: most {sessions.most} of {budget}")
    finally:
        app.close()


def ready(url: str) -> bool:
    try:
        return httpx.get(f"{url}/readyz", timeout=HANG_GUARD).status_code == 200
    except httpx.HTTPError:
        return False


def done(app: App, schema: str) -> int:
    with psycopg.connect(app.db.url, autocommit=True) as conn:
        row = conn.execute(
            pgsql.SQL("SELECT count(*) FROM {}.jobs WHERE state = 'SUCCEEDED'").format(
                pgsql.Identifier(schema)
            )
        ).fetchone()
        return int(row[0]) if row else 0
