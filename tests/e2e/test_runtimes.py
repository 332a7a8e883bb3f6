"""Runtimes as operators run them: ``tickwork worker --runtime NAME`` processes and the
``tickwork definitions`` commands; a runtime worker killed with SIGKILL mid-script leaves no
process behind past the run's exec_timeout, and its run is reclaimed and run again."""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path
from typing import Any

import httpx
import psycopg
import pytest

from ..processes import alive
from .support import serving, spawner, tickwork, wait_for

pytestmark = pytest.mark.e2e

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
    assert tickwork(db_env, "definitions", "delete", "ping").returncode == 0
    gone = tickwork(db_env, "definitions", "show", "ping")
    assert gone.returncode == 2 and "does not exist" in gone.stderr, gone.stderr


def test_a_killed_runtime_workers_script_ends_at_its_timeout_and_the_run_is_reclaimed(
    db_env: dict[str, str], clean: None, tmp_path: Path, shared_dir: Path
) -> None:
    # the first attempt starts a long sleep and waits on it; a later one succeeds at once
    source = (
        f"if [ -e {shared_dir}/first ]; then echo again; exit 0; fi\n"
        f"touch {shared_dir}/first\n"
        f"sleep 300 & echo $! > {shared_dir}/sleep.tmp && mv {shared_dir}/sleep.tmp "
        f"{shared_dir}/sleep\n"
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
        background = int(pid_file.read_text())
        first.send_signal(signal.SIGKILL)
        first.wait()
        # nothing the dead worker started outlives the run's exec_timeout
        wait_for(lambda: not alive(background), "the orphaned script's sleep ended")
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
