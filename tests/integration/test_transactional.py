"""Transactional enqueue: the job exists exactly when the caller's transaction commits, and
tickwork never commits or rolls back a transaction it was handed."""

from __future__ import annotations

from typing import Any

import psycopg
import pytest
from psycopg.pq import TransactionStatus
from sqlalchemy import create_engine, text
from sqlalchemy.ext.asyncio import create_async_engine
from sqlalchemy.orm import Session

from tickwork import App, EnqueueError, JobNotFoundError


@pytest.fixture
def ping(app: App) -> Any:
    @app.task
    def ping(n: int) -> None:
        pass

    return ping


def sqlalchemy_url(database_url: str) -> str:
    return database_url.replace("postgresql://", "postgresql+psycopg://", 1)


def test_psycopg_sync_rollback_leaves_nothing_commit_makes_it_visible(
    app: App, ping: Any, database_url: str
) -> None:
    with psycopg.connect(database_url) as conn:
        gone = ping.defer(n=1, conn=conn)
        assert conn.info.transaction_status is TransactionStatus.INTRANS  # still the caller's
        conn.rollback()
        kept = app.enqueue(ping.name, {"n": 2}, conn=conn)
        # not yet committed: invisible to everyone else
        with pytest.raises(JobNotFoundError):
            app.get_job(kept.id)
        conn.commit()
    with pytest.raises(JobNotFoundError):
        app.get_job(gone.id)
    assert app.get_job(kept.id).args == {"n": 2}


def test_domain_write_and_job_commit_or_vanish_together(
    app: App, ping: Any, database_url: str, schema: str
) -> None:
    with psycopg.connect(database_url) as conn:
        conn.execute(f"CREATE TABLE IF NOT EXISTS {schema}.orders (id int primary key)")
        conn.commit()
        with pytest.raises(psycopg.errors.UniqueViolation), conn.transaction():
            conn.execute(f"INSERT INTO {schema}.orders VALUES (1)")
            job = ping.defer(n=1, conn=conn)
            conn.execute(f"INSERT INTO {schema}.orders VALUES (1)")  # fails: all rolls back
    with pytest.raises(JobNotFoundError):
        app.get_job(job.id)


async def test_psycopg_async_rollback_and_commit(app: App, ping: Any, database_url: str) -> None:
    async with await psycopg.AsyncConnection.connect(database_url) as conn:
        gone = await ping.defer_async(n=1, conn=conn)
        many = await app.enqueue_many_async([ping.spec(n=2), ping.spec(n=3)], conn=conn)
        assert conn.info.transaction_status is TransactionStatus.INTRANS
        await conn.rollback()
        kept = await app.enqueue_async(ping.name, {"n": 4}, conn=conn)
        await conn.commit()
    for job in (gone, *many):
        with pytest.raises(JobNotFoundError):
            app.get_job(job.id)
    assert app.get_job(kept.id).args == {"n": 4}


def test_sqlalchemy_session_joins_its_transaction(app: App, ping: Any, database_url: str) -> None:
    engine = create_engine(sqlalchemy_url(database_url))
    try:
        with Session(engine) as session:
            gone = ping.defer(n=1, conn=session)
            session.rollback()
            kept = ping.defer(n=2, conn=session)
            with engine.connect() as other:  # not visible before commit
                found = other.execute(text("SELECT 1")).scalar()
                assert found == 1
            with pytest.raises(JobNotFoundError):
                app.get_job(kept.id)
            session.commit()
        with engine.connect() as conn:
            in_tx = ping.defer(n=3, conn=conn)
            conn.rollback()
    finally:
        engine.dispose()
    with pytest.raises(JobNotFoundError):
        app.get_job(gone.id)
    with pytest.raises(JobNotFoundError):
        app.get_job(in_tx.id)
    assert app.get_job(kept.id).args == {"n": 2}


async def test_sqlalchemy_async_session_joins_its_transaction(
    app: App, ping: Any, database_url: str
) -> None:
    from sqlalchemy.ext.asyncio import AsyncSession

    engine = create_async_engine(sqlalchemy_url(database_url))
    try:
        async with AsyncSession(engine) as session:
            gone = await ping.defer_async(n=1, conn=session)
            await session.rollback()
            kept = await ping.defer_async(n=2, conn=session)
            await session.commit()
        async with engine.connect() as conn:
            in_tx = await ping.defer_async(n=3, conn=conn)
            await conn.rollback()
    finally:
        await engine.dispose()
    for job in (gone, in_tx):
        with pytest.raises(JobNotFoundError):
            app.get_job(job.id)
    assert app.get_job(kept.id).args == {"n": 2}


def test_wrong_kind_of_connection_is_refused(ping: Any) -> None:
    with pytest.raises(EnqueueError, match="conn"):
        ping.defer(n=1, conn=object())
    engine = create_engine("sqlite://")
    with Session(engine) as session, pytest.raises(EnqueueError, match="psycopg driver"):
        ping.defer(n=1, conn=session)
