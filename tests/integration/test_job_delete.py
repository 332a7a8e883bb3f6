"""Deleting a job: the statement's rule (never a RUNNING job, decided on the locked row),
what goes with the row and what stays (its audit trail), the REST route's roles and problems,
and the races and odd inputs an operator's tools meet."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any
from uuid import uuid4

import psycopg
import pytest

from tickwork import App, JobNotFoundError, JobState, JobStateError
from tickwork.auth import Role
from tickwork.errors import InvalidInput
from tickwork.queue import admin

from .api_support import Api, email, problem, start_api
from .test_lock_order import Blocked, waiting_for_a_lock

QUEUE = "delete-tests"
TASK = "tests.delete.echo"


@pytest.fixture
async def api(app: App) -> AsyncIterator[Api]:
    @app.task(name=TASK, queue=QUEUE)
    def echo(word: str = "hi") -> str:
        if word == "fail":
            raise RuntimeError("asked to fail")
        return word

    async for found in start_api(app):
        yield found


async def enqueue(api: Api, **body: Any) -> dict[str, Any]:
    made = await api.client.post(
        "/api/jobs", json={"task": TASK, **body}, headers=api.headers(Role.OPERATOR)
    )
    assert made.status_code == 201, made.text
    job: dict[str, Any] = made.json()
    return job


async def test_an_operator_deletes_a_finished_job_and_the_audit_trail_keeps_who(
    api: Api, sql: psycopg.Connection[Any]
) -> None:
    operator, viewer = api.headers(Role.OPERATOR), api.headers(Role.VIEWER)
    job = await enqueue(api, args={"word": "yo"})
    assert (await api.app.worker(queues=[QUEUE]).run_once()).claimed == 1
    stats = {
        q.name: q for q in await admin.queue_stats(await api.app.db.async_pool(), api.app.db.store)
    }
    assert stats[QUEUE].succeeded == 1

    deleted = await api.client.delete(f"/api/jobs/{job['id']}", headers=operator)
    assert deleted.status_code == 204 and deleted.content == b""

    # the row and its attempts are gone; the tallies no longer count it
    assert sql.execute("SELECT count(*) FROM jobs WHERE id = %s", [job["id"]]).fetchone() == (0,)
    assert sql.execute(
        "SELECT count(*) FROM executions WHERE job_id = %s", [job["id"]]
    ).fetchone() == (0,)
    stats = {
        q.name: q for q in await admin.queue_stats(await api.app.db.async_pool(), api.app.db.store)
    }
    assert QUEUE not in stats or stats[QUEUE].succeeded == 0

    # its routes answer 404 naming who deleted it; the audit trail keeps the event
    who = f"user:{email(Role.OPERATOR)}"
    for path in (f"/api/jobs/{job['id']}", f"/api/jobs/{job['id']}/timeline"):
        gone = problem(await api.client.get(path, headers=viewer), 404)
        assert f"{who} deleted it at" in gone["detail"], gone
    trail = await api.client.get(
        "/api/audit", params={"target_type": "job", "target_id": str(job["id"])}, headers=operator
    )
    events = {e["event_type"]: e for e in trail.json()["items"]}
    assert set(events) == {"job.enqueued", "job.deleted"}
    event = events["job.deleted"]
    assert event["actor"] == who
    assert event["metadata"]["from"] == "SUCCEEDED" and event["metadata"]["task"] == TASK
    assert event["metadata"]["queue"] == QUEUE and event["metadata"]["executions"] == 1
    assert [e.event_type for e in api.app.audit_events(job["id"])] == [
        "job.enqueued",
        "job.deleted",
    ]

    # deleting twice: the second finds nothing
    again = problem(await api.client.delete(f"/api/jobs/{job['id']}", headers=operator), 404)
    assert f"job {job['id']} does not exist" in again["detail"]
    assert len(api.app.audit_events(job["id"])) == 2  # no second event


async def test_every_state_but_running_may_be_deleted(
    api: Api, sql: psycopg.Connection[Any]
) -> None:
    operator = api.headers(Role.OPERATOR)
    made = {state: (await enqueue(api))["id"] for state in JobState}
    for state, job_id in made.items():
        sql.execute("UPDATE jobs SET state = %s WHERE id = %s", [state.value, job_id])
    for state, job_id in made.items():
        answer = await api.client.delete(f"/api/jobs/{job_id}", headers=operator)
        if state is JobState.RUNNING:
            refused = problem(answer, 409)
            assert "RUNNING" in refused["detail"] and "delete" in refused["detail"], refused
        else:
            assert answer.status_code == 204, (state, answer.text)
    left = sql.execute("SELECT id FROM jobs").fetchall()
    assert left == [(made[JobState.RUNNING],)]


async def test_a_running_job_is_refused_and_kept_whole(api: Api) -> None:
    job = await enqueue(api)
    async with api.app.worker(queues=[QUEUE]) as worker:
        claimed = await worker._claim(1)
    assert [j.id for j, _, _ in claimed] == [job["id"]]
    answer = await api.client.delete(f"/api/jobs/{job['id']}", headers=api.headers(Role.OPERATOR))
    assert "state RUNNING" in problem(answer, 409)["detail"]
    assert api.app.get_job(job["id"]).state is JobState.RUNNING
    assert len(api.app.list_executions(job["id"])) == 1
    with pytest.raises(JobStateError) as refused:  # the Python API answers alike
        api.app.delete_job(job["id"], actor="test")
    assert refused.value.state == "RUNNING" and refused.value.operation == "delete"
    assert "job.deleted" not in [e.event_type for e in api.app.audit_events(job["id"])]


async def test_only_operators_and_admins_delete(api: Api) -> None:
    job = await enqueue(api)
    path = f"/api/jobs/{job['id']}"
    problem(await api.client.delete(path), 401)
    problem(await api.client.delete(path, headers={"Authorization": "Bearer nonsense"}), 401)
    problem(await api.client.delete(path, headers=api.headers(Role.VIEWER)), 403)

    # a disabled operator's session and personal API token stop working at once
    operator = api.headers(Role.OPERATOR)
    minted = await api.client.post(
        "/api/me/tokens", json={"name": "cli", "role": "OPERATOR"}, headers=operator
    )
    assert minted.status_code == 201, minted.text
    personal = {"Authorization": f"Bearer {minted.json()['token']}"}
    me = (await api.client.get("/api/me", headers=operator)).json()
    await api.auth.disable(me["id"], "user:admin@example.com")
    problem(await api.client.delete(path, headers=operator), 401)
    problem(await api.client.delete(path, headers=personal), 401)
    assert api.app.get_job(job["id"]).state is JobState.PENDING

    deleted = await api.client.delete(path, headers=api.headers(Role.ADMIN))
    assert deleted.status_code == 204
    [event] = [e for e in api.app.audit_events(job["id"]) if e.event_type == "job.deleted"]
    assert event.actor == f"user:{email(Role.ADMIN)}"


@pytest.mark.parametrize(
    ("job_id", "why"),
    [
        ("abc", "int"),
        ("1.5", "int"),
        ("0", "greater than or equal to 1"),
        ("-3", "greater than or equal to 1"),
        (str(2**63), "less than or equal to"),
    ],
)
async def test_an_id_that_is_no_job_id_is_refused_naming_the_field(
    api: Api, job_id: str, why: str
) -> None:
    answer = await api.client.delete(f"/api/jobs/{job_id}", headers=api.headers(Role.OPERATOR))
    refused = problem(answer, 400)
    assert refused["field"] == "job_id", refused
    assert why in refused["detail"], refused


async def test_the_largest_id_is_simply_not_found(api: Api) -> None:
    answer = await api.client.delete(f"/api/jobs/{2**63 - 1}", headers=api.headers(Role.OPERATOR))
    problem(answer, 404)


async def test_the_domain_operation_checks_the_id_itself(app: App) -> None:
    pool = await app.db.async_pool()
    for bad in (0, -1, 2**63, True):
        with pytest.raises(InvalidInput) as refused:
            await admin.delete_job(pool, app.db.store, bad, "test")
        assert refused.value.field == "job_id"
    with pytest.raises(JobNotFoundError):
        await admin.delete_job(pool, app.db.store, 2**63 - 1, "test")


async def test_a_claim_that_commits_first_wins_the_race(app: App, database_url: str) -> None:
    """The delete waits for the claim's row lock and then decides on the row as the claim
    left it: RUNNING, so it is refused. No Python read decides."""

    @app.task(queue=QUEUE)
    def work() -> None:
        return None

    job = work.defer()
    answer: dict[str, Any] = {}

    async def delete(conn: psycopg.AsyncConnection[Any]) -> None:
        answer["row"] = await app.db.store.job_delete(conn, job_id=job.id, actor="test")

    claimer = await app.db.connect_async()
    async with claimer:
        async with claimer.transaction():
            claimed = await app.db.store.job_claim(
                claimer,
                queues=[QUEUE],
                tasks=[work.name],
                limit=1,
                worker_id=uuid4(),
                lease_ttl=30.0,
            )
            assert [row[0] for row in claimed] == [job.id]
            # the claim is not committed: the delete read PENDING before it and must wait
            deleter = Blocked(database_url, delete)
            await asyncio.to_thread(waiting_for_a_lock, database_url, deleter.pid)
        deleter.join()
    assert deleter.error is None, deleter.error
    assert answer["row"]["state"] == "RUNNING" and answer["row"]["deleted"] is False
    assert app.get_job(job.id).state is JobState.RUNNING
    assert len(app.list_executions(job.id)) == 1


async def test_a_delete_that_commits_first_wins_the_race(app: App) -> None:
    """A claim meeting the delete's lock skips the row (SKIP LOCKED) and finds it gone."""

    @app.task(queue=QUEUE)
    def work() -> None:
        return None

    job = work.defer()
    deleter = await app.db.connect_async()
    async with deleter, deleter.transaction():
        row = await app.db.store.job_delete(deleter, job_id=job.id, actor="test")
        assert row is not None and row["deleted"] is True
        async with app.worker(queues=[QUEUE]) as worker:
            assert await worker._claim(1) == []  # locked: skipped, not waited for
    async with app.worker(queues=[QUEUE]) as worker:
        assert await worker._claim(1) == []  # gone
    with pytest.raises(JobNotFoundError) as gone:
        app.get_job(job.id)
    assert gone.value.deleted_by == "test"


