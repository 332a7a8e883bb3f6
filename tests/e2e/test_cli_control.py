"""The operator commands as an operator runs them, straight on the database (no HTTP):
users, jobs and queues."""

from __future__ import annotations

import asyncio
import json
import subprocess
from typing import Any

import pytest

from tickwork import App
from tickwork.auth import AuthService, Role
from tickwork.cli import cli_actor
from tickwork.errors import AuthError
from tickwork.ops.audit import AuditFilter, list_events
from tickwork.types import AuditEvent, JobState

from .support import tickwork

pytestmark = pytest.mark.e2e

PASSWORD_LINE = "password (shown once; store it now): "


async def run(
    env: dict[str, str], *args: str, stdin: str | None = None
) -> subprocess.CompletedProcess[str]:
    """``tickwork`` from an async test without blocking its event loop."""
    return await asyncio.to_thread(tickwork, env, *args, stdin=stdin)


def as_json(done: subprocess.CompletedProcess[str]) -> Any:
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def failed(done: subprocess.CompletedProcess[str]) -> str:
    """The one-line error of a command that exited with code 2."""
    assert done.returncode == 2, (done.stdout, done.stderr)
    assert done.stderr.startswith("error: ") and done.stderr.count("\n") == 1, done.stderr
    return done.stderr


async def audit(app: App, target_type: str) -> list[AuditEvent]:
    pool = await app.db.async_pool()
    where = AuditFilter(target_type=target_type)
    return (await list_events(pool, app.db.store, where, limit=500)).items


async def login(app: App, email: str, password: str) -> Role:
    auth = AuthService(await app.db.async_pool(), app.db.store, app.settings.auth)
    await auth.start()
    return (await auth.login(email, password, "127.0.0.1")).user.role


@pytest.fixture
async def app(app: App) -> App:
    """The test app (tables emptied by ``clean``) with a task on queue ``cli-q`` and one that
    always fails."""

    @app.task(name="cli.noop", queue="cli-q")
    def noop() -> None:
        return None

    @app.task(name="cli.fail", queue="cli-q", max_attempts=1)
    def fail() -> None:
        raise RuntimeError("boom")

    return app


async def test_users_create_set_role_and_disable(db_env: dict[str, str], app: App) -> None:
    created = await run(db_env, "users", "create", "Ops@Example.com", "--role", "operator")
    assert created.returncode == 0, created.stderr
    [password] = [
        line.removeprefix(PASSWORD_LINE)
        for line in created.stdout.splitlines()
        if line.startswith(PASSWORD_LINE)
    ]
    assert created.stdout.count(password) == 1 and password not in created.stderr
    assert await login(app, "ops@example.com", password) is Role.OPERATOR

    chosen = "chosen-password-42"
    viewer_args = ("users", "create", "viewer@example.com", "--role", "VIEWER", "--name", "Vi")
    typed = await run(db_env, *viewer_args, "--password-stdin", stdin=chosen + "\n")
    assert typed.returncode == 0, typed.stderr
    assert PASSWORD_LINE not in typed.stdout and chosen not in typed.stdout
    assert await login(app, "viewer@example.com", chosen) is Role.VIEWER

    listed = as_json(await run(db_env, "users", "list", "--json"))
    by_email = {u["email"]: u for u in listed}
    assert by_email["Ops@Example.com"]["role"] == "OPERATOR"
    viewer = by_email["viewer@example.com"]
    assert (viewer["role"], viewer["name"], viewer["disabled"]) == ("VIEWER", "Vi", False)

    promoted = await run(db_env, "users", "set-role", "OPS@example.com", "admin")
    assert promoted.returncode == 0, promoted.stderr
    viewer_id = str(viewer["id"])
    disabled = await run(db_env, "users", "disable", viewer_id)
    assert disabled.returncode == 0, disabled.stderr
    listed = as_json(await run(db_env, "users", "list", "--json"))
    assert {u["email"]: (u["role"], u["disabled"]) for u in listed} == {
        "Ops@Example.com": ("ADMIN", False),
        "viewer@example.com": ("VIEWER", True),
    }
    with pytest.raises(AuthError):
        await login(app, "viewer@example.com", chosen)
    enabled = await run(db_env, "users", "disable", "viewer@example.com", "--enable")
    assert enabled.returncode == 0, enabled.stderr
    assert await login(app, "viewer@example.com", chosen) is Role.VIEWER

    changes = {"user.created", "user.role_changed", "user.disabled", "user.enabled"}
    by_cli = {e.event_type for e in await audit(app, "user") if e.actor == cli_actor()}
    assert by_cli == changes  # logins are audited too, under the user's own name

    bad_role = failed(await run(db_env, "users", "set-role", viewer_id, "SUPERUSER"))
    assert "role ('SUPERUSER') must be one of VIEWER, OPERATOR, ADMIN" in bad_role
    nobody = failed(await run(db_env, "users", "disable", "nobody@example.com"))
    assert "user 'nobody@example.com' does not exist" in nobody
    taken = failed(await run(db_env, "users", "create", "ops@EXAMPLE.com", "--role", "VIEWER"))
    assert "already exists" in taken and PASSWORD_LINE not in taken


