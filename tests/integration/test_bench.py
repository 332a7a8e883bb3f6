"""``tickwork bench`` (and ``tickwork demo``) run only in a schema made for the run, and
drop it at the end."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import psycopg
import pytest

from tickwork import App
from tickwork.cli import bench
from tickwork.cli.demo import demo_schema
from tickwork.db.scratch import scratch_schema
from tickwork.errors import ConfigError, ConflictError


def run_enqueue_single(
    app: App, progress_factory: Callable[[str, int], Callable[[int], None]] | None = None
) -> list[bench.BenchResult]:
    _, results = bench.run(
        ["enqueue-single"],
        jobs=10,
        concurrency=1,
        processes=1,
        batch=10,
        rate=1.0,
        latency_jobs=10,
        progress_factory=progress_factory or (lambda name, total: lambda done: None),
        app=app,
    )
    return results


def schema_mark(url: str, schema: str) -> list[tuple[Any, ...]]:
    """``[(comment,)]`` of the schema, ``[]`` when there is no such schema."""
    with psycopg.connect(url, autocommit=True) as conn:
        return conn.execute(
            "SELECT obj_description(oid, 'pg_namespace') FROM pg_namespace WHERE nspname = %s",
            [schema],
        ).fetchall()


def test_bench_refuses_a_schema_it_did_not_make_and_leaves_it_untouched(
    app: App, sql: psycopg.Connection[Any], database_url: str, schema: str
) -> None:
    @app.task()
    def work() -> None:
        return None

    job = work.defer()
    with pytest.raises(ConfigError, match=f"schema \\('{schema}'\\) was not made by tickwork"):
        run_enqueue_single(bench.make_app(database_url=database_url, schema=schema))
    assert sql.execute("SELECT id FROM jobs").fetchall() == [(job.id,)]
    assert app.get_job(job.id).state == job.state
    assert schema_mark(database_url, schema) == [(None,)]  # still there, still unmarked


def test_a_bench_run_makes_its_own_schema_and_leaves_none_behind(
    database_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("TICKWORK_SCHEMA", raising=False)
    app = bench.make_app(database_url=database_url)
    made = app.settings.schema_name
    assert made.startswith(bench.BENCH_SCHEMA_PREFIX)
    during: list[list[tuple[Any, ...]]] = []

    def progress_factory(name: str, total: int) -> Callable[[int], None]:
        return lambda done: during.append(schema_mark(database_url, made))

    results = run_enqueue_single(app, progress_factory)
    assert [r.jobs for r in results] == [10]
    assert during and during[0] == [("made by tickwork for one run; dropped when the run ends",)]
    assert schema_mark(database_url, made) == []  # dropped at the end


def test_a_schema_left_by_a_killed_run_is_taken_over_and_dropped(
    database_url: str, schema: str
) -> None:
    left = f"{schema}_bench_left"
    app = bench.make_app(database_url=database_url, schema=left)
    with psycopg.connect(database_url, autocommit=True) as conn, conn.transaction():
        conn.execute(app.db.statements["scratch_create"])
        conn.execute(app.db.statements["scratch_mark"])
        conn.execute(f"CREATE TABLE {left}.leftover (id int)")
    run_enqueue_single(app)
    assert schema_mark(database_url, left) == []


def test_a_second_bench_on_the_same_schema_is_refused(database_url: str, schema: str) -> None:
    busy = f"{schema}_bench_busy"
    app = bench.make_app(database_url=database_url, schema=busy)
    with psycopg.connect(database_url, autocommit=True) as first:
        # the lock a running bench holds on its schema
        first.execute(app.db.statements["scratch_lock"], {"schema": busy})
        with pytest.raises(ConflictError, match="another tickwork bench is running"):
            run_enqueue_single(app)
    assert schema_mark(database_url, busy) == []  # the refused run made nothing


def test_the_demo_refuses_a_schema_of_its_name_that_it_did_not_make(
    database_url: str, schema: str
) -> None:
    taken = demo_schema(f"{schema}_user")  # a user's schema that happens to have the name
    with psycopg.connect(database_url, autocommit=True) as conn:
        conn.execute(f"CREATE SCHEMA {taken}")
        conn.execute(f"CREATE TABLE {taken}.precious (id int)")
    try:
        app = App(database_url=database_url, schema=taken)
        with (
            pytest.raises(ConfigError, match="was not made by tickwork demo"),
            scratch_schema(app.db, "demo", close=app.close),
        ):
            raise AssertionError("the demo must not start")
        assert schema_mark(database_url, taken) == [(None,)]
        with psycopg.connect(database_url, autocommit=True) as conn:
            assert conn.execute(f"SELECT count(*) FROM {taken}.precious").fetchone() == (0,)
    finally:
        with psycopg.connect(database_url, autocommit=True) as conn:
            conn.execute(f"DROP SCHEMA IF EXISTS {taken} CASCADE")