async def test_two_deletes_at_once_delete_once(app: App, database_url: str) -> None:
    @app.task(queue=QUEUE)
    def work() -> None:
        return None

    job = work.defer()
    answer: dict[str, Any] = {}

    async def delete(conn: psycopg.AsyncConnection[Any]) -> None:
        answer["row"] = await app.db.store.job_delete(conn, job_id=job.id, actor="second")

    first = await app.db.connect_async()
    async with first:
        async with first.transaction():
            assert (await app.db.store.job_delete(first, job_id=job.id, actor="first"))["deleted"]
            second = Blocked(database_url, delete)
            await asyncio.to_thread(waiting_for_a_lock, database_url, second.pid)
        second.join()
    assert second.error is None, second.error
    assert answer["row"] is None  # the row it waited for was gone: not found
    assert [(e.event_type, e.actor) for e in app.audit_events(job.id)] == [("job.deleted", "first")]


async def test_a_waiter_on_a_deleted_job_is_told_it_is_gone(app: App) -> None:
    @app.task(queue=QUEUE)
    def work() -> None:
        return None

    job = work.defer()
    waiting = asyncio.create_task(app.wait_async(job, timeout=60.0))
    app.delete_job(job.id, actor="test")
    with pytest.raises(JobNotFoundError):
        await waiting


