"""tickwork behind PgBouncer in transaction pooling mode (``database_pooler = "transaction"``):
the job path through the pooler with real processes, LISTEN and migrations on the direct URL,
no session state left on the pooler's server connections, and what a misconfiguration does.

Skipped when pgbouncer is not installed (``.ci/run`` installs Debian's)."""

from __future__ import annotations

import os
import secrets
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import psutil
import psycopg
import pytest
from psycopg import sql as pgsql
from psycopg.conninfo import make_conninfo

from tickwork import App, JobState
from tickwork.errors import ConfigError, DatabaseError

from . import budget_app
from .pgbouncer_support import SERVER_CONNECTIONS, Bouncer, running_bouncer
from .support import HANG_GUARD, free_port, wait_for

E2E_DIR = Path(__file__).parent
JOBS = 120
"""Jobs of each kind enqueued (sync and async): each pooled connection runs its statements far
more than psycopg's prepare_threshold (5) times, so a prepared statement would show."""


@pytest.fixture
def bouncer(tcp_database_url: str) -> Iterator[Bouncer]:
    with running_bouncer(tcp_database_url) as running:
        yield running


def pooler_settings(bouncer: Bouncer) -> dict[str, str]:
    return {
        "database_url": bouncer.pooled_url,
        "database_pooler": "transaction",
        "database_direct_url": bouncer.direct_url,
    }


def pooler_env(db_env: dict[str, str], bouncer: Bouncer) -> dict[str, str]:
    paths = (str(E2E_DIR), db_env.get("PYTHONPATH"))
    return db_env | {
        "TICKWORK_DATABASE_URL": bouncer.pooled_url,
        "TICKWORK_DATABASE_POOLER": "transaction",
        "TICKWORK_DATABASE_DIRECT_URL": bouncer.direct_url,
        "PYTHONPATH": os.pathsep.join(p for p in paths if p),
    }


def pooled_app(bouncer: Bouncer, schema: str, **more: Any) -> App:
    app = App(schema=schema, **pooler_settings(bouncer), **more)
    app.tasks.update(budget_app.app.tasks)  # the worker process's tasks, to enqueue them
    return app


def start_worker(env: dict[str, str], log_path: Path) -> subprocess.Popen[bytes]:
    """``tickwork worker`` of the budget app, its output to ``log_path``."""
    with log_path.open("wb") as log:
        return subprocess.Popen(
            [sys.executable, "-m", "tickwork", "worker", "--app", "budget_app:app"],
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
        )


def stop_worker(worker: subprocess.Popen[bytes]) -> None:
    worker.terminate()
    worker.wait(HANG_GUARD)


def server_sessions(bouncer: Bouncer) -> list[dict[str, Any]]:
    """The state of every server session the pooler holds: each probe connection is kept in
    a transaction, so the probes occupy the pool's sessions one each."""
    probes = [
        psycopg.connect(bouncer.pooled_url, prepare_threshold=None)
        for _ in range(SERVER_CONNECTIONS)
    ]
    try:
        found = []
        for probe in probes:
            row = probe.execute(
                "SELECT pg_backend_pid(),"
                " (SELECT count(*) FROM pg_prepared_statements),"
                " (SELECT count(*) FROM pg_listening_channels()),"
                " current_setting('jit'), current_setting('plan_cache_mode'),"
                " current_setting('statement_timeout'), current_setting('search_path')"
            ).fetchone()
            assert row is not None
            keys = ("pid", "prepared", "listening", "jit", "plan_cache_mode", "timeout", "path")
            found.append(dict(zip(keys, row, strict=True)))
        return found
    finally:
        for probe in probes:  # ended cleanly: a client gone mid-transaction costs its session
            probe.rollback()
            probe.close()


def test_the_probe_sees_state_a_client_leaves_on_a_server_session(bouncer: Bouncer) -> None:
    """The check below can fail: a client that prepares statements (psycopg's default after
    five runs) or sets a session setting leaves it on the pooler's server session."""
    with psycopg.connect(bouncer.pooled_url, autocommit=True, prepare_threshold=0) as leaky:
        leaky.execute("SELECT %s::int", [1])
        leaky.execute("SET plan_cache_mode = force_generic_plan")
    sessions = server_sessions(bouncer)
    assert any(s["prepared"] > 0 for s in sessions), sessions
    assert any(s["plan_cache_mode"] == "force_generic_plan" for s in sessions), sessions


