"""The jobs table is vacuumed by its dead rows, so claims stop stepping over the index entries
of the jobs claimed before them."""

from __future__ import annotations

import json
from typing import Any

import psycopg

from tickwork import App, JobSpec
from tickwork.config import RetentionSettings
from tickwork.queue.vacuum import VACUUM_DUTY, JobVacuum

CLAIMED = 10_000


def _claim_range_pages(sql: psycopg.Connection[Any]) -> int:
    """Index and table pages the claim's range scan reads to find the next 10 jobs."""
    sql.execute("SET enable_seqscan = off")
    sql.execute("SET enable_bitmapscan = off")
    (plan,) = sql.execute(
        "EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON)"
        " SELECT id FROM jobs WHERE queue = 'default' AND task = 'tick'"
        " AND state IN ('PENDING', 'FAILED') ORDER BY priority DESC, run_at, id LIMIT 10"
    ).fetchone()  # type: ignore[misc]
    sql.execute("RESET enable_seqscan")
    sql.execute("RESET enable_bitmapscan")
    top = (json.loads(plan) if isinstance(plan, str) else plan)[0]["Plan"]
    return int(top["Shared Hit Blocks"]) + int(top["Shared Read Blocks"])


def _vacuum_count(sql: psycopg.Connection[Any]) -> int:
    row = sql.execute(
        "SELECT vacuum_count FROM pg_stat_user_tables WHERE relid = 'jobs'::regclass"
    ).fetchone()
    assert row is not None
    return int(row[0])


async def _claimed_jobs(app: App, sql: psycopg.Connection[Any]) -> None:
    """CLAIMED jobs taken out of the runnable range as a claim does (their state changes, so
    each leaves a dead row and a dead index entry), and 10 still runnable behind them."""
    if "tick" not in app.tasks:

        @app.task(name="tick")
        async def tick(n: int) -> None:
            pass

    await app.enqueue_many_async([JobSpec("tick", {"n": n}) for n in range(CLAIMED + 10)])
    sql.execute(
        "UPDATE jobs SET state = 'RUNNING' WHERE id IN (SELECT id FROM jobs ORDER BY id LIMIT %s)",
        [CLAIMED],
    )
    sql.execute("SELECT pg_stat_force_next_flush()")  # the dead rows in the statistics now


async def test_past_the_threshold_the_table_is_vacuumed_and_claims_read_a_few_pages(
    app: App, sql: psycopg.Connection[Any]
) -> None:
    await _claimed_jobs(app, sql)
    before = _claim_range_pages(sql)
    vacuums = _vacuum_count(sql)
    vacuum = JobVacuum(
        await app.db.async_pool(),
        app.db.store,
        RetentionSettings(vacuum_dead_rows=CLAIMED),
    )

    result = await vacuum.run_once()

    assert result.vacuumed and result.dead_rows >= CLAIMED
    assert _vacuum_count(sql) == vacuums + 1
    after = _claim_range_pages(sql)
    assert after * 10 < before, (before, after)  # ~50 pages of dead entries, then 2 or 3
    async with (await app.db.async_pool()).connection() as conn:
        assert await app.db.store.job_dead_rows(conn) < CLAIMED


async def test_below_the_threshold_or_turned_off_nothing_is_vacuumed(
    app: App, sql: psycopg.Connection[Any]
) -> None:
    await _claimed_jobs(app, sql)
    pool = await app.db.async_pool()
    vacuums = _vacuum_count(sql)

    below = await JobVacuum(
        pool, app.db.store, RetentionSettings(vacuum_dead_rows=10 * CLAIMED)
    ).run_once()
    never = JobVacuum(pool, app.db.store, RetentionSettings(vacuum="never", vacuum_dead_rows=1))
    zero = JobVacuum(pool, app.db.store, RetentionSettings(vacuum_dead_rows=0))

    assert not below.vacuumed and CLAIMED <= below.dead_rows < 10 * CLAIMED
    assert not never.enabled and not (await never.run_once()).vacuumed
    assert not zero.enabled and not (await zero.run_once()).vacuumed
    assert _vacuum_count(sql) == vacuums


async def test_after_a_vacuum_the_next_waits_out_its_share_of_the_time(
    app: App, sql: psycopg.Connection[Any]
) -> None:
    now = [100.0]
    vacuum = JobVacuum(
        await app.db.async_pool(),
        app.db.store,
        RetentionSettings(vacuum_dead_rows=1),
        clock=lambda: now[0],
    )
    original = app.db.store.job_vacuum

    async def slow_vacuum(conn: Any) -> None:  # the clock says this vacuum took 2 s
        await original(conn)
        now[0] += 2.0

    app.db.store.job_vacuum = slow_vacuum  # type: ignore[method-assign]
    try:
        await _claimed_jobs(app, sql)
        assert (await vacuum.run_once()).vacuumed
        rest = 2.0 * (1 / VACUUM_DUTY - 1)
        await _claimed_jobs(app, sql)
        now[0] += rest - 0.1
        assert (await vacuum.run_once()).dead_rows == -1  # resting: not even looked
        now[0] += 0.1
        assert (await vacuum.run_once()).vacuumed
    finally:
        del app.db.store.job_vacuum


async def test_the_retention_leader_runs_the_vacuum_unless_it_is_turned_off(
    database_url: str, schema: str
) -> None:
    for retention, expected in (({}, True), ({"vacuum_dead_rows": 0}, False)):
        app = App(database_url=database_url, schema=schema, retention=retention)
        host = app.services(await app.db.async_pool(), roles={"retention"})
        assert ("vacuum" in {s.name for s in host._services}) is expected
        await app.aclose()
