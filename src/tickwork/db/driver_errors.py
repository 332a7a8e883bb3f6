"""Driver errors as tickwork's: the one place a psycopg error is read and translated.

Code outside ``db/`` does not import psycopg's error classes: it wraps work on the database
in :func:`translating` (a driver error becomes a :class:`~tickwork.errors.DatabaseError`),
catches :data:`CONNECTION_ERRORS` where a loop outlives a lost connection, and re-runs a
statement the database aborted for another's sake with :func:`retrying_deadlocks`.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
import time
from collections.abc import Awaitable, Callable, Iterator
from typing import TypeVar

import psycopg
from psycopg_pool import PoolTimeout

from tickwork.errors import DatabaseError, DatabaseUnavailable, DataRefused, EnqueueFailed

log = logging.getLogger("tickwork.db")

T = TypeVar("T")

DriverError = psycopg.Error
"""Every error the driver raises (PoolTimeout included)."""
DuplicateKey = psycopg.errors.UniqueViolation
"""A row another transaction committed first holds the same unique key."""
ValueRefused = psycopg.DataError
"""The database refused a value (out of range, malformed): not worth sending again."""
CONNECTION_ERRORS: tuple[type[BaseException], ...] = (psycopg.Error, OSError)
"""What a loop holding a connection of its own (LISTEN, heartbeats) survives and retries."""
CONNECTION_LOST: tuple[type[BaseException], ...] = (
    psycopg.OperationalError,
    psycopg.InterfaceError,
    OSError,
)
"""A connection that failed or could not be had: the statement may be sent again on
another (what the database refused is not among these)."""


@contextlib.contextmanager
def translating() -> Iterator[None]:
    """Turn a driver error raised inside the block into :func:`database_error`'s (works
    around ``await`` as well)."""
    try:
        yield
    except psycopg.Error as exc:
        raise database_error(exc) from exc


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


UNAVAILABLE_STATES = frozenset({"57P01", "57P02", "57P03", "53300", "57014", "55P03"})
"""Server-reported states that mean "not now" rather than "not this": shutting down, crash
shutdown, cannot connect now, too many connections, a statement cancelled (by
``statement_timeout``), a lock not had within ``lock_timeout`` (and every connection
exception, 08)."""
NOT_RUN_STATES = frozenset({"53300", "57014", "55P03"})
"""States after which the statement surely did not take effect: no connection, or the server
cancelled the statement (it was rolled back)."""


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
    refused = isinstance(exc, PoolTimeout) or exc.sqlstate in NOT_RUN_STATES
    stored = None if committing and not refused else False
    return EnqueueFailed(stored, _first_line(exc))


def _first_line(exc: BaseException) -> str:
    return (str(exc).strip().splitlines() or [type(exc).__name__])[0]


def one_line(exc: BaseException) -> str:
    """A driver error's message on one line (libpq adds indented hints on lines of their
    own)."""
    return " ".join(part.strip() for part in str(exc).splitlines() if part.strip())
