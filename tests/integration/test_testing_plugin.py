"""The testing helpers users get (``tickwork.testing``), run as a user would run them: a
project of its own (an App made at import time from the environment, a conftest turning the
plugin on) under a pytest of its own, against the test database."""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path
from typing import Any

import psycopg
import pytest

pytest_plugins = ["pytester"]

TEST_URL_VARIABLE = "TICKWORK_TEST_DATABASE_URL"

JOBS = """
import threading

from tickwork import App

app = App()  # configured from the environment, as most applications are


@app.task(queue="mail")
def send(to: str) -> str:
    return f"sent to {to}"


@app.task(queue="default")
def signup(email: str) -> None:
    send.defer(to=email)  # a job that enqueues another


@app.task(queue="default", max_attempts=1)
def broken() -> None:
    raise RuntimeError("broken on purpose")


@app.task(queue="default", max_attempts=3)
def flaky() -> None:
    raise RuntimeError("fails, and is retried after a backoff")


@app.task(queue="default")
def forever(n: int) -> None:
    forever.defer(n=n + 1)  # enqueues itself, for ever


started = threading.Event()
release = threading.Event()


@app.task(queue="default")
def hold() -> None:
    started.set()
    release.wait()
"""

TESTS = """
import os
from pathlib import Path

import pytest

import psycopg
from sqlalchemy import create_engine
from sqlalchemy.orm import Session

from tickwork import App, JobState
from tickwork.errors import ConfigError, JobNotFoundError, TickworkError
from tickwork.testing import DrainOverflow, clean, drain, drain_async, eager
from jobs import app, broken, flaky, forever, hold, release, send, signup, started


def test_the_app_uses_the_sessions_throwaway_schema(tickwork_schema, tickwork_database_url):
    assert app.settings.schema_name == tickwork_schema == os.environ["TICKWORK_SCHEMA"]
    assert tickwork_schema.startswith("tickwork_test_")
    Path("schema.txt").write_text(tickwork_schema)


def test_drain_runs_what_is_due_and_what_that_enqueues(tickwork_clean):
    first = signup.defer(email="a@example.com")
    outcomes = drain(app)
    assert len(outcomes) == 2 and outcomes[0].job_id == first.id
    sent = [j for j in (app.get_job(o.job_id) for o in outcomes) if j.task.endswith("send")]
    assert sent[0].state is JobState.SUCCEEDED and sent[0].result == "sent to a@example.com"
    assert drain(app) == []  # nothing left


def test_a_failure_is_an_outcome_not_an_exception(tickwork_clean):
    job = broken.defer()
    [outcome] = drain(app)
    assert app.get_job(job.id).state is JobState.DEAD_LETTER
    assert "broken on purpose" in app.get_job(job.id).error.message


def test_clean_empties_the_tables(tickwork_clean):
    assert drain(app) == []


@pytest.mark.asyncio
async def test_drain_from_async_tests(tickwork_clean):
    job = await send.defer_async(to="b@example.com")
    outcomes = await drain_async(app, queues=["mail"])
    assert [o.job_id for o in outcomes] == [job.id]


def test_eager_runs_a_job_and_what_it_enqueues_before_defer_returns(tickwork_clean):
    with eager(app) as outcomes:
        job = signup.defer(email="c@example.com")
        assert app.get_job(job.id).state is JobState.SUCCEEDED
        assert [app.get_job(o.job_id).task.endswith("send") for o in outcomes] == [False, True]
    after = send.defer(to="later@example.com")  # off again: it waits for a worker
    assert app.get_job(after.id).state is JobState.PENDING


def test_eager_waits_for_the_commit_of_a_psycopg_transaction(tickwork_clean, tickwork_database_url):
    with eager(app) as outcomes, psycopg.connect(tickwork_database_url) as conn:
        job = send.defer(conn=conn, to="d@example.com")
        assert outcomes == []  # not committed: no worker could see it
        conn.commit()  # psycopg tells nobody: it runs with the next enqueue that runs jobs
        send.defer(to="e@example.com")
        assert app.get_job(job.id).state is JobState.SUCCEEDED and len(outcomes) == 2


def test_eager_runs_at_a_sqlalchemy_sessions_commit_and_never_after_a_rollback(
    tickwork_clean, tickwork_database_url
):
    engine = create_engine(tickwork_database_url.replace("postgresql://", "postgresql+psycopg://"))
    with eager(app) as outcomes:
        with Session(engine) as session:
            dropped = send.defer(conn=session, to="f@example.com")
            session.rollback()
        with Session(engine) as session:
            kept = send.defer(conn=session, to="g@example.com")
            assert outcomes == []
            session.commit()
        assert [o.job_id for o in outcomes] == [kept.id]
    engine.dispose()
    with pytest.raises(JobNotFoundError):
        app.get_job(dropped.id)


@pytest.mark.asyncio
async def test_eager_in_async_code(tickwork_clean):
    with eager(app) as outcomes:
        job = await send.defer_async(to="h@example.com")
        assert [o.job_id for o in outcomes] == [job.id]


def test_eager_is_refused_twice_and_clean_refuses_a_schema_not_made_for_tests():
    with eager(app), pytest.raises(TickworkError, match="already on"):
        with eager(app):
            pass
    other = App(schema="public")
    with pytest.raises(ConfigError, match="not made for tests"):
        clean(other)
    other.close()


def test_eager_runs_a_failing_job_once_and_leaves_its_retry_for_later(tickwork_clean):
    with eager(app) as outcomes:
        job = flaky.defer()  # returns: the retry waits for its backoff
    assert [o.job_state for o in outcomes] == ["FAILED"]
    assert app.get_job(job.id).state is JobState.FAILED and app.get_job(job.id).attempts == 1


def test_a_job_enqueuing_itself_forever_raises_drain_overflow_from_the_defer(tickwork_clean):
    with eager(app, max_jobs=5) as outcomes, pytest.raises(DrainOverflow):
        forever.defer(n=0)
    assert len(outcomes) == 0  # the drain that overflowed gave none back
    assert app.after_enqueue is None


def test_an_exception_in_the_eager_block_turns_it_off(tickwork_clean):
    with pytest.raises(ZeroDivisionError), eager(app):
        1 / 0
    assert app.after_enqueue is None
    job = send.defer(to="off@example.com")
    assert app.get_job(job.id).state is JobState.PENDING


def test_eager_with_a_psycopg_transaction_rolled_back_runs_nothing(
    tickwork_clean, tickwork_database_url
):
    with eager(app) as outcomes, psycopg.connect(tickwork_database_url) as conn:
        job = send.defer(conn=conn, to="gone@example.com")
        conn.rollback()
        other = send.defer(to="kept@example.com")  # runs what is committed
    assert [o.job_id for o in outcomes] == [other.id]
    with pytest.raises(JobNotFoundError):
        app.get_job(job.id)


def test_a_defer_from_another_thread_while_a_drain_runs_is_run_by_that_drain(tickwork_clean):
    import threading

    with eager(app) as outcomes:
        first = threading.Thread(target=hold.defer)
        first.start()
        started.wait()  # its drain runs hold(), which waits
        job = send.defer(to="other-thread@example.com")  # the drain is busy: returns at once
        release.set()
        first.join()  # the drain ends after it ran both
        assert app.get_job(job.id).state is JobState.SUCCEEDED
        assert job.id in [o.job_id for o in outcomes]


@pytest.mark.asyncio
async def test_eager_runs_at_an_async_sessions_commit(tickwork_clean, tickwork_database_url):
    from sqlalchemy.ext.asyncio import AsyncSession, create_async_engine

    engine = create_async_engine(
        tickwork_database_url.replace("postgresql://", "postgresql+psycopg://")
    )
    with eager(app) as outcomes:
        async with AsyncSession(engine) as session:
            job = await send.defer_async(conn=session, to="i@example.com")
            assert outcomes == []
            await session.commit()
        assert [o.job_id for o in outcomes] == [job.id]
    await engine.dispose()
"""


