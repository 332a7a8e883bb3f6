"""Many callers at the same instant, each on a connection of its own: one row per unique key,
one signal per key per debounce window, no caller ever sees an error."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import psycopg
import pytest

from tickwork import App

from ..figures import record, scale

ENQUEUERS = scale(20, 50)
"""Callers racing for one unique key, each on a connection of its own. The short version
(every CI run) holds 20: with 50, two test runs at once on one server (max_connections
100) took more than it has, and other tests failed with "too many clients already"."""
PRODUCERS = 20
EMITS_PER_PRODUCER = scale(10, 200)
KEYS = 3
HANG_GUARD = 120.0  # not a timing assertion: only stops a broken test from hanging


@pytest.fixture
async def connect(
    database_url: str,
) -> AsyncIterator[Callable[[int], Awaitable[list[psycopg.AsyncConnection[Any]]]]]:
    """``await connect(n)``: ``n`` connections of their own (only as many as the test needs),
    closed at the end."""
    opened: list[psycopg.AsyncConnection[Any]] = []

    async def open_n(n: int) -> list[psycopg.AsyncConnection[Any]]:
        for _ in range(n):
            opened.append(await psycopg.AsyncConnection.connect(database_url))
        return opened[-n:]

    try:
        yield open_n
    finally:
        for conn in opened:
            await conn.close()


async def all_at_once(calls: list[Any]) -> list[Any]:
    """Run the coroutine functions together, released by a barrier once all are ready."""
    barrier = asyncio.Barrier(len(calls))

    async def run(call: Any) -> Any:
        await barrier.wait()
        return await call()

    tasks = [asyncio.create_task(run(call)) for call in calls]
    return await asyncio.wait_for(asyncio.gather(*tasks, return_exceptions=True), HANG_GUARD)


async def test_fifty_concurrent_enqueues_of_one_unique_key_store_one_job(
    app: App, connect: Any, sql: Any
) -> None:
    @app.task(name="tests.once")
    def once() -> None: ...

    def enqueue(conn: psycopg.AsyncConnection[Any]) -> Any:
        async def call() -> Any:
            async with conn.transaction():
                return await app.enqueue_async("tests.once", unique_key="welcome:42", conn=conn)

        return call

    answers = await all_at_once([enqueue(conn) for conn in await connect(ENQUEUERS)])
    errors = [a for a in answers if isinstance(a, BaseException)]
    assert errors == []
    [(stored,)] = sql.execute("SELECT count(*) FROM jobs WHERE unique_key = 'welcome:42'")
    assert stored == 1
    assert len({job.id for job in answers}) == 1
    assert sum(not job.duplicate for job in answers) == 1
    check = f"{ENQUEUERS} concurrent enqueues of one unique key"
    record("reliability", check, "enqueues", ENQUEUERS)
    record("reliability", check, "rows stored", stored)
    record("reliability", check, "caller errors", len(errors))


async def test_twenty_producers_in_one_window_make_one_signal_per_key(
    database_url: str,
    schema: str,
    clean: None,
    connect: Any,
    sql: Any,
) -> None:
    app = App(
        database_url=database_url,
        schema=schema,
        signals={"debounce": {"SCORE_CHANGED": 3600}},  # one window for the whole test
    )
    try:

        def producer(conn: psycopg.AsyncConnection[Any], n: int) -> Any:
            async def call() -> list[bool]:
                squashed = []
                for i in range(EMITS_PER_PRODUCER):
                    key = f"series:{(n + i) % KEYS}"
                    async with conn.transaction():
                        emitted = await app.signals.emit_async(
                            "SCORE_CHANGED", "Score", n, key, payload={"n": n, "i": i}, conn=conn
                        )
                    squashed.append(emitted.squashed)
                return squashed

            return call

        answers = await all_at_once(
            [producer(conn, n) for n, conn in enumerate(await connect(PRODUCERS))]
        )
    finally:
        await app.aclose()
    errors = [a for a in answers if isinstance(a, BaseException)]
    assert errors == []
    per_key = dict(
        sql.execute(
            "SELECT aggregate_key, count(*) FROM signals WHERE signal_type = 'SCORE_CHANGED'"
            " GROUP BY aggregate_key"
        ).fetchall()
    )
    assert per_key == {f"series:{k}": 1 for k in range(KEYS)}
    emits = PRODUCERS * EMITS_PER_PRODUCER
    assert sum(s for answer in answers for s in answer) == emits - KEYS  # all others squashed
    check = "20 producers emitting into one debounce window"
    record("reliability", check, "emits", emits, keys=KEYS)
    record("reliability", check, "signals stored", sum(per_key.values()))
    record("reliability", check, "caller errors", len(errors))
