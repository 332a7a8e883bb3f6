"""Connections: the URL (configured or embedded), a sync pool and an async pool per event loop.

tickwork's own statements are single statements, so its pooled connections run in autocommit
mode: each statement is its own transaction, with no BEGIN/COMMIT round trips.

The pools of the API and the background services (:meth:`Database.pool`,
:meth:`Database.async_pool`) are bounded by the server: ``statement_timeout`` and
``idle_in_transaction_session_timeout`` are sent at connect (``settings.statement_timeout``,
``settings.idle_in_transaction_timeout``); a worker's own pools, its LISTEN connection and
the one-off connections are not. The async pool an API opens refuses callers at once while
the database refuses connections (:mod:`tickwork.db.reach`).

Behind a transaction pooler (``database_pooler = "transaction"``) consecutive statements of
one pooled connection may run in different server sessions, so the pooled connections keep no
session state: no prepared statements, no settings sent at connect. The connections that need
a session of their own (LISTEN, migrations' advisory lock, the other unpooled ones) go to
``database_direct_url`` instead, and check that nothing pools them.
"""

from __future__ import annotations

import asyncio
import logging
import math
import os
import threading
import weakref
from collections.abc import Callable
from typing import Any, Self, TypeVar

import psycopg
from psycopg.conninfo import conninfo_to_dict
from psycopg.rows import dict_row
from psycopg_pool import AsyncConnectionPool, ConnectionPool

from tickwork.config import Settings
from tickwork.db import embedded
from tickwork.db.driver_errors import one_line
from tickwork.db.loaders import ADAPTERS
from tickwork.db.reach import Reach, ReachingPool
from tickwork.db.statements import Statements
from tickwork.db.store import Store
from tickwork.db.store.runner import cursor
from tickwork.errors import ConfigError, DatabaseUnavailable

log = logging.getLogger("tickwork.db")

Row = dict[str, Any]
T = TypeVar("T")

POOL_TIMEOUT = 30.0
"""Seconds a caller waits for a pooled connection (psycopg_pool's default)."""
CLOSE_OTHER_LOOP_TIMEOUT = 10.0
"""Seconds :meth:`Database.close` waits for an event loop running in another thread to close
its pool: a loop blocked by sync code would otherwise hang the close for ever."""
POOL_RECONNECT_TIMEOUT = 4.0
"""Seconds a pool retries (with backoff) to replace a lost connection before it gives up and
lets the next request start a fresh attempt. Without this bound the backoff doubles for
minutes, and after an outage the pool could wait half a minute before trying again."""


def fetch(conn: psycopg.Connection[Any], sql: str, params: dict[str, Any]) -> list[Row]:
    """Run one named statement on a sync connection; rows as dicts (none for DDL/DML)."""
    with cursor(conn, dict_row) as cur:
        cur.execute(sql, params)
        return list(cur.fetchall()) if cur.description is not None else []


def _refuse_pooled(announced: int, server: int) -> None:
    """A pooler answers a connection's startup with a key of its own, not the server process
    id: the two differ on a connection that goes through one."""
    if server != announced:
        raise ConfigError(
            "database_direct_url (<redacted>) goes through a connection pooler (its session's"
            f" server process is {server}, the connection was told {announced}): point it at"
            " PostgreSQL itself, which LISTEN and migrations need"
        )


class LoopEndedWhileConnecting(BaseException):
    """An event loop ended (its tasks cancelled) while one of tickwork's pools was opening a
    connection in it: the pool was not closed first."""


class PoolConnection(psycopg.AsyncConnection[Any]):
    """The connections of tickwork's async pools. psycopg_pool runs a connect in a task of
    the loop and takes a cancelled connect for a failed one, which it tries again, so that
    task never ends: ``asyncio.run`` would wait for it for ever when a program ends with a
    pool still open and a connect in flight. Cancelled here, a connect ends that task (and
    ``asyncio.run`` logs why, naming the remedy) instead."""

    @classmethod
    async def connect(cls, conninfo: str = "", **kwargs: Any) -> Self:
        try:
            return await super().connect(conninfo, **kwargs)
        except asyncio.CancelledError:
            raise LoopEndedWhileConnecting(
                "the event loop ended while a tickwork pool was connecting: close the App"
                " (await app.aclose()) before the loop ends"
            ) from None


def reporting_to(reach: Reach) -> type[PoolConnection]:
    """:class:`PoolConnection` whose connects tell ``reach`` how they went."""

    class Reporting(PoolConnection):
        @classmethod
        async def connect(cls, conninfo: str = "", **kwargs: Any) -> Self:
            try:
                conn = await super().connect(conninfo, **kwargs)
            except psycopg.OperationalError:
                reach.failed()
                raise
            reach.connected()
            return conn

    return Reporting


