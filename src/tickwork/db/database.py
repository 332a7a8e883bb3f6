"""Connections: the URL (configured or embedded), a sync pool and an async pool per event loop.

tickwork's own statements are single statements, so its pooled connections run in autocommit
mode: each statement is its own transaction, with no BEGIN/COMMIT round trips.
"""

from __future__ import annotations

import asyncio
import logging
import math
import os
import random
import threading
import time
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import psycopg
from psycopg.conninfo import conninfo_to_dict
from psycopg.rows import dict_row
from psycopg_pool import AsyncConnectionPool, ConnectionPool, PoolTimeout

from tickwork.config import Settings
from tickwork.db import embedded
from tickwork.db.statements import Statements
from tickwork.db.store import Store
from tickwork.errors import DatabaseError, DatabaseUnavailable, DataRefused, EnqueueFailed

log = logging.getLogger("tickwork.db")

Row = dict[str, Any]
T = TypeVar("T")

KEEPALIVES: dict[str, int] = {
    "keepalives": 1,
    "keepalives_idle": 5,
    "keepalives_interval": 2,
    "keepalives_count": 3,
    "tcp_user_timeout": 15_000,
}
"""TCP settings of tickwork's connections: a network that silently drops packets (no reset,
no close) is noticed within about 11 s of silence, or 15 s of unacknowledged writes, instead
of the operating system's minutes."""
POOL_TIMEOUT = 30.0
"""Seconds a caller waits for a pooled connection (psycopg_pool's default)."""
POOL_RECONNECT_TIMEOUT = 4.0
"""Seconds a pool retries (with backoff) to replace a lost connection before it gives up and
lets the next request start a fresh attempt. Without this bound the backoff doubles for
minutes, and after an outage the pool could wait half a minute before trying again."""

DEADLOCK_RETRIES = 3
"""Runs of a statement in tickwork's own transaction while the database aborts it to break a
deadlock (or as a serialization failure): each abort rolls the transaction back, so running
it again is safe. (A statement in the caller's transaction is not re-run: the caller's
transaction is aborted with it.)"""
RETRY_PAUSE = 0.02
"""Seconds, at most, before the first re-run of an aborted statement. Run back to back, the
re-run can take the first row again before the transaction it deadlocked with (woken by the
abort) has it, and meet that transaction in the same cycle once more."""
RETRY_PAUSE_GROWTH = 2.0
"""Each further re-run waits up to this many times longer than the one before."""
RETRY_PAUSE_JITTER = 0.5
"""The pause is drawn between this share of its bound and the whole bound, so two statements
aborted together do not come back together."""
RETRIED_ABORTS: tuple[type[psycopg.Error], ...] = (
    psycopg.errors.DeadlockDetected,
    psycopg.errors.SerializationFailure,
)
"""Errors by which the database aborts a statement's transaction for another's sake."""


def fetch(conn: psycopg.Connection[Any], sql: str, params: dict[str, Any]) -> list[Row]:
    """Run one named statement on a sync connection; rows as dicts (none for DDL/DML)."""
    with conn.cursor(row_factory=dict_row) as cur:
        cur.execute(sql, params)
        return list(cur.fetchall()) if cur.description is not None else []


def retry_pause(attempt: int) -> float:
    """Seconds to wait after run ``attempt`` (1, 2, ...) of a statement the database aborted:
    the bound grows by :data:`RETRY_PAUSE_GROWTH` a run; the pause is drawn at random between
    :data:`RETRY_PAUSE_JITTER` of it and all of it."""
    bound = RETRY_PAUSE * RETRY_PAUSE_GROWTH ** (attempt - 1)
    return random.uniform(bound * RETRY_PAUSE_JITTER, bound)


def pause_before_retry(attempt: int) -> None:
    """Wait :func:`retry_pause` seconds before running an aborted statement again."""
    time.sleep(retry_pause(attempt))


async def pause_before_retry_async(attempt: int) -> None:
    """:func:`pause_before_retry` for a coroutine."""
    await asyncio.sleep(retry_pause(attempt))