async def test_jobs_list_show_retry_cancel(db_env: dict[str, str], app: App) -> None:
    done = await app.enqueue_async("cli.noop")
    dead = await app.enqueue_async("cli.fail")
    async with app.worker(queues=["cli-q"]) as worker:
        assert (await worker.run_once()).claimed == 2
    pending = await app.enqueue_async("cli.noop")

    page = as_json(await run(db_env, "jobs", "list", "--state", "pending,dead_letter", "--json"))
    assert [(j["id"], j["state"]) for j in page["items"]] == [
        (pending.id, "PENDING"),
        (dead.id, "DEAD_LETTER"),
    ]
    repeated = await run(db_env, "jobs", "list", "-s", "SUCCEEDED", "-s", "PENDING", "--json")
    assert [j["id"] for j in as_json(repeated)["items"]] == [pending.id, done.id]
    first = as_json(await run(db_env, "jobs", "list", "--queue", "cli-q", "--limit", "1", "--json"))
    assert [j["id"] for j in first["items"]] == [pending.id]
    rest = await run(db_env, "jobs", "list", "--before-id", str(first["next_cursor"]), "--json")
    assert [j["id"] for j in as_json(rest)["items"]] == [dead.id, done.id]
    by_task = await run(db_env, "jobs", "list", "--task", "cli.fail", "--json")
    assert [j["id"] for j in as_json(by_task)["items"]] == [dead.id]
    table = await run(db_env, "jobs", "list")
    assert table.returncode == 0, table.stderr
    assert "DEAD_LETTER" in table.stdout and "cli.fail" in table.stdout

    unknown_state = failed(await run(db_env, "jobs", "list", "--state", "pending,sleeping"))
    assert "state ('sleeping') is not a job state" in unknown_state

    shown = as_json(await run(db_env, "jobs", "show", str(dead.id), "--json"))
    assert shown["state"] == "DEAD_LETTER" and shown["error"]["message"] == "boom"
    [attempt] = shown["executions"]
    assert attempt["state"] == "FAILED" and attempt["error"]["type"] == "RuntimeError"
    assert attempt["worker_id"] == str(worker.id)
    assert attempt["lease_expires_at"] and attempt["finished_at"]
    assert [t["event"] for t in shown["timeline"]] == [
        "job.created", "attempt.claimed", "attempt.failed", "job.dead_lettered",
    ]  # fmt: skip
    readable = await run(db_env, "jobs", "show", str(dead.id))
    assert readable.returncode == 0, readable.stderr
    assert str(worker.id) in readable.stdout and "RuntimeError: boom" in readable.stdout
    assert "timeline" in readable.stdout and "job.dead_lettered" in readable.stdout
    missing = failed(await run(db_env, "jobs", "show", "999999"))
    assert "job 999999 does not exist" in missing

    not_retryable = failed(await run(db_env, "jobs", "retry", str(pending.id)))
    assert f"cannot retry job {pending.id} in state PENDING" in not_retryable
    retried = await run(db_env, "jobs", "retry", str(dead.id))
    assert retried.returncode == 0, retried.stderr
    assert (await app.get_job_async(dead.id)).state is JobState.PENDING
    cancelled = await run(db_env, "jobs", "cancel", str(pending.id))
    assert cancelled.returncode == 0, cancelled.stderr
    assert f"job {pending.id} is CANCELLED" in cancelled.stdout
    assert (await app.get_job_async(pending.id)).state is JobState.CANCELLED
    again = failed(await run(db_env, "jobs", "cancel", str(pending.id)))
    assert f"cannot cancel job {pending.id} in state CANCELLED" in again
    actors = {e.event_type: e.actor for e in await audit(app, "job")}
    assert actors["job.retried"] == actors["job.cancelled"] == cli_actor()