def _milliseconds(seconds: float) -> str:
    return str(math.ceil(seconds * 1000))


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
        self._opening: dict[asyncio.AbstractEventLoop, asyncio.Lock] = {}
        self._loop_connections: dict[
            asyncio.AbstractEventLoop, weakref.WeakSet[psycopg.AsyncConnection[Any]]
        ] = {}
        self.joined: Callable[[], Any] | None = None
        """The connection a sync enqueue or emit made without ``conn`` joins, set by a
        framework integration (Django's connection); None: tickwork's own pool, each call
        its own transaction."""
        self.url_source: Callable[[], str] | None = None
        """Where the URL comes from when a framework owns it (Django's settings, which its
        test runner changes to the test database): read each time a pool or connection is
        opened, instead of the settings' URL."""
        self.direct_url_source: Callable[[], str] | None = None
        """:attr:`url_source` for :attr:`direct_url` (Django's ``DIRECT_DATABASE``)."""

    @property
    def url(self) -> str:
        """The connection URL; starts the embedded server when none is configured."""
        if self.url_source is not None:
            return self.url_source()
        with self._lock:
            if self._url is None:
                configured = self.settings.database_url
                if configured is not None:
                    self._url = configured.get_secret_value()
                else:
                    self._url = embedded.start(self.settings.data_dir)
            return self._url

    @property
    def direct_url(self) -> str:
        """The URL of the connections that need a session of their own (LISTEN, migrations,
        the unpooled ones): ``database_direct_url``, else :attr:`url`."""
        if self.direct_url_source is not None:
            return self.direct_url_source()
        direct = self.settings.database_direct_url
        if direct is not None:
            return direct.get_secret_value()
        return self.url

    @property
    def pooler(self) -> bool:
        """True when :attr:`url` reaches a transaction pooler (``database_pooler``)."""
        return self.settings.database_pooler == "transaction"

    def check_direct(self, conn: psycopg.Connection[Any]) -> None:
        """Behind a transaction pooler, refuse a connection to ``database_direct_url`` that
        goes through a pooler after all: LISTEN there would never hear a notification, and
        the migrations' lock would be held by whichever session ran it."""
        if self.pooler:
            _refuse_pooled(conn.info.backend_pid, self.store.connection_backend_pid_sync(conn))

    def warn_if_pooled(self, conn: psycopg.Connection[Any]) -> None:
        """Without ``database_pooler``, say so in the log when ``conn`` goes through a pooler
        all the same: in session mode that is fine, in transaction mode the worker's pools
        are refused (their settings at connect) and the migrations' lock could be left held."""
        if not self.pooler and conn.info.backend_pid != self.store.connection_backend_pid_sync(
            conn
        ):
            log.warning(
                "the database connection goes through a connection pooler: in transaction"
                ' mode set database_pooler = "transaction" and database_direct_url'
                " (docs/deployment.md, Behind PgBouncer)"
            )

    async def check_direct_async(self, conn: psycopg.AsyncConnection[Any]) -> None:
        """:meth:`check_direct` for an async connection."""
        if self.pooler:
            _refuse_pooled(conn.info.backend_pid, await self.store.connection_backend_pid(conn))

    @property
    def _connect_timeout(self) -> int:
        # libpq takes whole seconds, and psycopg reads 0 as its default (130 s): round up
        return max(1, math.ceil(self.settings.connect_timeout))

    def tcp_kwargs(self, url: str) -> dict[str, Any]:
        """The connect timeout and the TCP settings (``settings.tcp``) as libpq parameters,
        leaving out those the URL sets itself (the URL's win: a keyword argument would
        override them)."""
        given = conninfo_to_dict(url)
        ours = {"connect_timeout": self._connect_timeout, **self.settings.tcp.libpq()}
        return {name: value for name, value in ours.items() if name not in given}

    def bounds(self) -> dict[str, str]:
        """The server-side bounds of the API's and the services' sessions: their
        ``statement_timeout`` and ``idle_in_transaction_session_timeout`` (those set to 0
        left out, so the server's or the role's apply)."""
        found = {}
        if self.settings.statement_timeout:
            found["statement_timeout"] = _milliseconds(self.settings.statement_timeout)
        if self.settings.idle_in_transaction_timeout:
            found["idle_in_transaction_session_timeout"] = _milliseconds(
                self.settings.idle_in_transaction_timeout
            )
        return found

    def bounded_kwargs(self, url: str) -> dict[str, Any]:
        """:meth:`connection_kwargs` with :meth:`bounds` among the startup options, where the
        URL's options (or ``PGOPTIONS``) still win over them."""
        return self._kwargs(url, self.bounds(), {})

    def connection_kwargs(self, url: str, **server_settings: str) -> dict[str, Any]:
        """Keyword arguments for tickwork's own pooled connections: autocommit, the JSON
        loaders of :mod:`tickwork.db.loaders`, the connect timeout and TCP settings
        (:meth:`tcp_kwargs`), and startup options: the server-side TCP settings
        (``settings.tcp.server_side``), then the options the URL (or ``PGOPTIONS``) gives,
        which win over those, then ``server_settings``. Behind a transaction pooler: no
        options and no prepared statements."""
        return self._kwargs(url, {}, server_settings)

    def _kwargs(
        self, url: str, bounds: dict[str, str], server_settings: dict[str, str]
    ) -> dict[str, Any]:
        kwargs: dict[str, Any] = {
            "autocommit": True,
            "context": ADAPTERS,
            **self.tcp_kwargs(url),
        }
        if self.pooler:
            # Through a transaction pooler the next statement may run in another server
            # session, where a statement psycopg prepared (after prepare_threshold runs) does
            # not exist; settings sent at connect are refused ("unsupported startup
            # parameter"), and set in a session they would stay with it for other clients.
            # The cost: every statement is planned anew (plan_cache_mode is moot), and JIT,
            # the server-side TCP settings and the statement timeouts are the server's or
            # the role's (docs/deployment.md, Behind PgBouncer).
            kwargs["prepare_threshold"] = None
            return kwargs
        given = str(conninfo_to_dict(url).get("options") or os.environ.get("PGOPTIONS", ""))
        ours = self.settings.tcp.server_settings() | bounds
        options = [
            *(f"-c {name}={value}" for name, value in ours.items()),
            given,
            *(f"-c {name}={value}" for name, value in server_settings.items()),
        ]
        if ours or server_settings:
            kwargs["options"] = " ".join(o for o in options if o)
        return kwargs

    def connect(self, *, autocommit: bool = True) -> psycopg.Connection[Any]:
        """A new sync connection, not pooled (the caller closes it), to
        :attr:`direct_url`."""
        url = self.direct_url
        try:
            conn = psycopg.connect(
                url, autocommit=autocommit, context=ADAPTERS, **self.tcp_kwargs(url)
            )
        except psycopg.OperationalError as exc:
            raise DatabaseUnavailable(
                f"could not connect to the database: {one_line(exc)}"
            ) from exc
        try:
            self.check_direct(conn)
        except BaseException:
            conn.close()
            raise
        return conn

    async def connect_async(self, *, autocommit: bool = True) -> psycopg.AsyncConnection[Any]:
        """A new async connection, not pooled (the caller closes it), to
        :attr:`direct_url`."""
        url = await asyncio.to_thread(lambda: self.direct_url)
        try:
            conn = await psycopg.AsyncConnection.connect(
                url, autocommit=autocommit, context=ADAPTERS, **self.tcp_kwargs(url)
            )
        except psycopg.OperationalError as exc:
            raise DatabaseUnavailable(
                f"could not connect to the database: {one_line(exc)}"
            ) from exc
        return await self._checked_direct(conn)

    async def _checked_direct(
        self, conn: psycopg.AsyncConnection[Any]
    ) -> psycopg.AsyncConnection[Any]:
        """``conn``, once :meth:`check_direct_async` passed; closed when it did not."""
        try:
            await self.check_direct_async(conn)
        except BaseException:
            await conn.close()
            raise
        return conn

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
                        kwargs=self.bounded_kwargs(url),
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
        if pool is not None:
            return pool
        # callers that come while it opens wait for that pool rather than open one each (a
        # second pool would replace the first, which no one would then close)
        async with self._opening.setdefault(loop, asyncio.Lock()):
            opened = self._async_pools.get(loop)
            if opened is None:
                opened = await self._open_async_pool(loop, max_size, timeout)
            return opened

    async def _open_async_pool(
        self, loop: asyncio.AbstractEventLoop, max_size: int | None, timeout: float | None
    ) -> AsyncConnectionPool[Any]:
        self._forget_ended_loops()
        url = await asyncio.to_thread(lambda: self.url)
        opened = self._loop_connections.setdefault(loop, weakref.WeakSet())

        async def track(conn: psycopg.AsyncConnection[Any]) -> None:
            opened.add(conn)

        reach = Reach()
        pool = ReachingPool(
            url,
            reach=reach,
            refuse=timeout is not None,  # an API's pool: a refusing database answers at once
            min_size=self.settings.pool_min_size,
            max_size=max(max_size or 0, self.settings.pool_max_size),
            kwargs=self.bounded_kwargs(url),
            timeout=POOL_TIMEOUT if timeout is None else timeout,
            reconnect_timeout=POOL_RECONNECT_TIMEOUT,
            open=False,
            name="tickwork-async",
            connection_class=reporting_to(reach),
            configure=track,
        )
        # its connections are ready before the first caller waits for one: a caller that
        # waits would make the pool grow, a connect left in flight at the loop's end
        await pool.open(wait=True, timeout=pool.timeout)  # closed again if it times out
        self._async_pools[loop] = pool
        return pool

    async def open_pool(
        self, name: str, *, max_size: int, timeout: float, **server_settings: str
    ) -> AsyncConnectionPool[Any]:
        """A new async pool of the caller's own (one connection open when it returns; the
        caller closes it), with tickwork's connection settings and ``server_settings``."""
        url = await asyncio.to_thread(lambda: self.url)
        pool: AsyncConnectionPool[Any] = AsyncConnectionPool(
            url,
            min_size=1,
            max_size=max_size,
            kwargs=self.connection_kwargs(url, **server_settings),
            timeout=timeout,
            reconnect_timeout=POOL_RECONNECT_TIMEOUT,
            open=False,
            name=name,
            connection_class=PoolConnection,
        )
        await pool.open(wait=True)
        return pool

    async def connect_listener(self, name: str) -> psycopg.AsyncConnection[Any]:
        """A new async connection for LISTEN (the caller closes it) to :attr:`direct_url`,
        with tickwork's connection settings, named ``name`` in ``pg_stat_activity``."""
        url = await asyncio.to_thread(lambda: self.direct_url)
        conn = await psycopg.AsyncConnection.connect(
            url, application_name=name, **self.connection_kwargs(url)
        )
        return await self._checked_direct(conn)

    def close(self) -> None:
        """Close the sync pool, the async pools of event loops that have ended, and those of
        loops running in other threads (in their loop; the calling thread's own running
        loop's closes with :meth:`aclose`)."""
        with self._lock:
            pool, self._pool = self._pool, None
        if pool is not None:
            pool.close()
        self._forget_ended_loops()
        self._close_other_threads_pools()

    def _close_other_threads_pools(self) -> None:
        """Close the async pools of loops running in other threads (a test run's thread that
        was left running, whose connections would keep Django's test database from being
        dropped), each in its own loop; a loop too busy to close it within
        :data:`CLOSE_OTHER_LOOP_TIMEOUT` keeps it."""
        try:
            current: asyncio.AbstractEventLoop | None = asyncio.get_running_loop()
        except RuntimeError:
            current = None
        for loop in list(self._async_pools):
            if loop is current or not loop.is_running():
                continue
            closing = asyncio.run_coroutine_threadsafe(self._close_pool_of(loop), loop)
            try:
                closing.result(timeout=CLOSE_OTHER_LOOP_TIMEOUT)
            except TimeoutError:
                closing.cancel()
                log.warning("an async pool left open: its event loop is busy in another thread")

    async def _close_pool_of(self, loop: asyncio.AbstractEventLoop) -> None:
        self._opening.pop(loop, None)
        self._loop_connections.pop(loop, None)
        pool = self._async_pools.pop(loop, None)
        if pool is not None:
            await pool.close()

    def _forget_ended_loops(self) -> None:
        """Forget the async pools of event loops that have ended without closing them
        (``asyncio.run`` of each call, Django's ``async_to_sync`` of each async view under
        WSGI): nothing can run in a closed loop to close a pool the pool's way, so their
        connections are closed at the socket. Without this each such loop would leave its
        connections open for the life of the process."""
        for loop in [loop for loop in list(self._async_pools) if loop.is_closed()]:
            self._async_pools.pop(loop, None)
            self._opening.pop(loop, None)
            for conn in list(self._loop_connections.pop(loop, ())):
                conn.pgconn.finish()

    async def aclose(self) -> None:
        """Close the async pool of the running loop and the sync pool."""
        await self.close_async_pool()
        await asyncio.to_thread(self.close)

    async def close_async_pool(self) -> None:
        """Close the async pool of the running loop (if it has one)."""
        await self._close_pool_of(asyncio.get_running_loop())