def retrying_deadlocks(run: Callable[[], T], operation: str) -> T:
    """``run()``, run again after a short random pause (up to :data:`DEADLOCK_RETRIES` runs in
    all) while the database aborts it to break a deadlock or as a serialization failure."""
    for attempt in range(1, DEADLOCK_RETRIES + 1):
        try:
            return run()
        except RETRIED_ABORTS as exc:
            if attempt == DEADLOCK_RETRIES:
                raise
            _log_abort(exc, operation, attempt)
            pause_before_retry(attempt)
    raise AssertionError("unreachable")  # the last run returned or raised


async def retrying_deadlocks_async(run: Callable[[], Awaitable[T]], operation: str) -> T:
    """:func:`retrying_deadlocks` for a coroutine."""
    for attempt in range(1, DEADLOCK_RETRIES + 1):
        try:
            return await run()
        except RETRIED_ABORTS as exc:
            if attempt == DEADLOCK_RETRIES:
                raise
            _log_abort(exc, operation, attempt)
            await pause_before_retry_async(attempt)
    raise AssertionError("unreachable")  # the last run returned or raised


def _log_abort(exc: psycopg.Error, operation: str, attempt: int) -> None:
    if isinstance(exc, psycopg.errors.DeadlockDetected):
        message = "statement aborted to break a deadlock; running it again"
    else:
        message = "statement aborted as a serialization failure; running it again"
    log.warning(message, extra={"operation": operation, "run": attempt})


UNAVAILABLE_STATES = frozenset({"57P01", "57P02", "57P03", "53300"})
"""Server-reported states that mean "not now" rather than "not this": shutting down, crash
shutdown, cannot connect now, too many connections (and every connection exception, 08)."""


def unavailable(exc: BaseException) -> bool:
    """True for driver errors that mean the database is out of reach (no connection within
    the wait, a refused or lost connection, a server shutting down), not a statement the
    server refused (a deadlock, a serialization failure, a full disk: those have a state of
    their own)."""
    if isinstance(exc, PoolTimeout):
        return True
    if not isinstance(exc, psycopg.OperationalError | psycopg.InterfaceError):
        return False
    state = exc.sqlstate
    return state is None or state.startswith("08") or state in UNAVAILABLE_STATES


def database_error(exc: psycopg.Error) -> DatabaseError:
    """A driver error as tickwork's: a value the database cannot store is the input's fault
    (:class:`DataRefused`); an unreachable database is :class:`DatabaseUnavailable`;
    anything else the database refused is :class:`DatabaseError`."""
    if isinstance(exc, psycopg.errors.DataError):
        return DataRefused(f"database refused a value: {exc.diag.message_primary or exc}")
    if unavailable(exc):
        return DatabaseUnavailable(f"the database is unavailable: {_first_line(exc)}")
    return DatabaseError(f"database refused the operation: {exc}")


def enqueue_error(exc: psycopg.Error, *, committing: bool) -> DatabaseError:
    """:func:`database_error` for an enqueue, saying whether the job may have been stored:
    only a connection lost once the commit was sent leaves that open (``committing``: the
    statement ran in autocommit, or the caller's transaction was committing)."""
    translated = database_error(exc)
    if not isinstance(translated, DatabaseUnavailable):
        return translated
    # no connection was had (the pool's wait, too many connections): nothing was sent
    refused = isinstance(exc, PoolTimeout) or exc.sqlstate == "53300"
    stored = None if committing and not refused else False
    return EnqueueFailed(stored, _first_line(exc))


def _first_line(exc: BaseException) -> str:
    return (str(exc).strip().splitlines() or [type(exc).__name__])[0]


def one_line(exc: BaseException) -> str:
    """A driver error's message on one line (libpq adds indented hints on lines of their
    own)."""
    return " ".join(part.strip() for part in str(exc).splitlines() if part.strip())