async def test_paused_queue_is_not_claimed_until_resumed(db_env: dict[str, str], app: App) -> None:
    job = await app.enqueue_async("cli.noop")
    paused = await run(db_env, "queues", "pause", "cli-q")
    assert paused.returncode == 0, paused.stderr
    [queue] = as_json(await run(db_env, "queues", "list", "--json"))
    assert (queue["name"], queue["paused"], queue["pending"]) == ("cli-q", True, 1)
    table = await run(db_env, "queues", "list")
    assert "cli-q" in table.stdout and "paused" in table.stdout

    async with app.worker(queues=["cli-q"]) as worker:
        assert (await worker.run_once()).claimed == 0
        resumed = await run(db_env, "queues", "resume", "cli-q")
        assert resumed.returncode == 0, resumed.stderr
        assert (await worker.run_once()).claimed == 1
    assert (await app.get_job_async(job.id)).state is JobState.SUCCEEDED
    [queue] = as_json(await run(db_env, "queues", "list", "--json"))
    assert (queue["paused"], queue["succeeded"]) == (False, 1)
    assert {e.actor for e in await audit(app, "queue")} == {cli_actor()}

    bad_name = failed(await run(db_env, "queues", "pause", "no spaces"))
    assert "queue ('no spaces')" in bad_name


async def test_jobs_delete_asks_first_refuses_a_running_job_and_is_audited(
    db_env: dict[str, str], app: App
) -> None:
    done = await app.enqueue_async("cli.noop")
    async with app.worker(queues=["cli-q"]) as worker:
        assert (await worker.run_once()).claimed == 1
    pending = await app.enqueue_async("cli.noop")

    kept = await run(db_env, "jobs", "delete", str(done.id), stdin="n\n")
    assert kept.returncode == 1 and "Aborted" in kept.stderr, (kept.stdout, kept.stderr)
    assert f"Delete job {done.id} (SUCCEEDED, task cli.noop, queue cli-q)" in kept.stdout
    assert (await app.get_job_async(done.id)).state is JobState.SUCCEEDED
    unanswered = await run(db_env, "jobs", "delete", str(done.id), stdin="")  # nobody to ask
    assert unanswered.returncode == 1, (unanswered.stdout, unanswered.stderr)
    assert (await app.get_job_async(done.id)).state is JobState.SUCCEEDED

    confirmed = await run(db_env, "jobs", "delete", str(done.id), stdin="y\n")
    assert confirmed.returncode == 0, confirmed.stderr
    assert f"deleted job {done.id} (it was SUCCEEDED)" in confirmed.stdout
    gone = failed(await run(db_env, "jobs", "show", str(done.id)))
    assert f"job {done.id} does not exist: {cli_actor()} deleted it at" in gone
    again = failed(await run(db_env, "jobs", "delete", str(done.id), "--yes"))
    assert f"job {done.id} does not exist" in again

    async with app.worker(queues=["cli-q"]) as worker:
        assert [j.id for j, _, _ in await worker._claim(1)] == [pending.id]
    running = failed(await run(db_env, "jobs", "delete", str(pending.id), "--yes"))
    assert f"cannot delete job {pending.id} in state RUNNING" in running
    out_of_range = failed(await run(db_env, "jobs", "delete", str(2**63), "--yes"))
    assert "job_id (9223372036854775808) must be a whole number" in out_of_range
    not_a_number = await run(db_env, "jobs", "delete", "seven", "--yes")
    assert not_a_number.returncode == 2, not_a_number.stderr
    assert "Invalid value for 'ID'" in not_a_number.stderr

    deleted = [e for e in await audit(app, "job") if e.event_type == "job.deleted"]
    assert [(e.target_id, e.actor, e.metadata["from"]) for e in deleted] == [
        (str(done.id), cli_actor(), "SUCCEEDED")
    ]