def test_a_users_tests_get_a_throwaway_schema_and_drain(
    pytester: pytest.Pytester, database_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TICKWORK_TEST_DATABASE_URL", database_url)
    for name in ("TICKWORK_DATABASE_URL", "TICKWORK_SCHEMA"):
        monkeypatch.delenv(name, raising=False)
    pytester.makeconftest('pytest_plugins = ["tickwork.testing"]\n')
    pytester.makepyfile(jobs=JOBS, test_jobs=TESTS)
    result = pytester.runpytest_subprocess("-p", "no:randomly", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=16)
    schema = (pytester.path / "schema.txt").read_text()
    with psycopg.connect(database_url) as conn:
        left: Any = conn.execute(
            "SELECT count(*) FROM pg_namespace WHERE nspname = %s", [schema]
        ).fetchone()
    assert left == (0,)  # dropped when the session ended


def test_without_a_test_database_the_embedded_server_and_its_files_go_with_the_session(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, request: pytest.FixtureRequest
) -> None:
    for name in (TEST_URL_VARIABLE, "TICKWORK_DATABASE_URL", "TICKWORK_SCHEMA"):
        monkeypatch.delenv(name, raising=False)
    # short: the embedded server may put its socket under the temporary directory, and a
    # socket's path is at most 107 bytes
    scratch = Path(tempfile.mkdtemp(prefix="twt-", dir="/tmp"))
    request.addfinalizer(lambda: shutil.rmtree(scratch, ignore_errors=True))
    monkeypatch.setenv("TMPDIR", str(scratch))  # where the session makes its data directory
    pytester.makeconftest('pytest_plugins = ["tickwork.testing"]\n')
    pytester.makepyfile(
        test_one=f"""
from pathlib import Path
from tickwork import App

def test_jobs_go_to_the_embedded_server(tickwork_database_url):
    app = App()
    Path("made.txt").write_text(str([p for p in Path({str(scratch)!r}).iterdir()]))
    assert app.db.url == tickwork_database_url
    app.close()
"""
    )
    result = pytester.runpytest_subprocess("-p", "no:randomly", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=1)
    assert "tickwork-test-" in (pytester.path / "made.txt").read_text()  # it was there
    left = [p.name for p in scratch.iterdir() if p.name.startswith("tickwork-test-")]
    assert left == []  # and is gone (the server library's own runtime directory may stay)
