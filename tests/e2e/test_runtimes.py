"""Runtimes as operators run them: ``tickwork worker --runtime NAME`` processes and the
``tickwork definitions`` commands; a runtime worker killed with SIGKILL mid-script leaves no
process behind past the run's exec_timeout, and its run is reclaimed and run again. Only a
runtime's executor claims its queue: a plain worker naming one is refused, a process without
an interpreter never claims its runs, and ``serve`` runs each runtime at its own concurrency."""

from __future__ import annotations

import asyncio
import json
import os
import signal
from pathlib import Path
from typing import Any

import httpx
import psycopg
import pytest

from tickwork import App
from tickwork.definitions import admin

from ..processes import marked
from . import queues_app
from .support import serving, spawner, tickwork, wait_for

pytestmark = pytest.mark.e2e

E2E_DIR = Path(__file__).parent

FAST_LEASES = {
    "TICKWORK_WORKER__LEASE_TTL": "2",
    "TICKWORK_WORKER__LEASE_RENEW_INTERVAL": "0.5",
    "TICKWORK_WORKER__WATCHDOG_INTERVAL": "0.5",
    "TICKWORK_WORKER__POLL_INTERVAL": "0.2",
}


def test_a_runtime_worker_refuses_to_start_without_its_interpreter(
    db_env: dict[str, str],
) -> None:
    missing = tickwork(
        db_env | {"TICKWORK_RUNTIMES__SCRIPTS__GROOVY": "/nowhere/groovy"},
        "worker",
        "--runtime",
        "groovy",
    )
    assert missing.returncode == 2, missing.stderr
    assert "groovy" in missing.stderr and "install" in missing.stderr, missing.stderr
    unknown = tickwork(db_env, "worker", "--runtime", "cobol")
    assert unknown.returncode == 2 and "http, bash, python, node, groovy" in unknown.stderr
    both = tickwork(db_env, "worker", "--runtime", "bash", "--queues", "default")
    assert both.returncode == 2 and "--queues" in both.stderr


def test_definitions_commands_store_change_and_run(
    db_env: dict[str, str], clean: None, tmp_path: Path
) -> None:
    given = tmp_path / "ping.json"
    given.write_text(
        json.dumps({"name": "ping", "kind": "http", "http": {"url": "https://example.com/"}})
    )
    created = tickwork(db_env, "definitions", "create", str(given))
    assert created.returncode == 0, created.stderr
    assert "runs on queue http" in created.stdout
    change = tmp_path / "change.json"
    change.write_text(json.dumps({"cron": "0 3 * * *", "description": "nightly"}))
    edited = tickwork(db_env, "definitions", "edit", "ping", str(change))
    assert edited.returncode == 0 and "now version 2" in edited.stdout, edited.stderr
    listed = tickwork(db_env, "definitions", "list", "--json")
    [one] = json.loads(listed.stdout)
    assert (one["name"], one["cron"], one["version"]) == ("ping", "0 3 * * *", 2)
    assert tickwork(db_env, "definitions", "pause", "ping").returncode == 0
    shown = json.loads(tickwork(db_env, "definitions", "show", str(one["id"])).stdout)
    assert shown["enabled"] is False
    ran = tickwork(db_env, "definitions", "run", "ping")
    assert ran.returncode == 0 and "enqueued job" in ran.stdout, ran.stderr
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"name": "x", "kind": "http", "http": {"url": "ftp://x/"}}))
    refused = tickwork(db_env, "definitions", "create", str(bad))
    assert refused.returncode == 2 and "http.url" in refused.stderr, refused.stderr
    asked = tickwork(db_env, "definitions", "delete", "ping")  # no answer: nothing deleted
    assert asked.returncode == 1 and "Delete definition ping (http)" in asked.stdout, asked
    assert tickwork(db_env, "definitions", "show", "ping").returncode == 0
    assert tickwork(db_env, "definitions", "delete", "ping", "--yes").returncode == 0
    gone = tickwork(db_env, "definitions", "show", "ping")
    assert gone.returncode == 2 and "does not exist" in gone.stderr, gone.stderr