class Database:
    """Where tickwork's data lives, and the pools to reach it."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.statements = Statements(settings.schema_name)
        self.store = Store(self.statements)
        """Every statement of the schema, as a typed method."""
        self._url: str | None = None
        self._lock = threading.Lock()
        self._pool: ConnectionPool[psycopg.Connection[Any]] | None = None
        self._async_pools: dict[asyncio.AbstractEventLoop, AsyncConnectionPool[Any]] = {}

    @property
    def url(self) -> str:
        """The connection URL; starts the embedded server when none is configured."""
        with self._lock:
            if self._url is None:
                configured = self.settings.database_url
                if configured is not None:
                    self._url = configured.get_secret_value()
                else:
                    self._url = embedded.start(self.settings.data_dir)
            return self._url

    @property
    def _connect_timeout(self) -> int:
        # libpq takes whole seconds, and psycopg reads 0 as its default (130 s): round up
        return max(1, math.ceil(self.settings.connect_timeout))

    def connection_kwargs(self, url: str, **server_settings: str) -> dict[str, Any]:
        """Keyword arguments for tickwork's own pooled connections: autocommit, the connect
        timeout, TCP keepalives (:data:`KEEPALIVES`), and ``server_settings`` added to the
        options the URL (or ``PGOPTIONS``) already gives, which an ``options`` argument would
        otherwise replace."""
        kwargs: dict[str, Any] = {
            "autocommit": True,
            "connect_timeout": self._connect_timeout,
            **KEEPALIVES,
        }
        if server_settings:
            given = conninfo_to_dict(url).get("options") or os.environ.get("PGOPTIONS", "")
            ours = " ".join(f"-c {name}={value}" for name, value in server_settings.items())
            kwargs["options"] = f"{given} {ours}".strip()
        return kwargs

    def connect(self, *, autocommit: bool = True) -> psycopg.Connection[Any]:
        """A new sync connection, not pooled (the caller closes it)."""
        try:
            return psycopg.connect(
                self.url, autocommit=autocommit, connect_timeout=self._connect_timeout
            )
        except psycopg.OperationalError as exc:
            raise DatabaseUnavailable(
                f"could not connect to the database: {one_line(exc)}"
            ) from exc

    async def connect_async(self, *, autocommit: bool = True) -> psycopg.AsyncConnection[Any]:
        """A new async connection, not pooled (the caller closes it)."""
        try:
            return await psycopg.AsyncConnection.connect(
                self.url, autocommit=autocommit, connect_timeout=self._connect_timeout
            )
        except psycopg.OperationalError as exc:
            raise DatabaseUnavailable(
                f"could not connect to the database: {one_line(exc)}"
            ) from exc

    def pool(self) -> ConnectionPool[psycopg.Connection[Any]]:
        """The process's sync pool, opened on first use."""
        with self._lock:
            pool = self._pool
        if pool is None:
            url = self.url
            with self._lock:
                if self._pool is None:
                    self._pool = ConnectionPool(
                        url,
                        min_size=self.settings.pool_min_size,
                        max_size=self.settings.pool_max_size,
                        kwargs=self.connection_kwargs(url),
                        reconnect_timeout=POOL_RECONNECT_TIMEOUT,
                        open=True,
                        name="tickwork",
                    )
                pool = self._pool
        return pool

    async def async_pool(
        self, max_size: int | None = None, *, timeout: float | None = None
    ) -> AsyncConnectionPool[Any]:
        """The async pool of the running event loop, opened on first use (``timeout``: the
        seconds a caller waits for a connection, when this call opens it)."""
        loop = asyncio.get_running_loop()
        pool = self._async_pools.get(loop)
        if pool is None:
            url = await asyncio.to_thread(lambda: self.url)
            pool = AsyncConnectionPool(
                url,
                min_size=self.settings.pool_min_size,
                max_size=max(max_size or 0, self.settings.pool_max_size),
                kwargs=self.connection_kwargs(url),
                timeout=POOL_TIMEOUT if timeout is None else timeout,
                reconnect_timeout=POOL_RECONNECT_TIMEOUT,
                open=False,
                name="tickwork-async",
            )
            await pool.open()
            self._async_pools[loop] = pool
        return pool

    def close(self) -> None:
        """Close the sync pool (async pools close with :meth:`aclose`)."""
        with self._lock:
            pool, self._pool = self._pool, None
        if pool is not None:
            pool.close()

    async def aclose(self) -> None:
        """Close the async pool of the running loop and the sync pool."""
        await self.close_async_pool()
        await asyncio.to_thread(self.close)

    async def close_async_pool(self) -> None:
        """Close the async pool of the running loop (if it has one)."""
        pool = self._async_pools.pop(asyncio.get_running_loop(), None)
        if pool is not None:
            await pool.close()
