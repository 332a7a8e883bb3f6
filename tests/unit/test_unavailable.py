"""Which driver errors mean the database is out of reach (503, "may have been stored")
and which are statements the server refused."""

from __future__ import annotations

import psycopg
import pytest
from psycopg_pool import PoolTimeout

from tickwork.db.driver_errors import enqueue_error, unavailable
from tickwork.errors import DatabaseUnavailable, EnqueueFailed


@pytest.mark.parametrize(
    "exc",
    [
        PoolTimeout("no connection"),
        psycopg.OperationalError("the connection was lost"),
        psycopg.InterfaceError("the connection is closed"),
        psycopg.errors.AdminShutdown("terminating connection"),
        psycopg.errors.CannotConnectNow("starting up"),
        psycopg.errors.TooManyConnections("too many clients"),
        # the server cancelled it past statement_timeout (or lock_timeout): not now, not
        # "not this" (a 503 to retry, not a 500)
        psycopg.errors.QueryCanceled("canceling statement due to statement timeout"),
        psycopg.errors.LockNotAvailable("canceling statement due to lock timeout"),
    ],
)
def test_out_of_reach(exc: Exception) -> None:
    assert unavailable(exc)


@pytest.mark.parametrize(
    "exc",
    [
        psycopg.errors.DeadlockDetected("deadlock"),
        psycopg.errors.SerializationFailure("could not serialize"),
        psycopg.errors.DiskFull("no space"),
        psycopg.errors.UniqueViolation("duplicate"),
    ],
)
def test_refused_statements_are_not_outages(exc: Exception) -> None:
    assert not unavailable(exc)
    translated = enqueue_error(exc, committing=True)  # type: ignore[arg-type]
    assert not isinstance(translated, DatabaseUnavailable)


def test_only_a_lost_connection_while_committing_leaves_the_job_in_doubt() -> None:
    lost = enqueue_error(psycopg.OperationalError("lost"), committing=True)
    assert isinstance(lost, EnqueueFailed) and lost.stored is None
    waited = enqueue_error(PoolTimeout("no connection"), committing=True)
    assert isinstance(waited, EnqueueFailed) and waited.stored is False
    cancelled = enqueue_error(psycopg.errors.QueryCanceled("timeout"), committing=True)
    assert isinstance(cancelled, EnqueueFailed) and cancelled.stored is False  # rolled back
    before = enqueue_error(psycopg.OperationalError("lost"), committing=False)
    assert isinstance(before, EnqueueFailed) and before.stored is False
