"""The Django integration, run as a Django user runs it: the example project
(``examples/django``) with its own tests under Django's test runner, and its
``manage.py migrate`` and ``manage.py tickwork_worker`` against a database of its own."""

from __future__ import annotations

import contextlib
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


def with_settings(env: dict[str, str], where: Path, body: str, **modules: str) -> dict[str, str]:
    """``env`` with the example project's settings changed by ``body``: a settings module (and
    ``modules``, name to source) written to ``where``, a temporary directory on the path, so
    nothing is left in the project."""
    name = f"settings_{secrets.token_hex(3)}"
    (where / f"{name}.py").write_text(f"from site_config.settings import *  # noqa: F403\n{body}\n")
    for module, source in modules.items():
        (where / f"{module}.py").write_text(source)
    return env | {"PYTHONPATH": str(where), "DJANGO_SETTINGS_MODULE": name}


def databases_named(database_url: str, prefix: str) -> list[str]:
    with psycopg.connect(database_url, autocommit=True) as conn:
        rows = conn.execute(
            "SELECT datname FROM pg_database WHERE starts_with(datname, %s) ORDER BY 1", [prefix]
        ).fetchall()
    return [row[0] for row in rows]


@pytest.fixture
def test_databases(project_env: dict[str, str]) -> Iterator[str]:
    """The name of this run's test database; it and its clones (``--parallel``) are dropped
    after, whatever Django left (``--keepdb`` keeps them)."""
    name = project_env["DJANGO_TEST_DATABASE"]
    yield name
    url = project_env["DATABASE_URL"]
    for left in databases_named(url, name):
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute(sql.SQL("DROP DATABASE {} WITH (FORCE)").format(sql.Identifier(left)))


