"""The one way a named statement runs: looked up by name, timed, rows as dicts or tuples.

Every family of statements (``jobs``, ``auth``, ...) is a subclass of :class:`Runner` whose
methods name their statement once and take typed parameters; :class:`tickwork.db.store.Store`
joins them. Code outside ``db/`` calls those methods and never names a statement.
"""

from __future__ import annotations

import threading
import time
from bisect import bisect_left
from typing import Any, TypeVar

import psycopg
from psycopg.rows import AsyncRowFactory, RowFactory, dict_row, tuple_row
from psycopg.types.datetime import TimestamptzLoader
from psycopg.types.net import CidrLoader, InetLoader

from tickwork.db.loaders import JsonbLoader, JsonLoader
from tickwork.db.statements import Statements

Row = dict[str, Any]
R = TypeVar("R")
AsyncConn = psycopg.AsyncConnection[Any]
"""An async connection: a pooled one, the process's own, or the caller's (in its transaction)."""
Conn = psycopg.Connection[Any]
"""A sync connection, likewise."""


def cursor(conn: Conn, rows: RowFactory[R]) -> psycopg.Cursor[R]:
    """A cursor for tickwork's statements on ``conn``. A connection a framework made (Django
    loads ``jsonb`` as text, and times in its own zone, through a client-side cursor class of
    its own) gets a plain cursor with psycopg's loaders for those types, changed on the cursor
    only: the framework's own queries on the connection are left as they are."""
    if conn.cursor_factory is psycopg.Cursor:
        return conn.cursor(row_factory=rows)
    cur = psycopg.Cursor(conn, row_factory=rows)
    for name, loader in _PLAIN_LOADERS:
        cur.adapters.register_loader(name, loader)
    return cur


_PLAIN_LOADERS = (
    ("json", JsonLoader),  # tickwork's: an undecodable value is a marker (db/loaders.py)
    ("jsonb", JsonbLoader),
    ("timestamptz", TimestamptzLoader),
    ("inet", InetLoader),
    ("cidr", CidrLoader),
)

STATEMENT_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1, 5, 30)
"""Bounds (seconds) of the statement-time histogram."""


class StatementTimes:
    """How long each named statement took in this process: a histogram per name, kept with
    one uncontended lock per statement (a round trip to the database costs a thousand times
    more) and exposed by :mod:`tickwork.ops.metrics` at scrape time."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._rows: dict[str, list[float]] = {}  # name -> counts per bucket, +Inf, then sum

    def observe(self, name: str, seconds: float) -> None:
        """Count one run of ``name`` that took ``seconds``."""
        bucket = bisect_left(STATEMENT_BUCKETS, seconds)
        with self._lock:
            row = self._rows.get(name)
            if row is None:
                row = self._rows[name] = [0.0] * (len(STATEMENT_BUCKETS) + 2)
            row[bucket] += 1
            row[-1] += seconds

    def snapshot(self) -> dict[str, list[float]]:
        """``{name: [count per bucket..., count over the last bound, sum of seconds]}``."""
        with self._lock:
            return {name: list(row) for name, row in self._rows.items()}


JOB_PATH_STATEMENTS = frozenset(
    {
        "job_insert",
        "job_insert_many",
        "job_insert_many_keyless",
        "job_claim",
        "job_claim_capped",
        "job_complete_many",
        "execution_renew_leases",
        "execution_reclaim_expired",
        "worker_heartbeat",
    }
)
"""The statements of the job path (enqueue, claim, completion, lease renewal and reclaim,
heartbeats): the times ``/metrics`` reports by default (``metrics.statement_times``)."""

TIMES = StatementTimes()
"""The process's statement times (every store of every schema adds to it)."""


class Runner:
    """Runs the statements of one schema. Subclasses add one method per statement."""

    def __init__(self, statements: Statements) -> None:
        self.statements = statements

    @property
    def schema(self) -> str:
        """The schema every statement runs in."""
        return self.statements.schema

    def channel(self, kind: str) -> str:
        """The NOTIFY channel of this schema for ``kind`` (``jobs``, ``control``, ...)."""
        return self.statements.channel(kind)

    async def _rows(self, conn: AsyncConn, name: str, params: dict[str, Any]) -> list[Row]:
        """Run ``name`` on ``conn``; its rows as dicts (none for a statement without rows)."""
        return await self._run(conn, name, params, dict_row)

    async def _tuples(
        self, conn: AsyncConn, name: str, params: dict[str, Any]
    ) -> list[tuple[Any, ...]]:
        """:meth:`_rows` with rows as tuples, for the hot paths that read by position."""
        return await self._run(conn, name, params, tuple_row)

    def _rows_sync(self, conn: Conn, name: str, params: dict[str, Any]) -> list[Row]:
        """:meth:`_rows` on a sync connection."""
        return self._run_sync(conn, name, params, dict_row)

    def _tuples_sync(self, conn: Conn, name: str, params: dict[str, Any]) -> list[tuple[Any, ...]]:
        """:meth:`_tuples` on a sync connection."""
        return self._run_sync(conn, name, params, tuple_row)

    async def _run(
        self, conn: AsyncConn, name: str, params: dict[str, Any], rows: AsyncRowFactory[R]
    ) -> list[R]:
        sql = self.statements[name]
        started = time.perf_counter()
        try:
            async with conn.cursor(row_factory=rows) as cur:
                await cur.execute(sql, params)
                return list(await cur.fetchall()) if cur.description is not None else []
        finally:
            TIMES.observe(name, time.perf_counter() - started)

    def _run_sync(
        self, conn: Conn, name: str, params: dict[str, Any], rows: RowFactory[R]
    ) -> list[R]:
        sql = self.statements[name]
        started = time.perf_counter()
        try:
            with cursor(conn, rows) as cur:
                cur.execute(sql, params)
                return list(cur.fetchall()) if cur.description is not None else []
        finally:
            TIMES.observe(name, time.perf_counter() - started)
