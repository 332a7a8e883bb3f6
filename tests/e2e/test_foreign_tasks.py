"""A process that does not know a task never spends an attempt on its jobs: a plain
``tickwork serve`` (no ``--app``) beside a real worker that has the task, on one queue."""

from __future__ import annotations

import asyncio
import os
import signal
from pathlib import Path

import psycopg
import pytest

from tickwork import App
from tickwork.queue import admin

from .support import HANG_GUARD, WORKER_APP, free_port, spawner, wait_for

pytestmark = pytest.mark.e2e

E2E_DIR = Path(__file__).parent
JOBS = 200


def test_serve_without_the_app_leaves_the_jobs_to_the_worker_that_has_the_task(
    noop_app: App, db_env: dict[str, str], tmp_path: Path, schema: str
) -> None:
    env = dict(
        db_env,
        TICKWORK_ADMIN_EMAIL="root@example.com",
        TICKWORK_ADMIN_PASSWORD="correct horse battery staple",
        TICKWORK_WORKER__POLL_INTERVAL="0.2",
        PYTHONPATH=os.pathsep.join(p for p in (str(E2E_DIR), db_env.get("PYTHONPATH")) if p),
    )
    url = noop_app.db.url

    def one(query: str) -> tuple[object, ...]:
        with psycopg.connect(url, autocommit=True) as conn:
            row = conn.execute(query.replace("{schema}", schema)).fetchone()
            assert row is not None
            return tuple(row)

    serving = spawner(env, tmp_path, "serve", "--port", str(free_port()))  # knows no task
    working = spawner(env, tmp_path, "worker", "--app", WORKER_APP, "--queues", "default")
    with serving as spawn_serve, working as spawn_worker:
        serve = spawn_serve("serve")
        wait_for(
            lambda: one("SELECT count(*) FROM {schema}.workers WHERE stopped_at IS NULL")[0],
            "serve's executor to register",
        )
        jobs = [noop_app.enqueue("e2e.noop") for _ in range(JOBS)]
        # serve is live on `default` and knows no task: the jobs are named as waiting for one
        assert {u.task: u.jobs for u in _unserved(noop_app)} == {"e2e.noop": JOBS}
        assert any("e2e.noop" in w for w in noop_app.health().warnings)

        worker = spawn_worker("worker")
        wait_for(
            lambda: one(f"SELECT count(*) = {JOBS} FROM {{schema}}.jobs WHERE state = 'SUCCEEDED'")[
                0
            ],
            "every job to succeed",
        )
        for process in (serve, worker):
            process.send_signal(signal.SIGTERM)
        for process in (serve, worker):
            assert process.wait(HANG_GUARD) == 0

    ids = [job.id for job in jobs]
    assert one(
        "SELECT count(*), count(*) FILTER (WHERE e.state <> 'SUCCEEDED'),"
        " count(DISTINCT e.worker_id) FROM {schema}.executions e"
        f" WHERE e.job_id = ANY(ARRAY{ids}::bigint[])"
    ) == (JOBS, 0, 1)  # one attempt each, all by the one worker that has the task
    (by_serve,) = one(
        "SELECT count(*) FROM {schema}.executions e JOIN {schema}.workers w"
        " ON w.id = e.worker_id WHERE cardinality(w.tasks) = 0"
    )
    assert by_serve == 0


def _unserved(app: App) -> list[admin.UnservedTask]:
    async def stats() -> list[admin.QueueStats]:
        try:
            return await admin.queue_stats(await app.db.async_pool(), app.db.store)
        finally:
            await app.aclose()

    return [u for q in asyncio.run(stats()) for u in q.unserved]