@contextlib.contextmanager
def database_of_its_own(server_url: str) -> Iterator[str]:
    """A database of its own on the server of ``server_url`` (its URL), dropped after:
    ``migrate`` writes Django's tables in its public schema."""
    name = f"tickwork_shop_{secrets.token_hex(4)}"
    with psycopg.connect(server_url, autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    try:
        yield make_conninfo(server_url, dbname=name)
    finally:
        with psycopg.connect(server_url, autocommit=True) as conn:
            conn.execute(sql.SQL("DROP DATABASE {} WITH (FORCE)").format(sql.Identifier(name)))


@pytest.fixture
def own_database(database_url: str) -> Iterator[str]:
    """A database of its own on the test server (:func:`database_of_its_own`)."""
    with database_of_its_own(database_url) as url:
        yield url


def test_the_example_projects_tests_pass_under_djangos_test_runner(
    project_env: dict[str, str],
) -> None:
    ran = manage(project_env, "test", "--noinput", "-v", "2")
    assert ran.returncode == 0, ran.stderr[-4000:]
    assert "Ran 18 tests" in ran.stderr and "\nOK" in ran.stderr, ran.stderr[-4000:]
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

    output = order_processed_by_a_worker(env, own_database, "e@example.com")
    assert "Traceback" not in output


def order_processed_by_a_worker(env: dict[str, str], database_url: str, email: str) -> str:
    """An order placed through Django (its view enqueues the receipt in the order's
    transaction), processed by ``manage.py tickwork_worker``; the worker's output."""
    placed = manage(
        env,
        "shell",
        "-c",
        "import json; from django.test import Client;"
        f" r = Client().post('/orders', json.dumps({{'email': '{email}', 'total_cents': 7}}),"
        " 'application/json'); print(r.json()['job'], r.json()['order'])",
    )
    assert placed.returncode == 0, placed.stderr[-3000:]
    job_id, order_id = map(int, placed.stdout.splitlines()[-1].split())  # after any banner
    worker = subprocess.Popen(
        [sys.executable, "manage.py", "tickwork_worker", "--concurrency", "2"],
        cwd=PROJECT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    app = App(database_url=database_url, schema="tickwork")
    try:
        job = app.wait(job_id, timeout=HANG_GUARD)
        assert job.state == "SUCCEEDED" and job.result == f"receipt sent to {email}"
        with psycopg.connect(database_url) as conn:
            sent = conn.execute(
                "SELECT receipt_sent FROM shop_order WHERE id = %s", [order_id]
            ).fetchone()
        assert sent == (True,)
    finally:
        app.close()
        worker.send_signal(signal.SIGTERM)
        output, _ = worker.communicate(timeout=HANG_GUARD)
    assert worker.returncode == 0, output[-3000:]
    return output


BAD_SETTINGS = [
    ("TICKWORK = {'QUEUE': 1}", "TICKWORK: unknown key(s) 'QUEUE'"),
    ("TICKWORK = ['default']", "TICKWORK must be a dict, not list"),
    ("TICKWORK = {'MIGRATE': 'yes'}", "TICKWORK['MIGRATE'] must be a bool, not 'yes'"),
    (
        "TICKWORK = {'SETTINGS': {'database_url': 'postgresql://u:hunter2@h/db'}}",
        "TICKWORK['SETTINGS'] may not set 'database_url'",
    ),
    ("TICKWORK = {'DATABASE': 'nosuch'}", "TICKWORK['DATABASE'] ('nosuch') is not in DATABASES"),
    (
        "DATABASES['lite'] = {'ENGINE': 'django.db.backends.sqlite3', 'NAME': ':memory:'}\n"
        "TICKWORK = {'DATABASE': 'lite'}",
        "TICKWORK['DATABASE'] ('lite') must be a PostgreSQL database",
    ),
    ("TICKWORK = {'SCHEMA': 'public'}", "TICKWORK['SCHEMA'] ('public') holds Django's own"),
    (
        "TICKWORK = {'SETTINGS': {'worker': {'concurency': 4}}}",
        "worker.concurency (4): Extra inputs are not permitted",
    ),
    (
        "TICKWORK = {'SETTINGS': {'database_pooler': 'transaction'}}",
        "('transaction') needs TICKWORK['DIRECT_DATABASE']",
    ),
    (
        "TICKWORK = {'DIRECT_DATABASE': 'default'}",
        "TICKWORK['DIRECT_DATABASE'] is for a database behind a transaction pooler",
    ),
    (
        "TICKWORK = {'DIRECT_DATABASE': 'nosuch', 'SETTINGS': {'database_pooler': 'transaction'}}",
        "TICKWORK['DIRECT_DATABASE'] ('nosuch') is not in DATABASES",
    ),
    (
        "TICKWORK = {'SETTINGS': {'database_direct_url': 'postgresql://u:hunter2@h/db'}}",
        "TICKWORK['SETTINGS'] may not set 'database_direct_url'",
    ),
]


@pytest.mark.parametrize(("body", "message"), BAD_SETTINGS)
def test_a_bad_tickwork_setting_stops_the_start_naming_the_key(
    project_env: dict[str, str], tmp_path: Path, body: str, message: str
) -> None:
    ran = manage(with_settings(project_env, tmp_path, body), "check")
    assert ran.returncode != 0
    assert message in ran.stderr, ran.stderr[-2000:]
    assert "hunter2" not in ran.stderr


def test_behind_pgbouncer_migrate_and_a_worker_go_direct_and_jobs_run_through_it(
    project_env: dict[str, str], tcp_database_url: str, tmp_path: Path
) -> None:
    """The project's database behind a transaction pooler (``DATABASES['default']``), and the
    same database reached directly (``DIRECT_DATABASE``): tickwork's migrations and LISTEN
    go direct, everything else through the pooler, and an order placed through Django is
    processed by a worker."""
    from .pgbouncer_support import running_bouncer

    with (
        database_of_its_own(tcp_database_url) as own_database,
        running_bouncer(own_database) as bouncer,
    ):
        pooled = conninfo_to_dict(bouncer.pooled_url)
        body = (
            "DATABASES['direct'] = {**DATABASES['default']}\n"
            "DATABASES['default'] = {**DATABASES['default'], 'HOST': '127.0.0.1',"
            f" 'PORT': {pooled['port']}, 'OPTIONS': {{'prepare_threshold': None}}}}\n"
            "TICKWORK = {**TICKWORK, 'DIRECT_DATABASE': 'direct',"
            " 'SETTINGS': {'database_pooler': 'transaction'}}\n"
        )
        env = with_settings(project_env | {"DATABASE_URL": own_database}, tmp_path, body)
        env["PYTHONPATH"] = os.pathsep.join([env["PYTHONPATH"], str(PROJECT)])
        migrated = manage(env, "migrate", "--noinput")
        assert migrated.returncode == 0, migrated.stderr[-3000:]
        output = order_processed_by_a_worker(env, own_database, "p@example.com")
        assert "goes through a connection pooler" not in output


def socket_dir(database_url: str) -> str | None:
    """The server's Unix socket directory, when it is on this machine."""
    with psycopg.connect(database_url) as conn:
        row = conn.execute("SHOW unix_socket_directories").fetchone()
    first = str(row[0]).split(",")[0].strip() if row else ""
    return first if first and Path(first).is_dir() else None


DATABASE_VARIATIONS = {
    # Django's own pool, server-side binding, libpq options, naive times in a zone that is
    # not UTC (offset by half an hour), every request in a transaction
    "pool-binding-options-naive-times": """
DATABASES["default"]["OPTIONS"] = {
    "pool": {"min_size": 1, "max_size": 4},
    "server_side_binding": True,
    "sslmode": "prefer",
    "options": "-c search_path=public -c statement_timeout=60000",
    "application_name": "shop's tests",
}
DATABASES["default"]["ATOMIC_REQUESTS"] = True
USE_TZ = False
TIME_ZONE = "America/St_Johns"
""",
    # persistent connections checked before use, prepared statements on (prepare_threshold
    # is psycopg's, not libpq's: it never reaches tickwork's connection string)
    "persistent-connections-prepared": """
DATABASES["default"]["CONN_MAX_AGE"] = 600
DATABASES["default"]["CONN_HEALTH_CHECKS"] = True
DATABASES["default"]["OPTIONS"] = {"prepare_threshold": 0}
""",
}


@pytest.mark.parametrize("variation", sorted(DATABASE_VARIATIONS))
def test_the_example_projects_tests_pass_with_other_database_settings(
    project_env: dict[str, str], test_databases: str, tmp_path: Path, variation: str
) -> None:
    body = DATABASE_VARIATIONS[variation]
    where = socket_dir(project_env["DATABASE_URL"])
    if where is not None and variation.startswith("pool"):
        body += f"DATABASES['default']['HOST'] = {where!r}\n"  # a socket directory, no port
    ran = manage(with_settings(project_env, tmp_path, body), "test", "--noinput")
    assert ran.returncode == 0, ran.stderr[-4000:]
    assert "\nOK" in ran.stderr, ran.stderr[-4000:]


def test_parallel_processes_each_use_their_clone_and_keepdb_runs_again(
    project_env: dict[str, str], test_databases: str
) -> None:
    parallel = manage(project_env, "test", "--noinput", "--parallel", "2")
    assert parallel.returncode == 0, parallel.stderr[-4000:]
    assert "\nOK" in parallel.stderr, parallel.stderr[-4000:]
    # a kept test database (and its clones) starts the next run with tickwork's tables
    # emptied, as the last run's committed jobs are still in them
    for args in (["--keepdb"], ["--keepdb"], ["--keepdb", "--parallel", "2"], ["--keepdb"]):
        again = manage(project_env, "test", "--noinput", *args)
        assert again.returncode == 0, (args, again.stderr[-4000:])
        assert "\nOK" in again.stderr, (args, again.stderr[-4000:])
    assert test_databases in databases_named(project_env["DATABASE_URL"], test_databases)


NO_DATABASE_TESTS = """
from django.test import SimpleTestCase

from tickwork.contrib.django import app
from tickwork.errors import ConfigError
from tickwork.testing import clean, drain


class NoDatabase(SimpleTestCase):
    def test_tickwork_refuses_the_real_database(self) -> None:
        with self.assertRaisesRegex(ConfigError, "has no test database in this test run"):
            drain(app)
        with self.assertRaisesRegex(ConfigError, "has no test database in this test run"):
            clean(app)
"""


def test_a_run_whose_tests_use_no_database_never_touches_the_real_one(
    project_env: dict[str, str], own_database: str, tmp_path: Path
) -> None:
    env = project_env | {"DATABASE_URL": own_database}
    assert manage(env, "migrate", "--noinput").returncode == 0
    ran = manage(
        with_settings(env, tmp_path, "", no_database_tests=NO_DATABASE_TESTS),
        "test",
        "no_database_tests",
    )
    assert ran.returncode == 0 and "\nOK" in ran.stderr, ran.stderr[-4000:]
    with psycopg.connect(own_database) as conn:
        comment = conn.execute("SELECT obj_description('tickwork'::regnamespace)").fetchone()
    # the real schema is not marked as made for tests: clean() and a scratch run refuse it
    assert comment == (None,)


def test_manage_py_tickwork_exits_as_tickwork_does_with_no_traceback(
    project_env: dict[str, str], own_database: str
) -> None:
    env = project_env | {"DATABASE_URL": own_database}
    assert manage(env, "tickwork_migrate").returncode == 0
    for args, code, said in (
        (["tickwork"], 2, "Usage: manage.py tickwork"),
        (["tickwork", "nosuch"], 2, "No such command"),
        (["tickwork", "jobs", "show", "999999999"], 2, "job 999999999 does not exist"),
        (["tickwork_worker", "--nosuch"], 2, "No such option"),
        # Django's own options are Django's: applied, not passed on to tickwork
        (["tickwork", "--settings", "site_config.settings", "jobs", "list"], 0, ""),
        (["tickwork", "--settings=site_config.settings", "--help"], 0, "Usage:"),
    ):
        ran = manage(env, *args)
        output = ran.stdout + ran.stderr
        assert ran.returncode == code, (args, output[-2000:])
        assert said in output and "Traceback" not in output, (args, output[-2000:])


WORKER_TASKS = """
from shop.models import Order

from tickwork.contrib.django import app


@app.task(queue="orm")
def count_orders() -> int:
    return Order.objects.count()


@app.task(queue="orm", max_attempts=1)
def explode() -> None:
    raise RuntimeError("exploded on purpose")


@app.task(queue="orm", max_attempts=1)
async def count_orders_async() -> int:
    return await Order.objects.acount()  # in sync_to_async's thread, on its connection
"""


def count_orm_connections(url: str, *, terminate: bool = False) -> int:
    """Django's connections in a worker's threads (they ran the count of orders); with
    ``terminate``, ended by the server, as a failover or an idle timeout ends them."""
    ending = "pg_terminate_backend(pid)" if terminate else "pid"
    with psycopg.connect(url, autocommit=True) as conn:
        row = conn.execute(
            f"SELECT count({ending}) FROM pg_stat_activity WHERE datname = current_database()"
            " AND query LIKE '%shop_order%' AND pid <> pg_backend_pid()"
        ).fetchone()
    return int(row[0]) if row else 0


def orm_worker(env: dict[str, str], tmp_path: Path, settings: str) -> subprocess.Popen[str]:
    """``manage.py tickwork_worker`` of the queue ``orm``, whose tasks use the ORM."""
    (tmp_path / "orm_jobs").mkdir()
    (tmp_path / "orm_jobs" / "__init__.py").write_text("")
    (tmp_path / "orm_jobs" / "tasks.py").write_text(WORKER_TASKS)
    body = f"INSTALLED_APPS = [*INSTALLED_APPS, 'orm_jobs']\n{settings}"
    return subprocess.Popen(
        [sys.executable, "manage.py", "tickwork_worker", "--queues", "orm"],
        cwd=PROJECT,
        env=with_settings(env, tmp_path, body),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )


def test_an_async_tasks_orm_connection_is_closed_after_each_job_as_a_sync_tasks_is(
    project_env: dict[str, str], own_database: str, tmp_path: Path
) -> None:
    env = project_env | {"DATABASE_URL": own_database}
    assert manage(env, "migrate", "--noinput").returncode == 0
    worker = orm_worker(env, tmp_path, "")  # CONN_MAX_AGE 0: closed after each job
    app = App(database_url=own_database, schema="tickwork")
    spec = {"task": "orm_jobs.tasks.count_orders_async", "queue": "orm", "max_attempts": 1}
    try:
        [first] = app.enqueue_many([spec], any_task=True)
        assert app.wait(first, timeout=HANG_GUARD).state == "SUCCEEDED"
        # closed after the job, so one the server ends meanwhile fails no later job
        assert count_orm_connections(own_database, terminate=True) == 0
        [second] = app.enqueue_many([spec], any_task=True)
        done = app.wait(second, timeout=HANG_GUARD)
        assert done.state == "SUCCEEDED", done.error
    finally:
        app.close()
        worker.send_signal(signal.SIGTERM)
        output, _ = worker.communicate(timeout=HANG_GUARD)
    assert worker.returncode == 0, output


def test_a_worker_with_persistent_connections_keeps_one_per_thread_and_stops_on_sigterm(
    project_env: dict[str, str], own_database: str, tmp_path: Path
) -> None:
    env = project_env | {"DATABASE_URL": own_database}
    assert manage(env, "migrate", "--noinput").returncode == 0
    worker = orm_worker(
        env,
        tmp_path,
        "DATABASES['default']['CONN_MAX_AGE'] = 600\n"
        "DATABASES['default']['CONN_HEALTH_CHECKS'] = True\n"
        "TICKWORK = {**TICKWORK, 'SETTINGS': {'worker': {'concurrency': 8}}}",
    )

    def orm_connections() -> int:
        return count_orm_connections(own_database)

    app = App(database_url=own_database, schema="tickwork")
    try:
        specs = [{"task": "orm_jobs.tasks.count_orders", "queue": "orm"}] * 200
        specs.append({"task": "orm_jobs.tasks.explode", "queue": "orm", "max_attempts": 1})
        jobs = app.enqueue_many(specs, any_task=True)
        ended = [app.wait(job, timeout=HANG_GUARD) for job in jobs]
        assert {job.state for job in ended[:-1]} == {"SUCCEEDED"}
        assert ended[-1].state == "DEAD_LETTER" and "exploded" in str(ended[-1].error)
        assert 0 < orm_connections() <= 8  # one per handler thread at most, kept (600 s)
    finally:
        app.close()
        worker.send_signal(signal.SIGTERM)
        output, _ = worker.communicate(timeout=HANG_GUARD)
    assert worker.returncode == 0, output
    assert orm_connections() == 0, output


LEFT_OPEN_TESTS = """
import asyncio
import threading

from django.test import TransactionTestCase

from shop.tasks import send_receipt
from tickwork.contrib.django import app


class LeavesTickworkOpenInOtherThreads(TransactionTestCase):
    def test_a_pool_in_a_loop_still_running_in_another_thread(self) -> None:
        loop = asyncio.new_event_loop()
        threading.Thread(target=loop.run_forever, daemon=True).start()
        asyncio.run_coroutine_threadsafe(send_receipt.defer_async(order_id=1), loop).result()

    def test_the_sync_pool_used_from_another_thread(self) -> None:
        used = threading.Thread(target=lambda: app.get_job(send_receipt.defer(order_id=2).id))
        used.start()
        used.join()
"""


def test_the_test_database_is_dropped_though_tests_left_tickwork_open_in_other_threads(
    project_env: dict[str, str], test_databases: str, tmp_path: Path
) -> None:
    env = with_settings(project_env, tmp_path, "", left_open_tests=LEFT_OPEN_TESTS)
    ran = manage(env, "test", "--noinput", "left_open_tests")
    assert ran.returncode == 0 and "\nOK" in ran.stderr, ran.stderr[-4000:]
    assert databases_named(project_env["DATABASE_URL"], test_databases) == []


def test_the_databases_password_is_in_no_message_when_it_cannot_be_reached(
    project_env: dict[str, str], tmp_path: Path
) -> None:
    password = "pw-" + secrets.token_hex(6) + " 'q\\\\"
    env = with_settings(
        project_env,
        tmp_path,
        f"DATABASES['default']['PASSWORD'] = {password!r}\n"
        "DATABASES['default']['HOST'] = '127.0.0.1'\n"
        "DATABASES['default']['PORT'] = '1'  # nothing listens there",
    )
    for args in (["tickwork_migrate"], ["tickwork", "doctor"], ["tickwork_worker"]):
        ran = manage(env, *args)
        output = ran.stdout + ran.stderr
        assert ran.returncode != 0 and "port 1 failed" in output, (args, output[-2000:])
        assert password.split()[0] not in output, (args, output[-2000:])
        assert "Traceback" not in output, (args, output[-2000:])


TWO_DATABASES_TESTS = """
from django.db import connections, transaction
from django.test import TransactionTestCase

from shop.tasks import send_receipt
from tickwork.contrib.django import app
from tickwork.testing import clean


class JobsInTheirOwnDatabase(TransactionTestCase):
    databases = {"default", "jobs"}

    def setUp(self) -> None:
        clean(app)

    def test_defer_joins_the_jobs_databases_transaction(self) -> None:
        with transaction.atomic(using="jobs"):
            job = send_receipt.defer(order_id=1)
        self.assertEqual(app.get_job(job.id).state, "PENDING")
        with connections["jobs"].cursor() as cursor, app.db.connect() as own:
            cursor.execute("SELECT current_database()")
            # the jobs alias's test database, tickwork's own connections' too
            self.assertEqual(cursor.fetchone()[0], own.info.dbname)
            self.assertTrue(own.info.dbname.startswith("test_"))
"""


def test_a_sqlite_default_database_with_tickwork_in_a_postgresql_alias(
    project_env: dict[str, str], test_databases: str, tmp_path: Path
) -> None:
    body = (
        f"DATABASES = {{'default': {{'ENGINE': 'django.db.backends.sqlite3',"
        f" 'NAME': {str(tmp_path / 'default.sqlite3')!r}}}, 'jobs': DATABASES['default']}}\n"
        "TICKWORK = {**TICKWORK, 'DATABASE': 'jobs'}"
    )
    env = with_settings(project_env, tmp_path, body, two_databases_tests=TWO_DATABASES_TESTS)
    ran = manage(env, "test", "--noinput", "two_databases_tests")
    assert ran.returncode == 0 and "\nOK" in ran.stderr, ran.stderr[-4000:]


PYTEST_DJANGO_CONFTEST = """
import pytest


@pytest.fixture(scope="session")
def django_db_setup(django_db_setup):
    yield
    from tickwork.contrib.django.test import close_connections

    close_connections()  # tickwork's, and Django's of ended threads, before the drop
"""

PYTEST_DJANGO_TESTS = """
import pytest
from django.db import transaction

from shop.tasks import send_receipt
from tickwork.contrib.django import app
from tickwork.testing import clean, drain


@pytest.mark.django_db(transaction=True)
def test_drain_runs_a_committed_job() -> None:
    clean(app)  # the schema of pytest-django's test database is marked as made for tests
    job = send_receipt.defer(order_id=1)
    [outcome] = drain(app)
    assert outcome.job_id == job.id


@pytest.mark.django_db
def test_a_job_deferred_in_the_tests_transaction() -> None:
    with transaction.atomic():
        send_receipt.defer(order_id=2)
"""


def test_pytest_django_runs_jobs_and_drops_its_test_database(
    project_env: dict[str, str], test_databases: str, tmp_path: Path
) -> None:
    pytest.importorskip("pytest_django", reason="pip install pytest-django")
    (tmp_path / "conftest.py").write_text(PYTEST_DJANGO_CONFTEST)
    (tmp_path / "test_with_pytest_django.py").write_text(PYTEST_DJANGO_TESTS)
    env = project_env | {
        "PYTHONPATH": str(PROJECT),
        "DJANGO_SETTINGS_MODULE": "site_config.settings",
    }
    plugins = ["-p", "pytest_django", "-p", "no:randomly", "-p", "no:cacheprovider"]
    ran = subprocess.run(
        [sys.executable, "-m", "pytest", *plugins, "-p", "no:asyncio", "-q"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=HANG_GUARD,
        check=False,
    )
    assert ran.returncode == 0 and "2 passed" in ran.stdout, ran.stdout[-4000:] + ran.stderr
    assert "Error when trying to teardown test databases" not in ran.stdout, ran.stdout[-4000:]
    assert databases_named(project_env["DATABASE_URL"], test_databases) == []
