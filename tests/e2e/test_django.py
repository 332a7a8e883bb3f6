"""The Django integration, run as a Django user runs it: the example project
(``examples/django``) with its own tests under Django's test runner, and its
``manage.py migrate`` and ``manage.py tickwork_worker`` against a database of its own."""

from __future__ import annotations

import os
import secrets
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
from psycopg import sql
from psycopg.conninfo import conninfo_to_dict, make_conninfo

from tickwork import App

pytest.importorskip("django", reason="pip install -e '.[dev]' (django)")
pytestmark = pytest.mark.e2e

PROJECT = Path(__file__).resolve().parents[2] / "examples" / "django"
HANG_GUARD = 300.0
"""Not a timing assertion: only stops a broken run from hanging the suite."""


def manage(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "manage.py", *args],
        cwd=PROJECT,
        env=env,
        capture_output=True,
        text=True,
        timeout=HANG_GUARD,
        check=False,
    )


@pytest.fixture
def project_env(database_url: str) -> dict[str, str]:
    """The example project's environment: the test server, a test database named for this
    run (several runs may share the server)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TICKWORK_", "DJANGO_"))}
    return env | {
        "DATABASE_URL": database_url,
        "DJANGO_TEST_DATABASE": f"test_shop_{secrets.token_hex(4)}",
    }


@pytest.fixture
def own_database(database_url: str) -> Iterator[str]:
    """A database of its own on the test server, dropped after: ``migrate`` writes Django's
    tables in its public schema."""
    name = f"tickwork_shop_{secrets.token_hex(4)}"
    with psycopg.connect(database_url, autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    try:
        yield make_conninfo(database_url, dbname=name)
    finally:
        with psycopg.connect(database_url, autocommit=True) as conn:
            conn.execute(sql.SQL("DROP DATABASE {} WITH (FORCE)").format(sql.Identifier(name)))


def test_the_example_projects_tests_pass_under_djangos_test_runner(
    project_env: dict[str, str],
) -> None:
    ran = manage(project_env, "test", "--noinput", "-v", "2")
    assert ran.returncode == 0, ran.stderr[-4000:]
    assert "Ran 8 tests" in ran.stderr and "\nOK" in ran.stderr, ran.stderr[-4000:]
    # the test database was dropped: tickwork's connections were closed before
    with psycopg.connect(project_env["DATABASE_URL"], autocommit=True) as conn:
        left = conn.execute(
            "SELECT 1 FROM pg_database WHERE datname = %s", [project_env["DJANGO_TEST_DATABASE"]]
        ).fetchone()
    assert left is None


def test_migrate_then_a_worker_runs_an_order_placed_through_django(
    project_env: dict[str, str], own_database: str
) -> None:
    env = project_env | {"DATABASE_URL": own_database}
    migrated = manage(env, "migrate", "--noinput")
    assert migrated.returncode == 0, migrated.stderr
    with psycopg.connect(own_database, autocommit=True) as conn:
        assert conn.execute("SELECT to_regclass('tickwork.jobs')").fetchone() == ("tickwork.jobs",)
        apps = {r[0] for r in conn.execute("SELECT DISTINCT app FROM django_migrations")}
    assert "shop" in apps and "tickwork" not in apps  # beside Django's migrations, not in them
    again = manage(env, "tickwork_migrate")
    assert again.returncode == 0 and "is up to date" in again.stdout, again.stderr

    placed = manage(
        env,
        "shell",
        "-c",
        "import json; from django.test import Client;"
        " r = Client().post('/orders', json.dumps({'email': 'e@example.com', 'total_cents': 7}),"
        " 'application/json'); print(r.json()['job'], r.json()['order'])",
    )
    assert placed.returncode == 0, placed.stderr
    job_id, order_id = map(int, placed.stdout.splitlines()[-1].split())  # after any banner

    worker = subprocess.Popen(
        [sys.executable, "manage.py", "tickwork_worker", "--concurrency", "2"],
        cwd=PROJECT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    app = App(database_url=own_database, schema="tickwork")
    try:
        job = app.wait(job_id, timeout=HANG_GUARD)
        assert job.state == "SUCCEEDED" and job.result == "receipt sent to e@example.com"
        with psycopg.connect(own_database) as conn:
            sent = conn.execute(
                "SELECT receipt_sent FROM shop_order WHERE id = %s", [order_id]
            ).fetchone()
        assert sent == (True,)
    finally:
        app.close()
        worker.send_signal(signal.SIGTERM)
        output, _ = worker.communicate(timeout=HANG_GUARD)
    assert worker.returncode == 0, output


def test_a_bad_tickwork_setting_stops_the_start_naming_the_key(
    project_env: dict[str, str],
) -> None:
    settings = PROJECT / "site_config" / "settings_bad.py"
    settings.write_text(
        "from site_config.settings import *  # noqa: F403\nTICKWORK = {'QUEUE': 1}\n"
    )
    try:
        ran = manage(project_env | {"DJANGO_SETTINGS_MODULE": "site_config.settings_bad"}, "check")
    finally:
        settings.unlink()
    assert ran.returncode != 0
    assert "TICKWORK: unknown key(s) 'QUEUE'" in ran.stderr
    assert conninfo_to_dict(project_env["DATABASE_URL"])  # the URL was never the problem
