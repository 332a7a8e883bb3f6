"""Wait for a job to finish: woken by NOTIFY, not by polling.

Every statement that puts jobs in a final state (SUCCEEDED, CANCELLED, DEAD_LETTER) sends
one notification on ``<schema>.finished`` naming them (``job_complete_many`` once per
batch). A waiter LISTENs on its own connection, reads the job once (after LISTEN, so a
finish in between is not missed), and reads it again only when a notification names it, or
names no ids (a batch too large for one payload). A notification can be lost (the listening
connection dropped), so a waiter also looks every :data:`RECHECK_INTERVAL` seconds.
"""

from __future__ import annotations

import time
from typing import Any

import psycopg
from psycopg import sql

from tickwork.db.database import Database
from tickwork.db.store import Row
from tickwork.errors import JobNotFoundError, WaitTimeout
from tickwork.queue import rows as decode
from tickwork.types import Job, JobState

FINAL_STATES = frozenset({JobState.SUCCEEDED, JobState.CANCELLED, JobState.DEAD_LETTER})
"""States a job does not leave by itself (a manual retry can still send it back)."""
RECHECK_INTERVAL = 5.0
"""Seconds a waiter goes without a notification naming its job before it looks anyway."""


def names(payload: str, job_id: int) -> bool:
    """True when a ``finished`` notification may concern ``job_id``."""
    return not payload or str(job_id) in payload.split(",")


def _remaining(deadline: float | None) -> float:
    return (
        RECHECK_INTERVAL if deadline is None else min(RECHECK_INTERVAL, deadline - time.monotonic())
    )


def _job(found: Row | None, job_id: int) -> Job:
    if found is None:
        raise JobNotFoundError(job_id)
    return decode.job(found)


def _check(timeout: float | None) -> None:
    if timeout is not None and not (isinstance(timeout, int | float) and timeout >= 0):
        raise ValueError(f"timeout ({timeout!r}) must be a number of seconds >= 0, or None")


async def wait_async(db: Database, job_id: int, timeout: float | None) -> Job:
    """Wait until job ``job_id`` is final (or raise :class:`WaitTimeout`)."""
    _check(timeout)
    deadline = None if timeout is None else time.monotonic() + timeout
    listen = sql.SQL("LISTEN {}").format(sql.Identifier(db.store.channel("finished")))
    conn: psycopg.AsyncConnection[Any] = await db.connect_async()
    async with conn:
        await conn.execute(listen)
        while True:
            job = _job(await db.store.job_get(conn, job_id=job_id), job_id)
            if job.state in FINAL_STATES:
                return job
            if (wait_for := _remaining(deadline)) <= 0:
                raise WaitTimeout(job_id, job.state.value, timeout or 0.0)
            async for notice in conn.notifies(timeout=wait_for):
                if names(notice.payload, job_id):
                    break