def test_a_killed_runtime_workers_script_ends_at_its_timeout_and_the_run_is_reclaimed(
    db_env: dict[str, str], clean: None, tmp_path: Path, shared_dir: Path
) -> None:
    # the first attempt starts a long sleep (one that left its session too) and waits on
    # it; a later one succeeds at once
    marker = f"tickwork-orphan-{os.getpid()}-{shared_dir.name}"
    source = (
        f"if [ -e {shared_dir}/first ]; then echo again; exit 0; fi\n"
        f"touch {shared_dir}/first\n"
        f"setsid -f sh -c 'sleep 300; : {marker}'\n"
        f"(exec -a {marker} sleep 300) & touch {shared_dir}/sleep\n"
        "wait\n"
    )
    given = tmp_path / "long.json"
    given.write_text(
        json.dumps(
            {
                "name": "long",
                "kind": "script",
                "script": {"language": "bash", "source": source},
                "exec_timeout": 3,
            }
        )
    )
    assert tickwork(db_env, "definitions", "create", str(given)).returncode == 0
    url, schema = db_env["TICKWORK_DATABASE_URL"], db_env["TICKWORK_SCHEMA"]
    with spawner(db_env | FAST_LEASES, tmp_path, "worker", "--runtime", "bash") as spawn:
        first = spawn("first")
        ran = tickwork(db_env, "definitions", "run", "long")
        assert ran.returncode == 0, ran.stderr
        job_id = int(ran.stdout.split()[2])
        pid_file = shared_dir / "sleep"
        wait_for(pid_file.exists, "the script started its sleep")
        assert marked(marker)
        first.send_signal(signal.SIGKILL)
        first.wait()
        # nothing the dead worker started outlives the run's exec_timeout
        wait_for(lambda: not marked(marker), "the orphaned script's sleeps ended")
        spawn("second")

        def state() -> Any:
            with psycopg.connect(url, autocommit=True) as conn:
                row = conn.execute(
                    f"SELECT state, result FROM {schema}.jobs WHERE id = %s", [job_id]
                ).fetchone()
            return row if row is not None and row[0] == "SUCCEEDED" else None

        done = wait_for(state, "the reclaimed run succeeded on the second worker")
        assert done[1]["stdout"] == "again\n"
        with psycopg.connect(url, autocommit=True) as conn:
            attempts = conn.execute(
                f"SELECT state FROM {schema}.executions WHERE job_id = %s ORDER BY attempt",
                [job_id],
            ).fetchall()
        assert [a[0] for a in attempts][-1] == "SUCCEEDED" and len(attempts) == 2, attempts
    assert os.path.exists(shared_dir / "first")


def test_a_webhook_process_serves_only_the_webhooks(
    db_env: dict[str, str], clean: None, tmp_path: Path
) -> None:
    given = tmp_path / "hook.json"
    given.write_text(
        json.dumps({"name": "hooked", "kind": "script",
                    "script": {"language": "bash", "source": "true"}})
    )  # fmt: skip
    assert tickwork(db_env, "definitions", "create", str(given)).returncode == 0
    made = tickwork(db_env, "definitions", "webhook", "hooked")
    assert made.returncode == 0, made.stderr
    path = made.stdout.split()[1]
    with serving(db_env, tmp_path, "--roles", "webhook") as (process, url, printed):
        assert f"serving webhooks on {url}/api/webhooks/" in printed, printed
        assert "administrator" not in printed
        with httpx.Client(base_url=url, timeout=30) as client:
            called = client.post(path, json={"ref": "main"})
            assert called.status_code == 202, called.text
            assert client.get("/healthz").status_code == 200
            for other in ("/api/definitions", "/api/docs", "/api/openapi.json", "/metrics"):
                assert client.get(other).status_code == 404, other
            # a route this process does not serve: refused before its body is read
            login = client.post("/api/auth/login", json={"email": "a@b.c", "password": "x"})
            assert login.status_code == 401
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=60) == 0
    job_id = called.json()["job_id"]
    shown = tickwork(db_env, "jobs", "show", str(job_id), "--json")
    assert json.loads(shown.stdout)["args"]["trigger"]["via"] == "webhook"