async def test_the_job_path_runs_through_pgbouncer(
    bouncer: Bouncer, db_env: dict[str, str], schema: str, clean: None, tmp_path: Path
) -> None:
    """Enqueue (sync and async) through the pooler, a worker process (its pools through the
    pooler, its LISTEN and migrations direct) drains them with a retry and a timeout, waits
    end on the direct LISTEN, and the pooler's sessions are left as they were."""
    app = pooled_app(bouncer, schema)
    log_path = tmp_path / "worker.log"
    worker = start_worker(pooler_env(db_env, bouncer), log_path)
    try:
        synced = [app.enqueue("budget.sync", {"seconds": 0}) for _ in range(JOBS)]
        with app.db.pool().connection() as conn, conn.transaction():
            flaky = app.enqueue("budget.flaky", conn=conn)  # in the caller's transaction
        awaited = [await app.enqueue_async("budget.async", {"seconds": 0}) for _ in range(JOBS)]
        too_slow = await app.enqueue_async("budget.too_slow")

        for job in [*synced, *awaited]:
            done = await app.wait_async(job, timeout=HANG_GUARD)
            assert done.state is JobState.SUCCEEDED, done
            assert done.result == ("sync" if job in synced else "async")
        retried = await app.wait_async(flaky, timeout=HANG_GUARD)
        assert retried.state is JobState.SUCCEEDED and retried.result == 2, retried
        timed_out = await app.wait_async(too_slow, timeout=HANG_GUARD)
        assert timed_out.state is JobState.DEAD_LETTER, timed_out
        assert timed_out.error is not None and timed_out.error.type == "tickwork.TaskTimeout"

        # the leader lease (a row, elected through the pooler) is held by the worker
        with psycopg.connect(bouncer.direct_url, autocommit=True) as direct:
            held = wait_for(
                lambda: direct.execute(
                    pgsql.SQL("SELECT count(*) FROM {}.leases WHERE expires_at > now()").format(
                        pgsql.Identifier(schema)
                    )
                ).fetchone()[0],
                "the worker to hold a leader lease",
            )
            assert held >= 1
    finally:
        stop_worker(worker)
        await app.aclose()
    output = log_path.read_text(errors="replace")
    assert worker.returncode == 0, output
    assert "does not exist" not in output and "unsupported startup parameter" not in output

    # nothing tickwork ran stayed with the server sessions other clients get next
    for session in server_sessions(bouncer):
        assert session["prepared"] == 0, session
        assert session["listening"] == 0, session
        assert session["jit"] == server_default("jit", bouncer), session
        assert session["plan_cache_mode"] == "auto", session


def server_default(name: str, bouncer: Bouncer) -> str:
    with psycopg.connect(bouncer.direct_url) as conn:
        row = conn.execute("SELECT reset_val FROM pg_settings WHERE name = %s", [name]).fetchone()
        assert row is not None
        return str(row[0])


async def test_notifications_sent_through_the_pooler_reach_the_direct_listener(
    bouncer: Bouncer, schema: str
) -> None:
    """LISTEN on the direct connection hears a NOTIFY sent on a pooled connection."""
    app = pooled_app(bouncer, schema)
    channel = f"tw_probe_{secrets.token_hex(4)}"
    try:
        listener = await app.db.connect_listener("tickwork-probe")
        async with listener:
            await listener.execute(pgsql.SQL("LISTEN {}").format(pgsql.Identifier(channel)))
            pool = await app.db.async_pool()
            async with pool.connection() as conn:
                await conn.execute("SELECT pg_notify(%s, 'through the pooler')", [channel])
            heard = [n.payload async for n in listener.notifies(timeout=HANG_GUARD, stop_after=1)]
        assert heard == ["through the pooler"]
    finally:
        await app.aclose()


# -- misconfigurations -----------------------------------------------------------------------


def test_a_direct_url_that_goes_through_the_pooler_is_refused_at_start(
    bouncer: Bouncer, db_env: dict[str, str], schema: str
) -> None:
    """The direct URL names the pooler by another host name: the address check in the
    settings cannot tell, the connection's own check does, and the worker does not start."""
    through_pooler = make_conninfo(bouncer.pooled_url, host="localhost")
    app = App(
        schema=schema,
        database_url=bouncer.pooled_url,
        database_pooler="transaction",
        database_direct_url=through_pooler,
    )
    with pytest.raises(ConfigError, match=r"database_direct_url .* goes through a connection"):
        app.migrate()
    env = pooler_env(db_env, bouncer) | {"TICKWORK_DATABASE_DIRECT_URL": through_pooler}
    ran = subprocess.run(
        [sys.executable, "-m", "tickwork", "worker", "--app", "budget_app:app"],
        env=env,
        capture_output=True,
        text=True,
        timeout=HANG_GUARD,
        check=False,
    )
    assert ran.returncode != 0
    assert "database_direct_url (<redacted>) goes through a connection pooler" in ran.stderr
    assert through_pooler not in ran.stderr + ran.stdout


