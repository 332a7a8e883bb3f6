"""Async pools of event loops that end without closing them (``asyncio.run`` per call, or
Django's ``async_to_sync`` per async view under WSGI): their connections are closed, not
left open for the life of the process."""

from __future__ import annotations

import asyncio
import secrets
import threading

import psycopg
from psycopg.conninfo import make_conninfo

from tickwork import App


def opened(database_url: str, name: str) -> int:
    with psycopg.connect(database_url, autocommit=True) as conn:
        row = conn.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE application_name = %s", [name]
        ).fetchone()
    assert row is not None
    return int(row[0])


def test_each_ended_loops_pool_is_closed_when_the_next_loop_opens_one_and_at_close(
    database_url: str, schema: str
) -> None:
    name = f"tw_loops_{secrets.token_hex(4)}"
    app = App(database_url=make_conninfo(database_url, application_name=name), schema=schema)

    @app.task
    def noop() -> None:
        pass

    try:
        counts = []
        for _ in range(5):
            asyncio.run(noop.defer_async())  # each call a loop of its own, ended after it
            counts.append(opened(database_url, name))
        assert counts[0] > 0
        assert counts == [counts[0]] * 5  # the last loop's pool only, not one per loop
    finally:
        app.close()
    assert opened(database_url, name) == 0


def test_close_closes_the_pool_of_a_loop_still_running_in_another_thread(
    database_url: str, schema: str
) -> None:
    name = f"tw_loops_{secrets.token_hex(4)}"
    app = App(database_url=make_conninfo(database_url, application_name=name), schema=schema)

    @app.task
    def noop() -> None:
        pass

    loop = asyncio.new_event_loop()
    running = threading.Thread(target=loop.run_forever)
    running.start()
    try:
        asyncio.run_coroutine_threadsafe(noop.defer_async(), loop).result()
        assert opened(database_url, name) > 0
        app.close()  # from this thread, while that loop runs on
        assert opened(database_url, name) == 0
    finally:
        loop.call_soon_threadsafe(loop.stop)
        running.join()
        loop.close()