async def test_a_scheduled_jobs_deletion_leaves_its_schedule_and_frees_its_key(
    api: Api, sql: psycopg.Connection[Any]
) -> None:
    admin_, operator = api.headers(Role.ADMIN), api.headers(Role.OPERATOR)
    made = await api.client.post(
        "/api/schedules",
        json={"name": "nightly", "task": TASK, "cron": "0 3 * * *"},
        headers=admin_,
    )
    assert made.status_code == 201, made.text
    fired = await api.client.post("/api/schedules/nightly/trigger", headers=operator)
    assert fired.status_code in (200, 201), fired.text
    job = fired.json()
    assert job["schedule_id"] is not None

    assert (await api.client.delete(f"/api/jobs/{job['id']}", headers=operator)).status_code == 204
    schedule = await api.client.get("/api/schedules/nightly", headers=operator)
    assert schedule.status_code == 200 and schedule.json()["name"] == "nightly"
    listed = await api.client.get("/api/jobs", params={"schedule": "nightly"}, headers=operator)
    assert listed.json()["items"] == []
    [event] = [e for e in api.app.audit_events(job["id"]) if e.event_type == "job.deleted"]
    assert event.metadata["schedule_id"] == job["schedule_id"]
    # the schedule's own trail is untouched
    assert sql.execute(
        "SELECT count(*) FROM audit_events WHERE target_type = 'schedule'"
        " AND event_type = 'schedule.triggered'"
    ).fetchone() == (1,)

    # a pending job holding a unique key: once deleted, the key is free for a new job
    keyed = await enqueue(api, unique_key="only-one")
    duplicate = await api.client.post(
        "/api/jobs", json={"task": TASK, "unique_key": "only-one"}, headers=operator
    )
    assert duplicate.status_code == 200 and duplicate.json()["id"] == keyed["id"]
    assert (
        await api.client.delete(f"/api/jobs/{keyed['id']}", headers=operator)
    ).status_code == 204
    fresh = await enqueue(api, unique_key="only-one")
    assert fresh["id"] != keyed["id"]


async def test_a_failed_job_awaiting_retry_is_deleted_with_its_attempts(api: Api) -> None:
    job = await enqueue(api, args={"word": "fail"}, max_attempts=3)
    assert (await api.app.worker(queues=[QUEUE]).run_once()).claimed == 1
    assert api.app.get_job(job["id"]).state is JobState.FAILED
    deleted = api.app.delete_job(job["id"], actor="cli:ops")
    assert deleted.state is JobState.FAILED and deleted.executions == 1
    with pytest.raises(JobNotFoundError) as gone:
        api.app.get_job(job["id"])
    assert gone.value.deleted_by == "cli:ops" and "cli:ops deleted it at" in str(gone.value)