def test_pooled_connections_send_no_session_settings(bouncer: Bouncer, schema: str) -> None:
    """A worker's pools ask for plan_cache_mode and jit at connect on the direct path; behind
    the pooler they connect with none (PgBouncer would refuse them) and prepare nothing."""
    app = pooled_app(bouncer, schema)
    try:
        kwargs = app.db.connection_kwargs(bouncer.pooled_url, jit="off")
        assert "options" not in kwargs and kwargs["prepare_threshold"] is None
        # nor the statement timeouts of the API's and the services' pools (the role's, or
        # PgBouncer's query_timeout, bound them there), and those pools connect
        assert "options" not in app.db.bounded_kwargs(bouncer.pooled_url)
        with app.db.pool().connection() as conn:
            assert conn.execute("SELECT 1").fetchone() == (1,)
        direct = App(database_url=bouncer.direct_url, schema=schema)
        assert "-c jit=off" in direct.db.connection_kwargs(bouncer.direct_url, jit="off")["options"]
        assert "prepare_threshold" not in direct.db.connection_kwargs(bouncer.direct_url)
    finally:
        app.close()


def test_a_session_setting_another_client_leaks_does_not_reach_tickwork_statements(
    bouncer: Bouncer, schema: str, clean: None
) -> None:
    """Another client of the same pool leaves ``search_path`` pointing nowhere on every
    server session; tickwork's statements name their schema, so its job path is unaffected."""
    leakers = [psycopg.connect(bouncer.pooled_url) for _ in range(SERVER_CONNECTIONS)]
    for leaker in leakers:  # each in a transaction: one server session each, all of them
        leaker.execute("SET search_path TO tickwork_nowhere")  # session-level: it stays
    for leaker in leakers:
        leaker.commit()
        leaker.close()
    assert {s["path"] for s in server_sessions(bouncer)} == {"tickwork_nowhere"}

    app = pooled_app(bouncer, schema)
    try:
        job = app.enqueue("budget.sync", {"seconds": 0})
        assert app.get_job(job.id).state is JobState.PENDING
        with app.db.pool().connection() as conn:
            assert conn.execute("SHOW search_path").fetchone() == ("tickwork_nowhere",)
    finally:
        app.close()


def test_statement_timeout_set_on_the_role_applies_through_the_pooler(
    tcp_database_url: str, schema: str, clean: None
) -> None:
    """Behind a transaction pooler a statement_timeout cannot come from the URL's options (the
    settings refuse them, naming the remedy); set on the role, it holds for every server
    session the pooler opens: an enqueue stuck behind a lock is cancelled after it."""
    role = f"tw_pooler_{secrets.token_hex(4)}"
    with psycopg.connect(tcp_database_url, autocommit=True) as admin:
        admin.execute(pgsql.SQL("CREATE ROLE {} LOGIN").format(pgsql.Identifier(role)))
        try:
            grants = [
                "GRANT USAGE ON SCHEMA {schema} TO {role}",
                "GRANT ALL ON ALL TABLES IN SCHEMA {schema} TO {role}",
                "GRANT ALL ON ALL SEQUENCES IN SCHEMA {schema} TO {role}",
                "ALTER ROLE {role} SET statement_timeout = '300ms'",
            ]
            for grant in grants:
                admin.execute(
                    pgsql.SQL(grant).format(
                        schema=pgsql.Identifier(schema), role=pgsql.Identifier(role)
                    )
                )
            with running_bouncer(tcp_database_url, users=[role]) as bouncer:
                as_role = make_conninfo(bouncer.pooled_url, user=role)
                with pytest.raises(ConfigError, match="database_url's options"):
                    App(
                        schema=schema,
                        database_url=make_conninfo(as_role, options="-c statement_timeout=300"),
                        database_pooler="transaction",
                        database_direct_url=make_conninfo(tcp_database_url, user=role),
                    )
                app = App(
                    schema=schema,
                    database_url=as_role,
                    database_pooler="transaction",
                    database_direct_url=make_conninfo(tcp_database_url, user=role),
                )
                app.tasks.update(budget_app.app.tasks)
                try:
                    app.enqueue("budget.sync", {"seconds": 0})  # not blocked: it goes in
                    with admin.transaction():
                        admin.execute(
                            pgsql.SQL("LOCK TABLE {}.jobs IN EXCLUSIVE MODE").format(
                                pgsql.Identifier(schema)
                            )
                        )
                        with pytest.raises(DatabaseError, match="statement timeout"):
                            app.enqueue("budget.sync", {"seconds": 0})
                finally:
                    app.close()
        finally:
            admin.execute(
                pgsql.SQL("DROP OWNED BY {role}; DROP ROLE {role}").format(
                    role=pgsql.Identifier(role)
                )
            )


