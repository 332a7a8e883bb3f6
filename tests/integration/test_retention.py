"""Retention deletes finished jobs past their window, never work that may still run."""

from __future__ import annotations

from typing import Any

import psycopg

from tickwork import App, FixedBackoff, JobState
from tickwork.queue.retention import Retention


async def test_finished_jobs_past_the_window_are_deleted_with_their_executions(
    app: App, sql: psycopg.Connection[Any], database_url: str, schema: str
) -> None:
    @app.task(max_attempts=1)
    def ok() -> None:
        pass

    @app.task(max_attempts=1)
    def broken() -> None:
        raise RuntimeError("no")

    @app.task(max_attempts=3, backoff=FixedBackoff(3600))
    def retried() -> None:
        raise RuntimeError("later")

    old_ok, recent_ok = ok.defer(), ok.defer()
    dead = broken.defer()
    waiting_retry = retried.defer()
    async with app.worker(concurrency=10) as worker:
        await worker.run_once()
    cancelled = ok.defer()
    app.cancel(cancelled.id)
    pending = ok.defer()
    # age everything that finished by two hours (and the FAILED one's last attempt too)
    sql.execute("UPDATE jobs SET finished_at = finished_at - interval '2 hours'")
    sql.execute("UPDATE jobs SET finished_at = now() WHERE id = %s", [recent_ok.id])
    assert app.get_job(waiting_retry.id).state is JobState.FAILED

    pruner = App(
        database_url=database_url,
        schema=schema,
        retention={"finished_after": 3600, "dead_letter_after": 3 * 3600, "batch": 1},
    )
    retention = Retention(await pruner.db.async_pool(), pruner.db.store, pruner.settings.retention)
    result = await retention.run_once()
    await pruner.aclose()

    assert result.deleted == 2  # old_ok and cancelled; batch size 1 loops until done
    autovacuum = sql.execute("SELECT current_setting('autovacuum')::bool").fetchone()
    assert result.vacuumed == (autovacuum == (False,))  # "auto": only where the server won't
    remaining = {r[0] for r in sql.execute("SELECT id FROM jobs")}
    assert remaining == {recent_ok.id, dead.id, waiting_retry.id, pending.id}
    orphans = sql.execute(
        "SELECT count(*) FROM executions e WHERE NOT EXISTS"
        " (SELECT 1 FROM jobs j WHERE j.id = e.job_id)"
    ).fetchone()
    assert orphans == (0,)
    assert old_ok.id not in remaining and cancelled.id not in remaining