def test_a_plain_worker_naming_a_runtimes_queue_is_refused_at_start_up(
    db_env: dict[str, str],
) -> None:
    for name, command in (
        ("groovy", ("worker", "--queues", "scripts-groovy,default")),
        ("http", ("worker", "--queues", "http")),
        ("bash", ("serve", "--roles", "executor", "--queues", "default,scripts-bash")),
    ):
        refused = tickwork(db_env, *command)
        assert refused.returncode == 2, (command, refused.stdout, refused.stderr)
        said = refused.stderr
        assert f"is the {name} runtime's queue, which only its own executor claims" in said, said
        assert f"tickwork worker --runtime {name}" in said, said
    # so does the settings' own list
    env = db_env | {"TICKWORK_WORKER__QUEUES": '["default", "scripts-python"]'}
    refused = tickwork(env, "worker")
    assert refused.returncode == 2 and "'scripts-python'" in refused.stderr, refused.stderr


def define_and_run(
    database_url: str, schema: str, definitions: dict[str, dict[str, Any]], runs: int
) -> dict[str, list[int]]:
    """Store each definition and run it ``runs`` times; the job ids by definition name."""

    async def go() -> dict[str, list[int]]:
        app = App(database_url=database_url, schema=schema)
        try:
            pool = await app.db.async_pool()
            made: dict[str, list[int]] = {}
            for name, fields in definitions.items():
                stored = await admin.create(pool, app.db.store, {"name": name} | fields, actor="t")
                made[name] = [
                    await admin.run_now(pool, app.db.store, stored.id, actor="t")
                    for _ in range(runs)
                ]
            return made
        finally:
            await app.aclose()

    return asyncio.run(go())


def queue_counts(url: str, schema: str, state: str) -> dict[str, int]:
    """Executions in ``state`` by their job's queue."""
    with psycopg.connect(url, autocommit=True) as conn:
        rows = conn.execute(
            f"SELECT j.queue, count(*) FROM {schema}.executions e"
            f" JOIN {schema}.jobs j ON j.id = e.job_id WHERE e.state = %s GROUP BY j.queue",
            [state],
        ).fetchall()
    return {queue: int(n) for queue, n in rows}


def test_a_process_without_groovy_never_claims_a_groovy_run(
    db_env: dict[str, str], clean: None, tmp_path: Path
) -> None:
    url, schema = db_env["TICKWORK_DATABASE_URL"], db_env["TICKWORK_SCHEMA"]
    made = define_and_run(
        url,
        schema,
        {
            "groovy-first": {
                "kind": "script",
                "script": {"language": "groovy", "source": "println 'hi'"},
            },
            "bash-after": {"kind": "script", "script": {"language": "bash", "source": "echo hi"}},
        },
        1,
    )
    # the serve finds every runtime it can, and this machine "has no groovy"
    env = db_env | {"TICKWORK_RUNTIMES__SCRIPTS__GROOVY": "/nowhere/groovy"}
    env.pop("TICKWORK_RUNTIMES__SERVE")
    with serving(env, tmp_path, "--roles", "executor,watchdog") as (process, _, printed):
        assert "runtime not available runtime=groovy" in printed, printed
        assert process.stdout is not None
        runtimes = process.stdout.readline()  # printed after the roles
        assert runtimes.startswith("runtimes: http, bash") and "groovy" not in runtimes
        wait_for(
            lambda: queue_counts(url, schema, "SUCCEEDED").get("scripts-bash"),
            "the bash run, enqueued after the groovy one, to succeed",
        )
        assert process.poll() is None
    with psycopg.connect(url, autocommit=True) as conn:
        state = conn.execute(
            f"SELECT state, attempts FROM {schema}.jobs WHERE id = %s", made["groovy-first"]
        ).fetchone()
        claimed_by = conn.execute(
            f"SELECT count(*) FROM {schema}.workers WHERE 'scripts-groovy' = ANY(queues)"
        ).fetchone()
    assert state == ("PENDING", 0), state
    assert claimed_by == (0,)
    assert queue_counts(url, schema, "RUNNING") == {}