def test_a_pooler_not_declared_is_named_in_the_log_at_migration(
    bouncer: Bouncer, caplog: pytest.LogCaptureFixture
) -> None:
    """``database_pooler`` left at ``none`` with a URL through PgBouncer: the migration says
    so (a worker's pools would then be refused: they send settings at connect); the same URL
    straight to PostgreSQL says nothing."""
    fresh = f"tw_undeclared_{secrets.token_hex(3)}"
    try:
        with caplog.at_level("WARNING", logger="tickwork.db"):
            App(database_url=bouncer.direct_url, schema=fresh).migrate()
            assert "connection pooler" not in caplog.text
            App(database_url=bouncer.pooled_url, schema=fresh).migrate()
        assert 'set database_pooler = "transaction"' in caplog.text
    finally:
        with psycopg.connect(bouncer.direct_url, autocommit=True) as conn:
            conn.execute(
                pgsql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(pgsql.Identifier(fresh))
            )


def test_serve_runs_through_pgbouncer(
    bouncer: Bouncer, db_env: dict[str, str], schema: str, clean: None, tmp_path: Path
) -> None:
    """``serve`` behind the pooler: the first administrator made, a sign-in (advisory locks
    held for its transaction), API reads, a job enqueued over the API and run by serve's own
    executor, its session watch listening on the direct URL; it stops cleanly."""
    password = "correct horse battery staple"
    port = free_port()
    env = pooler_env(db_env, bouncer) | {
        "TICKWORK_ADMIN_EMAIL": "pooled@example.com",
        "TICKWORK_ADMIN_PASSWORD": password,
    }
    log_path = tmp_path / "serve.log"
    with log_path.open("wb") as log:
        serve = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "tickwork",
                "serve",
                "--app",
                "budget_app:app",
                "--port",
                f"{port}",
            ],
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
    url = f"http://127.0.0.1:{port}"
    try:
        wait_for(lambda: ready(url), "serve to answer /readyz through the pooler")
        with httpx.Client(base_url=url, timeout=HANG_GUARD) as client:
            login = client.post(
                "/api/auth/login", json={"email": "pooled@example.com", "password": password}
            )
            assert login.status_code == 200, login.text
            auth = {"Authorization": f"Bearer {login.json()['access_token']}"}
            users = client.get("/api/users", headers=auth)
            assert [u["email"] for u in users.json()] == ["pooled@example.com"]
            made = client.post(
                "/api/jobs", headers=auth, json={"task": "budget.sync", "args": {"seconds": 0}}
            )
            assert made.status_code == 201, made.text
            job_id = made.json()["id"]
            finished = wait_for(
                lambda: (
                    body
                    if (body := client.get(f"/api/jobs/{job_id}", headers=auth).json())["state"]
                    == "SUCCEEDED"
                    else None
                ),
                "serve's executor to run the job",
            )
            assert finished["result"] == "sync"
        with psycopg.connect(bouncer.direct_url, autocommit=True) as direct:
            watching = direct.execute(
                "SELECT count(*) FROM pg_stat_activity WHERE application_name = 'tickwork-sessions'"
                " AND query ILIKE 'LISTEN%%' AND client_port = ANY(%s)",
                [serve_ports(serve.pid)],
            ).fetchone()
            assert watching == (1,)
        serve.send_signal(signal.SIGTERM)
        assert serve.wait(HANG_GUARD) == 0, log_path.read_text()
    finally:
        if serve.poll() is None:
            serve.kill()
            serve.wait(HANG_GUARD)
    output = log_path.read_text(errors="replace")
    assert "unsupported startup parameter" not in output and "does not exist" not in output


def ready(url: str) -> bool:
    try:
        return httpx.get(f"{url}/readyz", timeout=HANG_GUARD).status_code == 200
    except httpx.HTTPError:
        return False


def serve_ports(pid: int) -> list[int]:
    """Local ports of ``pid``'s TCP connections (its sessions' ``client_port``)."""
    return [s.laddr.port for s in psutil.Process(pid).net_connections("tcp") if s.raddr]
