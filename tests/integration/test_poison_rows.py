"""Rows no reader can decode whole (written by SQL or by an older version: JSON nested past
the parser's reach, a number with more digits than Python converts, arguments that are not
an object) are isolated: the API, the CLI and MCP show what they can, and a claim sends such
a job to the dead letter at once, its batch-mates running as if it were not there."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import AsyncIterator
from typing import Any

import psycopg
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from psycopg.rows import dict_row

from tickwork import App, ExecutionState, JobState
from tickwork.api.schemas import JobOut
from tickwork.auth import Role
from tickwork.db.loaders import ADAPTERS, DECODE_DEPTH, json_depth
from tickwork.mcp.tools import JobReport
from tickwork.queue import rows as decode
from tickwork.schedule.scheduler import Scheduler
from tickwork.signals import admin as signal_admin

from .api_support import Api, start_api
from .test_signals import Recorder, make_app, shift

QUEUE = "poison"

TOO_DEEP = '{"d": ' + "[" * 5000 + "]" * 5000 + "}"
"""Args 5,001 levels deep: past the depth any recursive JSON parser reaches."""
HUGE_NUMBER = '{"n": 1' + "0" * 5000 + "}"
"""A 5,001-digit integer: PostgreSQL stores it; Python refuses to convert it (4,300 digits)."""

POISON_ARGS = {
    "too deep": TOO_DEEP,
    "huge number": HUGE_NUMBER,
    "an array": "[1, 2, 3]",
    "a string": '"words"',
    "a number": "42",
}
"""Stored ``args`` values no handler can be called with, by what is wrong with them."""


@pytest.fixture
async def api(app: App) -> AsyncIterator[Api]:
    @app.task(name="tests.poison_echo", queue=QUEUE)
    def echo(word: str = "hi", d: Any = None, n: Any = None) -> str:
        return word

    async for found in start_api(app):
        yield found


def insert_job(sql: Any, args: str, **columns: str) -> int:
    """A job inserted by SQL with ``args`` (JSON text) and other columns as given."""
    names = ", ".join(["queue", "task", "args", "max_attempts", "created_by", *columns])
    marks = ", ".join(["%s"] * (5 + len(columns)))
    values = (QUEUE, "tests.poison_echo", args, 3, "sql", *columns.values())
    [(job_id,)] = sql.execute(
        f"INSERT INTO jobs ({names}) VALUES ({marks}) RETURNING id", values
    ).fetchall()
    return int(job_id)


@pytest.mark.parametrize("kind", sorted(POISON_ARGS))
async def test_a_job_with_poison_args_is_served(api: Api, sql: Any, kind: str) -> None:
    job_id = insert_job(sql, POISON_ARGS[kind])
    headers = api.headers(Role.VIEWER)
    page = await api.client.get(f"/api/jobs/{job_id}", headers=headers)
    assert page.status_code == 200, page.text[:500]
    assert page.json()["omitted"] == ["args"]
    assert page.json()["args"]["undecodable"]  # says why
    timeline = await api.client.get(f"/api/jobs/{job_id}/timeline", headers=headers)
    assert timeline.status_code == 200, timeline.text[:500]
    listing = await api.client.get("/api/jobs", headers=headers)
    assert listing.status_code == 200, listing.text[:500]
    [item] = listing.json()["items"]
    assert item["omitted"] == ["args"]  # the marker, or {} when too large for a listing
    assert list(item["args"]) in (["undecodable"], [])
    searched = await api.client.get("/api/jobs", params={"q": "words"}, headers=headers)
    assert searched.status_code == 200, searched.text[:500]
    # the CLI and the Python API read the same row
    job = api.app.get_job(job_id)
    assert list(job.args) == ["undecodable"] and job.omitted == ("args",)


async def test_poison_in_result_error_progress_and_the_audit_trail_is_served(
    api: Api, sql: Any
) -> None:
    job_id = insert_job(
        sql, "{}", state="DEAD_LETTER", result=TOO_DEEP, progress=TOO_DEEP, attempts="1"
    )
    sql.execute(
        "INSERT INTO executions (job_id, attempt, worker_id, state, lease_expires_at,"
        " finished_at, error) VALUES (%s, 1, gen_random_uuid(), 'FAILED', now(), now(), %s)",
        (job_id, TOO_DEEP),
    )
    other = insert_job(sql, "{}", state="DEAD_LETTER", result=HUGE_NUMBER, attempts="1")
    sql.execute(
        "INSERT INTO executions (job_id, attempt, worker_id, state, lease_expires_at,"
        " finished_at, error) VALUES (%s, 1, gen_random_uuid(), 'FAILED', now(), now(), %s)",
        (other, '["not", "an", "object"]'),
    )
    for target, metadata in ((job_id, TOO_DEEP), (other, '"not an object"')):
        sql.execute(
            "INSERT INTO audit_events (actor, event_type, target_type, target_id, metadata)"
            " VALUES ('sql', 'job.poked', 'job', %s, %s)",
            (str(target), metadata),
        )
    headers = api.headers(Role.VIEWER)
    for one in (job_id, other):
        page = await api.client.get(f"/api/jobs/{one}", headers=headers)
        assert page.status_code == 200, page.text[:500]
        assert "undecodable" in page.json()["result"] and "result" in page.json()["omitted"]
        [attempt] = page.json()["executions"]
        assert attempt["error"]["type"] == "tickwork.Undecodable"
        timeline = await api.client.get(f"/api/jobs/{one}/timeline", headers=headers)
        assert timeline.status_code == 200, timeline.text[:500]
        [poked] = [e for e in timeline.json() if e["event"] == "job.poked"]
        assert "undecodable" in poked["detail"]
        audit = await api.client.get(
            "/api/audit",
            params={"target_type": "job", "target_id": str(one)},
            headers=api.headers(Role.ADMIN),
        )
        assert audit.status_code == 200, audit.text[:500]
    listing = await api.client.get("/api/jobs", headers=headers)
    assert listing.status_code == 200, listing.text[:500]
    assert [i["omitted"] for i in listing.json()["items"]] == [["result"], ["result"]]


async def test_an_enqueue_whose_unique_key_a_poison_row_holds(api: Api, sql: Any) -> None:
    held = insert_job(sql, TOO_DEEP, unique_key="held")
    other = insert_job(sql, HUGE_NUMBER, unique_key="other")
    job = await api.app.enqueue_async("tests.poison_echo", unique_key="held")
    assert job.duplicate and job.id == held and job.omitted == ("args",)
    jobs = await api.app.enqueue_many_async(
        [
            {"task": "tests.poison_echo", "unique_key": "held"},
            {"task": "tests.poison_echo", "unique_key": "new"},
            {"task": "tests.poison_echo", "unique_key": "other"},
        ]
    )
    assert [j.duplicate for j in jobs] == [True, False, True]
    assert [jobs[0].id, jobs[2].id] == [held, other]
    answer = await api.client.post(
        "/api/jobs",
        json={"task": "tests.poison_echo", "unique_key": "held"},
        headers=api.headers(Role.OPERATOR),
    )
    assert answer.status_code == 200, answer.text[:500]
    assert answer.json()["id"] == held and answer.json()["omitted"] == ["args"]


async def test_mcp_get_job_answers_for_a_poison_row(api: Api, sql: Any) -> None:
    # MCP's tools call the API: its answer must validate as the tool's report
    job_id = insert_job(sql, TOO_DEEP)
    headers = api.headers(Role.VIEWER)
    job = (await api.client.get(f"/api/jobs/{job_id}", headers=headers)).json()
    timeline = (await api.client.get(f"/api/jobs/{job_id}/timeline", headers=headers)).json()
    report = JobReport.model_validate({"job": job, "timeline": timeline})
    assert report.job.omitted == ["args"]


def tickwork(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    """``python -m tickwork ARGS`` against the test schema, its output captured."""
    return subprocess.run(
        [sys.executable, "-m", "tickwork", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,  # a hang guard, not a timing assertion
        check=False,
    )


def test_the_cli_shows_a_poison_row(db_env: dict[str, str], clean: None, sql: Any) -> None:
    job_id = insert_job(sql, TOO_DEEP)
    sql.execute(
        "INSERT INTO audit_events (actor, event_type, target_type, target_id, metadata)"
        " VALUES ('sql', 'job.poked', 'job', %s, %s)",
        (str(job_id), "[1]"),
    )
    shown = tickwork(db_env, "jobs", "show", str(job_id))
    assert shown.returncode == 0, shown.stderr[-2000:]
    assert "undecodable" in shown.stdout and "nested deeper than 512 levels" in shown.stdout
    as_json = tickwork(db_env, "jobs", "show", str(job_id), "--json")
    assert as_json.returncode == 0, as_json.stderr[-2000:]
    assert json.loads(as_json.stdout)["omitted"] == ["args"]
    listed = tickwork(db_env, "jobs", "list", "--json")
    assert listed.returncode == 0, listed.stderr[-2000:]


async def test_a_claim_dead_letters_poison_rows_and_runs_the_rest(app: App, sql: Any) -> None:
    ran: list[int] = []

    @app.task(name="tests.poison_echo", queue=QUEUE)
    def echo(word: str = "hi", d: Any = None, n: Any = None) -> str:
        ran.append(1)
        return word

    healthy = [insert_job(sql, json.dumps({"word": f"w{i}"})) for i in range(3)]
    healthy.append(insert_job(sql, "null"))  # JSON null: no arguments
    poison = {kind: insert_job(sql, text) for kind, text in POISON_ARGS.items()}
    worker = app.worker(queues=[QUEUE], concurrency=len(healthy) + len(poison))
    result = await worker.run_once()
    assert result.claimed == len(healthy)  # the poison rows never become attempts
    assert all(o.job_state is JobState.SUCCEEDED for o in result.outcomes)
    for job_id in healthy:
        job = app.get_job(job_id)
        assert job.state is JobState.SUCCEEDED and job.attempts == 1
    assert len(ran) == len(healthy)
    for kind, job_id in poison.items():
        job = app.get_job(job_id)
        assert job.state is JobState.DEAD_LETTER, kind
        assert job.attempts == 1 and job.error is not None, kind
        assert job.error.type == "tickwork.Undecodable", kind
        assert job.error.message.startswith("args could not be decoded:"), job.error.message
        [attempt] = app.list_executions(job_id)
        assert attempt.state is ExecutionState.FAILED
    deep = (app.get_job(poison["too deep"])).error
    assert deep is not None
    assert deep.message == "args could not be decoded: nested deeper than 512 levels (5,001)"
    array = (app.get_job(poison["an array"])).error
    assert array is not None and "must be a JSON object, not an array" in array.message
    # nothing is left to claim: the poison rows do not come back
    assert (await app.worker(queues=[QUEUE]).run_once()).claimed == 0
    [(events,)] = sql.execute(
        "SELECT count(*) FROM audit_events WHERE event_type = 'job.dead_lettered'"
    ).fetchall()
    assert events == len(poison)
    await worker.close()


async def test_a_timeout_stored_as_nan_or_infinity(api: Api, sql: Any) -> None:
    # the column's check (timeout > 0) lets both pass: NaN sorts above every number
    nan = insert_job(sql, '{"word": "nan"}', timeout="NaN")
    endless = insert_job(sql, '{"word": "endless"}', timeout="Infinity")
    for job_id in (nan, endless):
        page = await api.client.get(f"/api/jobs/{job_id}", headers=api.headers(Role.VIEWER))
        assert page.status_code == 200, page.text[:500]
        assert page.json()["timeout"] is None  # no JSON number says either
    listing = await api.client.get("/api/jobs", headers=api.headers(Role.VIEWER))
    assert listing.status_code == 200, listing.text[:500]
    # both run with no limit (a NaN deadline among the event loop's timers would break
    # the order of every other timer of the worker)
    claimed: list[float | None] = []
    original = decode.claimed

    def spy(rows: list[tuple[Any, ...]]) -> Any:
        found = original(rows)
        claimed.extend(job.timeout for job, _, _ in found[0])
        return found

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(decode, "claimed", spy)
        result = await api.app.worker(queues=[QUEUE], concurrency=2).run_once()
    assert claimed == [None, None]
    assert [o.job_state for o in result.outcomes] == [JobState.SUCCEEDED] * 2


def nested_text(depth: int, kinds: list[bool]) -> str:
    """JSON text ``depth`` levels deep, arrays and objects mixed as ``kinds`` says."""
    opened = [("[", "]") if kinds[i % len(kinds)] else ('{"k":', "}") for i in range(depth)]
    inner = "".join(o for o, _ in opened) + "1" + "".join(c for _, c in reversed(opened))
    return inner


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=20,
)
hostile_json = st.one_of(
    st.builds(nested_text, st.integers(1, 20_000), st.lists(st.booleans(), min_size=1)),
    st.integers(1, 10_000).map(lambda digits: '{"n": 1' + "0" * (digits - 1) + "}"),
    st.integers(1, 10_000).map(lambda digits: "[-1" + "0" * (digits - 1) + "]"),
    json_values.map(json.dumps),
    json_values.map(lambda value: json.dumps({"v": value})),
)
"""JSON texts a red team would store as a job's args: deep, long-numbered, not objects,
odd strings (NUL and lone surrogates among them, which PostgreSQL refuses)."""


@settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(text=hostile_json)
def test_hostile_args_never_fail_a_read_or_a_claim(
    database_url: str, schema: str, sql: Any, text: str
) -> None:
    try:
        [(job_id,)] = sql.execute(
            "INSERT INTO jobs (queue, task, args, max_attempts, created_by)"
            " VALUES ('hostile', 't', %s, 1, 'sql') RETURNING id",
            (text,),
        ).fetchall()
    except (psycopg.DataError, psycopg.errors.StatementTooComplex):
        return  # PostgreSQL refused it (a NUL, a lone surrogate, too deep): nothing to read
    try:
        with psycopg.connect(database_url, autocommit=True, context=ADAPTERS) as conn:
            conn.execute(f"SET search_path TO {schema}")
            stored = conn.execute("SELECT args::text FROM jobs WHERE id = %s", (job_id,))
            [(as_text,)] = stored.fetchall()
            row = conn.cursor(row_factory=dict_row).execute(
                "SELECT *, NULL AS error FROM jobs WHERE id = %s", (job_id,)
            )
            job = decode.job(row.fetchone() or {})
        # the page: what the API serves validates and encodes
        JobOut.model_validate(decode.servable(job)).model_dump_json()
        # the claim: the row, as job_claim returns it, decodes or is named undecodable
        claim_row = (job_id, "hostile", "t", as_text, *([None] * 13), 7, 0.0, None)
        jobs, undecoded = decode.claimed([claim_row])
        try:  # the rule: an object (or null) no deeper than DECODE_DEPTH, numbers read
            plain = None if json_depth(as_text) > DECODE_DEPTH else json.loads(as_text)
        except ValueError:
            plain = None
        runnable = (plain is None and as_text == "null") or isinstance(plain, dict)
        assert (len(jobs), len(undecoded)) == ((1, 0) if runnable else (0, 1))
        assert (job.omitted == ()) is runnable
    finally:
        sql.execute("DELETE FROM jobs WHERE id = %s", (job_id,))


async def test_a_signal_whose_payload_cannot_be_decoded_is_not_delivered(
    database_url: str, schema: str, clean: None, sql: Any
) -> None:
    app = make_app(database_url, schema)
    try:
        pool = await app.db.async_pool()
        runtime = app.signal_runtime(pool, holder_id="test-holder")
        await runtime.leases.run_once()
        reactor = Recorder("a", {"RESULT_SET_CHANGED"})
        app.add_reactor(reactor)
        poison = app.signals.emit("RESULT_SET_CHANGED", aggregate_key="k:1", payload={"x": 1})
        healthy = app.signals.emit("RESULT_SET_CHANGED", aggregate_key="k:2", payload={"x": 2})
        sql.execute("UPDATE signals SET payload = %s WHERE id = %s", (TOO_DEEP, poison.signal_id))
        shift(sql, 3600)
        await runtime.processor.run_once()
        assert reactor.seen == [healthy.signal_id]  # never run on a marker for a payload
        detail = await signal_admin.get_signal(runtime.pool, runtime.store, poison.signal_id)
        [delivery] = detail.deliveries
        assert delivery.status.value == "FAILED" and delivery.error_message is not None
        assert "payload could not be decoded: nested deeper than 512" in delivery.error_message
    finally:
        await app.aclose()


@pytest.mark.parametrize("kind", ["too deep", "an array"])
async def test_a_schedule_with_poison_args_is_served(api: Api, sql: Any, kind: str) -> None:
    made = await api.client.post(
        "/api/schedules",
        json={"name": "old", "task": "tests.poison_echo", "cron": "0 3 * * *"},
        headers=api.headers(Role.ADMIN),
    )
    assert made.status_code == 201, made.text
    sql.execute("UPDATE schedules SET args = %s WHERE name = 'old'", (POISON_ARGS[kind],))
    listing = await api.client.get("/api/schedules", headers=api.headers(Role.VIEWER))
    assert listing.status_code == 200, listing.text[:500]
    assert listing.json()[0]["omitted"] == ["args"]
    one = await api.client.get("/api/schedules/old", headers=api.headers(Role.VIEWER))
    assert one.status_code == 200, one.text[:500]
    assert list(one.json()["args"]) == ["undecodable"]


async def test_a_schedule_with_poison_args_is_left_alone_and_the_rest_fire(
    app: App, sql: Any
) -> None:
    @app.schedule("* * * * *", name="poisoned")
    @app.schedule("* * * * *", name="healthy")
    @app.task(name="tests.poison_echo", queue=QUEUE)
    def echo(word: str = "hi") -> str:
        return word

    scheduler = Scheduler(
        await app.db.async_pool(), app.db.store, lambda name: app.tasks[name].options
    )
    await scheduler.sync(list(app.schedules.values()))
    sql.execute("UPDATE schedules SET args = %s WHERE name = 'poisoned'", (TOO_DEEP,))
    sql.execute("UPDATE schedules SET next_run_at = '2026-01-01T00:00:00Z'")
    fired = await scheduler.run_once()
    assert [f.schedule for f in fired.fired] == ["healthy"]
    [(jobs,)] = sql.execute("SELECT count(*) FROM jobs").fetchall()
    assert jobs == 1  # none with a marker for arguments


NOT_OBJECTS = ('"a string"', "[1, 2]", "42", "null", TOO_DEEP)
"""Stored values where a definition keeps an object (red team, round two)."""


@pytest.mark.parametrize("column", ["spec", "backoff", "loop"])
@pytest.mark.parametrize("stored", NOT_OBJECTS)
async def test_a_definition_whose_stored_object_is_not_one_is_served(
    api: Api, sql: Any, column: str, stored: str
) -> None:
    admin = api.headers(Role.ADMIN)
    made = await api.client.post(
        "/api/definitions",
        json={"name": "poisoned", "kind": "http", "http": {"url": "https://example.com/"}},
        headers=admin,
    )
    assert made.status_code == 201, made.text
    healthy = await api.client.post(
        "/api/definitions",
        json={"name": "healthy", "kind": "http", "http": {"url": "https://example.com/"}},
        headers=admin,
    )
    sql.execute(f"UPDATE definitions SET {column} = %s::jsonb WHERE name = 'poisoned'", (stored,))
    page = await api.client.get(f"/api/definitions/{made.json()['id']}", headers=admin)
    assert page.status_code == 200, page.text[:500]
    listing = await api.client.get("/api/definitions", headers=admin)
    assert listing.status_code == 200, listing.text[:500]
    names = [d["name"] for d in listing.json()["items"]]
    assert "poisoned" in names and healthy.json()["name"] in names
    run = await api.client.post(f"/api/definitions/{made.json()['id']}/run", headers=admin)
    assert run.status_code < 500, run.text[:500]
    gone = await api.client.delete(f"/api/definitions/{made.json()['id']}", headers=admin)
    assert gone.status_code == 204, gone.text[:500]


@pytest.mark.parametrize(
    ("table", "column"),
    [("jobs", "run_at"), ("jobs", "fire_time"), ("executions", "lease_expires_at"),
     ("schedules", "next_run_at")],
)  # fmt: skip
async def test_a_time_python_cannot_read_is_refused_when_stored(
    api: Api, sql: Any, table: str, column: str
) -> None:
    """'-infinity' in a job's run_at made every claim of its queue fail (now() - run_at out of
    range) and its page 500: the tables refuse it (0017_finite_times.sql)."""
    job = await api.app.enqueue_async("tests.poison_echo")
    sql.execute(
        "INSERT INTO executions (job_id, attempt, worker_id, lease_expires_at)"
        " VALUES (%s, 1, gen_random_uuid(), now())",
        [job.id],
    )
    sql.execute(
        "INSERT INTO schedules (name, task, cron, next_run_at) VALUES"
        " ('finite', 'tests.poison_echo', '* * * * *', now())"
    )
    key = {"jobs": "id", "executions": "job_id", "schedules": "0 * id"}[table]
    for value in ("-infinity", "infinity"):
        with pytest.raises(psycopg.errors.CheckViolation, match=f"{table}_times_finite"):
            sql.execute(
                f"UPDATE {table} SET {column} = %s::timestamptz WHERE {key} = %s",
                [value, 0 if table == "schedules" else job.id],
            )
