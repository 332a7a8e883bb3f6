"""A retry of a definition's run runs the definition as it is now; a run of a deleted
definition is never retried (the red team: an OPERATOR retried a dead-lettered run of a
definition an ADMIN had edited and then deleted, and the old source ran). Through the
library (the CLI's App.retry), the API's single and bulk retry, with real script runs."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import psycopg
import pytest

from tickwork import App
from tickwork.auth import Role
from tickwork.definitions import admin
from tickwork.errors import RerunRefused
from tickwork.runtimes.available import runtime_of
from tickwork.types import JobState

from .api_support import Api, problem, start_api

WAIT_GUARD = 60.0  # not a timing assertion: only stops a broken test from hanging


@pytest.fixture
async def runner(app: App) -> AsyncIterator[App]:
    yield app


@pytest.fixture
async def api(runner: App) -> AsyncIterator[Api]:
    async for started in start_api(runner):
        yield started


async def dead_run(app: App, source: str, language: str = "bash") -> tuple[int, int]:
    """A definition whose one run dead-lettered (one attempt); its id and the job's."""
    pool = await app.db.async_pool()
    given = {
        "name": f"nightly-{abs(hash(source))}",
        "kind": "script",
        "script": {"language": language, "source": source},
        "retry": {"max_attempts": 1},
    }
    definition = (await admin.create(pool, app.db.store, given, actor="admin")).id
    job_id = await admin.run_now(pool, app.db.store, definition, actor="admin")
    await work(app, job_id)
    assert (await app.get_job_async(job_id)).state is JobState.DEAD_LETTER
    return definition, job_id


async def work(app: App, job_id: int) -> None:
    """One claim by the runtime of the job's queue (it must take this job)."""
    job = await app.get_job_async(job_id)
    async with app.worker(runtime=runtime_of(job.queue), concurrency=1) as worker:
        assert len((await worker.run_once()).outcomes) == 1


async def edit_source(app: App, definition: int, source: str, language: str = "bash") -> None:
    pool = await app.db.async_pool()
    change = {"script": {"language": language, "source": source}}
    await admin.edit(pool, app.db.store, definition, change, actor="admin")


async def test_a_retry_after_an_edit_runs_the_edit(api: Api, sql: psycopg.Connection[Any]) -> None:
    app = api.app
    definition, job_id = await dead_run(app, "echo old >&2; exit 3")
    await edit_source(app, definition, "echo new")
    retried = await api.client.post(f"/api/jobs/{job_id}/retry", headers=api.headers(Role.OPERATOR))
    assert retried.status_code == 200, retried.text
    job = await app.get_job_async(job_id)
    assert job.args["spec"]["source"] == "echo new" and job.args["definition"]["version"] == 2
    assert job.args["trigger"]["via"] == "operator"  # what made the run stays
    await work(app, job_id)
    done = await app.get_job_async(job_id)
    assert done.state is JobState.SUCCEEDED and done.result["stdout"] == "new\n"
    [(metadata,)] = sql.execute(
        "SELECT metadata FROM audit_events WHERE event_type = 'job.retried'"
    ).fetchall()
    assert metadata["definition_version"] == 2 and metadata["snapshot_version"] == 1


async def test_a_retry_of_a_deleted_definitions_run_is_refused_everywhere(api: Api) -> None:
    app = api.app
    definition, job_id = await dead_run(app, "echo removed; exit 3")
    await edit_source(app, definition, "echo replaced; exit 3")
    pool = await app.db.async_pool()
    await admin.delete(pool, app.db.store, definition, actor="admin")
    operator, administrator = api.headers(Role.OPERATOR), api.headers(Role.ADMIN)
    for who in (operator, administrator):
        refused = await api.client.post(f"/api/jobs/{job_id}/retry", headers=who)
        assert f"definition {definition}, which was deleted" in problem(refused, 409)["detail"]
    with pytest.raises(RerunRefused):  # the library, as `tickwork jobs retry` calls it
        await asyncio.to_thread(app.retry, job_id, actor="cli:root")
    bulk = await api.client.post(
        "/api/jobs/bulk/retry", json={"task": "tickwork.script"}, headers=operator
    )
    assert bulk.json() == {"matched": 1, "changed": [], "refused": [job_id]}
    assert (await app.get_job_async(job_id)).state is JobState.DEAD_LETTER
    async with app.worker(runtime="bash") as worker:
        assert (await worker.run_once()).outcomes == []