def test_serve_runs_each_script_runtime_at_its_own_concurrency(
    db_env: dict[str, str], clean: None, tmp_path: Path, shared_dir: Path
) -> None:
    url, schema = db_env["TICKWORK_DATABASE_URL"], db_env["TICKWORK_SCHEMA"]
    go = shared_dir / "go"
    made = define_and_run(
        url,
        schema,
        {
            "slow-bash": {
                "kind": "script",
                "exec_timeout": 300,
                "script": {
                    "language": "bash",
                    "source": f"while [ ! -e {go} ]; do sleep 0.05; done",
                },
            },
            "slow-python": {
                "kind": "script",
                "exec_timeout": 300,
                "script": {
                    "language": "python",
                    "source": f"import os, time\nwhile not os.path.exists({str(go)!r}):"
                    "\n    time.sleep(0.05)\n",
                },
            },
        },
        6,
    )
    env = db_env | {"TICKWORK_RUNTIMES__SERVE": '["bash", "python"]'}
    with serving(env, tmp_path, "--roles", "executor,watchdog") as (process, _, _printed):
        assert process.stdout is not None
        assert process.stdout.readline() == "runtimes: bash, python\n"  # after the roles
        # each runtime fills its own 5 slots (one pool of 5 for both would stop at 5 in all)
        wait_for(
            lambda: (
                queue_counts(url, schema, "RUNNING") == {"scripts-bash": 5, "scripts-python": 5}
            ),
            "5 bash and 5 python runs at once",
        )
        # until the release nothing ends: every attempt started so far is running, and the
        # sixth run of each language waits for a slot of its own runtime
        with psycopg.connect(url, autocommit=True) as conn:
            before = conn.execute(
                f"SELECT j.queue, count(e.id), count(*) FILTER (WHERE j.state = 'PENDING')"
                f" FROM {schema}.jobs j LEFT JOIN {schema}.executions e ON e.job_id = j.id"
                " GROUP BY j.queue ORDER BY j.queue"
            ).fetchall()
            workers = conn.execute(
                f"SELECT queues, concurrency FROM {schema}.workers"
                " WHERE stopped_at IS NULL AND queues <> ARRAY['default'] ORDER BY queues"
            ).fetchall()
        assert before == [("scripts-bash", 5, 1), ("scripts-python", 5, 1)], before
        assert workers == [(["scripts-bash"], 5), (["scripts-python"], 5)], workers
        go.touch()
        wait_for(
            lambda: (
                queue_counts(url, schema, "SUCCEEDED") == {"scripts-bash": 6, "scripts-python": 6}
            ),
            "every run to succeed",
        )
        assert process.poll() is None
    assert sum(len(ids) for ids in made.values()) == 12


def test_serve_with_an_app_claims_the_queues_its_tasks_declare(
    db_env: dict[str, str], clean: None, tmp_path: Path
) -> None:
    url, schema = db_env["TICKWORK_DATABASE_URL"], db_env["TICKWORK_SCHEMA"]
    paths = (str(E2E_DIR), db_env.get("PYTHONPATH"))
    env = db_env | {"PYTHONPATH": os.pathsep.join(p for p in paths if p)}
    app = App(database_url=url, schema=schema)
    app.tasks.update(queues_app.app.tasks)
    try:
        job = app.enqueue("e2e.mail", {"to": "ada"})
        assert job.queue == "mail"
        with serving(env, tmp_path, "--app", "queues_app:app", "--roles", "executor,watchdog") as (
            process,
            _,
            _printed,
        ):
            done = wait_for(
                lambda: (found := app.get_job(job.id)).state.value == "SUCCEEDED" and found,
                "the mail job to run under serve",
            )
            assert done.result == "mailed ada"
            assert process.poll() is None
        with psycopg.connect(url, autocommit=True) as conn:
            queues = conn.execute(f"SELECT queues FROM {schema}.workers").fetchall()
        assert (["default", "mail"],) in queues, queues
    finally:
        app.close()
