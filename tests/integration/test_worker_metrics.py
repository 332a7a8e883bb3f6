"""The processes' CPU and memory samples (worker_metrics): taken with psutil, listed by the
API, aged out by retention; and retention of the audit trail by its window (issue 16)."""

from __future__ import annotations

import os
import uuid
from collections.abc import AsyncIterator
from typing import Any

import psycopg
import pytest

from tickwork import App
from tickwork.auth import Role
from tickwork.queue.retention import Retention
from tickwork.services.sampler import Sampler

from .api_support import Api, start_api


@pytest.fixture
async def api(app: App) -> AsyncIterator[Api]:
    async for started in start_api(app):
        yield started


async def test_a_sample_is_stored_and_listed(api: Api, app: App) -> None:
    pool = await app.db.async_pool()
    worker_id = uuid.uuid4()
    sampler = Sampler(pool, app.db.store, worker_id=worker_id, roles="executor", interval=30)
    first = await sampler.run_once()
    await Sampler(pool, app.db.store, worker_id=uuid.uuid4(), roles="api", interval=30).run_once()
    assert first.pid == os.getpid() and first.rss_bytes > 0 and first.cpu_percent >= 0

    c, viewer = api.client, api.headers(Role.VIEWER)
    assert (await c.get("/api/workers/metrics")).status_code == 401
    listed = await c.get(
        "/api/workers/metrics", params={"worker_id": str(worker_id)}, headers=viewer
    )
    assert listed.status_code == 200, listed.text
    [only] = listed.json()["items"]
    assert (only["worker_id"], only["pid"], only["roles"]) == (
        str(worker_id),
        os.getpid(),
        "executor",
    )
    paged = await c.get("/api/workers/metrics", params={"limit": 1}, headers=viewer)
    assert len(paged.json()["items"]) == 1 and paged.json()["next_before_id"] is not None
    bad = await c.get("/api/workers/metrics", params={"worker_id": "nope"}, headers=viewer)
    assert bad.status_code == 400 and bad.json()["field"] == "worker_id"


async def test_retention_ages_out_samples_and_audit_events_by_their_windows(
    app: App, sql: psycopg.Connection[Any]
) -> None:
    sql.execute(
        "INSERT INTO worker_metrics (worker_id, host, pid, roles, sampled_at, cpu_percent,"
        " rss_bytes, children_rss_bytes) VALUES (gen_random_uuid(), 'h', 1, 'executor',"
        " now() - interval '8 days', 1, 1, 0), (gen_random_uuid(), 'h', 1, 'executor', now(),"
        " 1, 1, 0)"
    )
    sql.execute(
        "INSERT INTO audit_events (actor, event_type, target_type, target_id, occurred_at)"
        " VALUES ('t', 'old', 'x', '1', now() - interval '3 days'),"
        " ('t', 'new', 'x', '2', now())"
    )
    # operators keep the audit trail 2 days (an app setting); samples keep their default
    sql.execute(
        "INSERT INTO app_settings (key, value, updated_by)"
        " VALUES ('retention.audit_after', '172800', 't')"
    )
    pool = await app.db.async_pool()
    await Retention(pool, app.db.store, app.settings.retention).run_once()
    samples = sql.execute("SELECT count(*) FROM worker_metrics").fetchone()
    events = sql.execute("SELECT event_type FROM audit_events WHERE target_type = 'x'").fetchall()
    assert samples == (1,) and events == [("new",)]