async def test_a_bulk_retry_reruns_the_current_version_of_each(api: Api) -> None:
    app = api.app
    edited, first = await dead_run(app, "exit 3")
    kept, second = await dead_run(app, "echo $((40 + 2)); exit 3")
    deleted, third = await dead_run(app, "echo gone; exit 3")
    await edit_source(app, edited, "print('from python')", language="python")
    pool = await app.db.async_pool()
    await admin.delete(pool, app.db.store, deleted, actor="admin")
    bulk = await api.client.post(
        "/api/jobs/bulk/retry", json={"state": ["DEAD_LETTER"]}, headers=api.headers(Role.ADMIN)
    )
    assert bulk.json() == {"matched": 3, "changed": [first, second], "refused": [third]}
    moved = await app.get_job_async(first)  # a language changed: the run moves with it
    assert moved.queue == "scripts-python" and moved.args["spec"]["language"] == "python"
    await work(app, first)
    assert (await app.get_job_async(first)).result["stdout"] == "from python\n"
    same = await app.get_job_async(second)
    assert same.queue == "scripts-bash" and same.args["definition"]["version"] == 1
    assert kept


async def test_a_run_naming_no_definition_is_not_retried(runner: App) -> None:
    job = await runner.enqueue_async(  # as only code (or the database) could make it
        "tickwork.script",
        {
            "definition": {"id": "1 OR true", "name": "x", "version": 1, "kind": "script"},
            "spec": {"language": "bash", "source": "exit 3", "variables": []},
            "policy": {"exec_timeout": 10, "retry": {"max_attempts": 1}, "loop": None},
        },
        queue="scripts-bash",
        max_attempts=1,
    )
    await work(runner, job.id)
    with pytest.raises(RerunRefused, match="a definition its arguments do not name"):
        await asyncio.to_thread(runner.retry, job.id)


@pytest.mark.parametrize("change", ["edit", "delete"])
async def test_a_retry_waits_for_an_edit_or_delete_in_flight_and_sees_it(
    runner: App, database_url: str, schema: str, change: str
) -> None:
    """The definitions are read under a lock: a change that has not committed yet makes the
    retry wait, and the retry then runs (or refuses) what committed."""
    definition, job_id = await dead_run(runner, "echo before; exit 3")
    with psycopg.connect(database_url) as admin_tx:  # an ADMIN's change, left open
        admin_tx.execute(f"SET search_path TO {schema}")
        if change == "edit":
            admin_tx.execute(
                "UPDATE definitions SET spec = jsonb_set(spec, '{source}', '\"echo after\"'),"
                " version = version + 1 WHERE id = %s",
                [definition],
            )
        else:
            admin_tx.execute("DELETE FROM definitions WHERE id = %s", [definition])
        retry = asyncio.create_task(asyncio.to_thread(runner.retry, job_id, actor="ops"))
        await waiting_for_a_lock(database_url, retry)
        admin_tx.commit()
    if change == "delete":
        with pytest.raises(RerunRefused):
            await asyncio.wait_for(retry, WAIT_GUARD)
        return
    job = await asyncio.wait_for(retry, WAIT_GUARD)
    assert job.args["spec"]["source"] == "echo after" and job.args["definition"]["version"] == 2


async def waiting_for_a_lock(database_url: str, task: asyncio.Task[Any]) -> None:
    """Until a session of the database waits for a row lock (the task's)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + WAIT_GUARD
    with psycopg.connect(database_url, autocommit=True) as look:
        while loop.time() < deadline:
            assert not task.done(), task
            [(waiting,)] = look.execute(
                "SELECT count(*) FROM pg_locks WHERE NOT granted AND locktype = 'transactionid'"
            ).fetchall()
            if waiting:
                return
            await asyncio.sleep(0.01)  # the task runs meanwhile
    raise AssertionError("the retry never waited for the change's row lock")
