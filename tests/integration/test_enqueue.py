"""Enqueue: validation, defaults, unique keys, batches."""

from __future__ import annotations

import dataclasses
import math
import threading
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from types import MappingProxyType
from typing import Any
from zoneinfo import ZoneInfo

import psycopg
import pytest

from tickwork import App, EnqueueError, JobSpec, JobState, UnknownTaskError
from tickwork.db.store.jobs import JobRow
from tickwork.db.store.runner import TIMES
from tickwork.errors import DataRefused


@pytest.fixture
def tasks(app: App) -> App:
    @app.task(name="mail.send", queue="mail", priority=5, max_attempts=7, timeout=12.5)
    def send(to: str, cc: list[str] | None = None) -> None:
        pass

    @app.task(name="plain")
    def plain(n: int = 0) -> None:
        pass

    return app


def test_task_options_become_job_defaults_and_can_be_overridden(tasks: App) -> None:
    job = tasks.enqueue("mail.send", {"to": "a@b.c"})
    assert (job.queue, job.priority, job.max_attempts, job.timeout) == ("mail", 5, 7, 12.5)
    assert job.args == {"to": "a@b.c"}
    assert job.created_by == "app"
    other = tasks.enqueue(
        "mail.send",
        {"to": "x@y.z"},
        queue="bulk",
        priority=-3,
        max_attempts=1,
        timeout=1,
        created_by="user:ops",
    )
    assert (other.queue, other.priority, other.max_attempts, other.timeout) == (
        "bulk",
        -3,
        1,
        1.0,
    )
    assert other.created_by == "user:ops"
    assert tasks.get_job(other.id) == other


@pytest.mark.parametrize(
    ("options", "field", "fragment"),
    [
        ({"priority": 101}, "priority", "between -100 and 100"),
        ({"priority": True}, "priority", "must be an integer"),
        ({"priority": 1.5}, "priority", "must be an integer"),
        ({"max_attempts": 0}, "max_attempts", "between 1 and"),
        ({"timeout": -1}, "timeout", "positive"),
        ({"timeout": math.inf}, "timeout", "finite"),
        ({"run_at": datetime(2030, 1, 1)}, "run_at", "time-zone aware"),
        ({"run_at": "tomorrow"}, "run_at", "must be a datetime"),
        ({"queue": "no spaces"}, "queue", "letters, digits"),
        ({"unique_key": ""}, "unique_key", "non-empty"),
    ],
)
def test_bad_options_are_refused_naming_field_and_value(
    tasks: App, options: dict[str, Any], field: str, fragment: str
) -> None:
    with pytest.raises(EnqueueError) as raised:
        tasks.enqueue("plain", {}, **options)
    assert raised.value.field == field
    message = str(raised.value)
    assert message.startswith(f"{field} ({options[field]!r})")
    assert fragment in message


def test_unknown_task_is_refused_listing_the_known_ones(tasks: App) -> None:
    with pytest.raises(UnknownTaskError, match=r"task \('mail.sned'\) is not a registered task"):
        tasks.enqueue("mail.sned", {"to": "a"})
    with pytest.raises(UnknownTaskError, match=r"known: mail\.send, plain"):
        tasks.enqueue("nope")


def test_arguments_must_fit_the_handler_and_be_json(tasks: App) -> None:
    with pytest.raises(EnqueueError, match="missing a required argument: 'to'"):
        tasks.enqueue("mail.send", {})
    with pytest.raises(EnqueueError, match="unexpected keyword argument 'bcc'"):
        tasks.enqueue("mail.send", {"to": "a", "bcc": "b"})
    with pytest.raises(EnqueueError) as raised:
        tasks.enqueue("mail.send", {"to": "a", "cc": Decimal("1.5")})
    assert raised.value.field == "args.cc"
    assert "not JSON-serialisable" in str(raised.value)
    with pytest.raises(EnqueueError, match=r"args\.n \(nan\)"):
        tasks.enqueue("plain", {"n": math.nan})


def test_refused_enqueue_writes_nothing(tasks: App, sql: psycopg.Connection[Any]) -> None:
    with pytest.raises(EnqueueError):
        tasks.enqueue_many([JobSpec("plain"), JobSpec("plain", priority=1000)])
    assert sql.execute("SELECT count(*) FROM jobs").fetchone() == (0,)


def test_a_value_the_database_cannot_store_is_refused_as_input(
    tasks: App, sql: psycopg.Connection[Any]
) -> None:
    with pytest.raises(DataRefused, match="database refused a value"):
        tasks.enqueue_many([JobSpec("plain", {"n": 1}), JobSpec("plain", {"n": "a\x00b"})])
    assert sql.execute("SELECT count(*) FROM jobs").fetchone() == (0,)


def test_unique_key_returns_the_existing_job_while_it_may_run(tasks: App) -> None:
    first = tasks.enqueue("plain", {"n": 1}, unique_key="nightly")
    again = tasks.enqueue("plain", {"n": 2}, unique_key="nightly")
    assert again.id == first.id and again.duplicate and not first.duplicate
    assert again.args == {"n": 1}  # the existing job is untouched
    tasks.cancel(first.id)  # no longer pending: the key is free again
    fresh = tasks.enqueue("plain", {"n": 3}, unique_key="nightly")
    assert fresh.id != first.id and not fresh.duplicate


async def test_unique_key_holds_through_running_and_failed(tasks: App) -> None:
    calls = 0

    @tasks.task(name="fails.once", max_attempts=3)
    def fails_once() -> None:
        nonlocal calls
        calls += 1
        dup = tasks.enqueue("fails.once", unique_key="k")
        assert dup.duplicate  # RUNNING holds the key
        raise RuntimeError("once")

    job = tasks.enqueue("fails.once", unique_key="k")
    async with tasks.worker() as worker:
        await worker.run_once()
    assert tasks.get_job(job.id).state is JobState.FAILED
    assert tasks.enqueue("fails.once", unique_key="k").id == job.id  # FAILED holds it too


def test_concurrent_enqueues_of_one_key_create_one_job(tasks: App) -> None:
    barrier = threading.Barrier(8)
    ids: list[int] = []

    def enqueue() -> None:
        barrier.wait()
        ids.append(tasks.enqueue("plain", unique_key="race").id)

    threads = [threading.Thread(target=enqueue) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(ids) == 8 and len(set(ids)) == 1


def test_enqueue_many_keeps_input_order_and_dedupes(
    tasks: App, sql: psycopg.Connection[Any]
) -> None:
    existing = tasks.enqueue("plain", {"n": -1}, unique_key="held")
    specs: list[JobSpec | dict[str, Any]] = [
        JobSpec("plain", {"n": 0}),
        {"task": "mail.send", "args": {"to": "a"}, "priority": 9},
        JobSpec("plain", {"n": 2}, unique_key="held"),
        JobSpec("plain", {"n": 3}, unique_key="new"),
        JobSpec("plain", {"n": 4}, unique_key="new"),
        JobSpec("plain", {"n": 5}, run_at=datetime.now(UTC) + timedelta(days=1)),
    ]
    jobs = tasks.enqueue_many(specs)
    assert [j.args.get("n", "mail") for j in jobs] == [0, "mail", -1, 3, 3, 5]
    assert jobs[2].id == existing.id and jobs[2].duplicate
    assert jobs[4].id == jobs[3].id and jobs[4].duplicate and not jobs[3].duplicate
    assert jobs[1].priority == 9 and jobs[1].queue == "mail"
    assert sql.execute("SELECT count(*) FROM jobs").fetchone() == (5,)


@pytest.mark.parametrize("mixed", [False, True], ids=["one-value-columns", "mixed-columns"])
def test_enqueue_many_stores_every_column_of_every_job(tasks: App, mixed: bool) -> None:
    # A column with one value for the whole batch travels once; one that varies travels per
    # job. Either way each job is stored as given (and as returned).
    later = datetime.now(UTC) + timedelta(hours=1)
    specs = [
        JobSpec(
            "mail.send" if mixed and n % 2 else "plain",
            {"n": n} if not mixed or n % 2 == 0 else {"to": str(n)},
            queue=f"q{n % 3}" if mixed else "q",
            priority=n if mixed else 3,
            max_attempts=n + 1 if mixed else 4,
            run_at=later + timedelta(seconds=n) if mixed else later,
            timeout=float(n + 1) if mixed else 2.5,
            unique_key=f"key-{n}" if mixed else None,
        )
        for n in range(5)
    ]
    jobs = tasks.enqueue_many(specs, created_by="user:batch")
    for spec, job in zip(specs, jobs, strict=True):
        stored = tasks.get_job(job.id)
        assert stored == job
        assert (stored.task, stored.args, stored.queue, stored.priority) == (
            spec.task,
            spec.args,
            spec.queue,
            spec.priority,
        )
        assert (stored.max_attempts, stored.run_at, stored.timeout, stored.unique_key) == (
            spec.max_attempts,
            spec.run_at,
            spec.timeout,
            spec.unique_key,
        )
        assert stored.created_by == "user:batch"


def test_enqueue_many_keeps_the_two_instances_of_a_repeated_hour_apart(tasks: App) -> None:
    # 02:30 happens twice in Berlin on 27 October 2030; Python's == says the two are equal
    first = datetime(2030, 10, 27, 2, 30, tzinfo=ZoneInfo("Europe/Berlin"), fold=0)
    second = first.replace(fold=1)
    assert first == second and first.utcoffset() != second.utcoffset()
    jobs = tasks.enqueue_many([JobSpec("plain", run_at=first), JobSpec("plain", run_at=second)])
    stored = [tasks.get_job(job.id).run_at for job in jobs]
    assert [t.astimezone(UTC) for t in stored] == [
        datetime(2030, 10, 27, 0, 30, tzinfo=UTC),
        datetime(2030, 10, 27, 1, 30, tzinfo=UTC),
    ]
    assert [job.run_at.astimezone(UTC) for job in jobs] == [t.astimezone(UTC) for t in stored]


def test_enqueue_many_rejects_bad_items_by_position(tasks: App) -> None:
    with pytest.raises(EnqueueError, match=r"jobs\[1\]"):
        tasks.enqueue_many([JobSpec("plain"), {"task": "plain", "colour": "red"}])
    with pytest.raises(EnqueueError, match=r"jobs\[0\]"):
        tasks.enqueue_many(["plain"])  # type: ignore[list-item]
    assert tasks.enqueue_many([]) == []


async def test_async_enqueue_and_lookup(tasks: App) -> None:
    job = await tasks.enqueue_async("plain", {"n": 9})
    many = await tasks.enqueue_many_async([JobSpec("plain", {"n": i}) for i in range(3)])
    assert [j.args["n"] for j in many] == [0, 1, 2]
    assert (await tasks.get_job_async(job.id)).args == {"n": 9}


def test_argument_checks_follow_the_handlers_signature(app: App) -> None:
    @app.task(name="flexible")
    def flexible(a: int, **rest: Any) -> None:
        pass

    @app.task(name="positional")
    def positional(a: int, /) -> None:
        pass

    @app.task(name="with_ctx", pass_context=True)
    def with_ctx(ctx: Any, a: int, *, b: int = 2) -> None:
        pass

    assert app.enqueue("flexible", {"a": 1, "anything": 2}).args == {"a": 1, "anything": 2}
    with pytest.raises(EnqueueError, match="missing a required argument: 'a'"):
        app.enqueue("flexible", {"anything": 2})
    with pytest.raises(EnqueueError, match="positional"):
        app.enqueue("positional", {"a": 1})
    assert app.enqueue("with_ctx", {"a": 1}).args == {"a": 1}
    with pytest.raises(EnqueueError, match="multiple values for argument 'ctx'"):
        app.enqueue("with_ctx", {"a": 1, "ctx": 3})


def statement_runs(name: str) -> int:
    """How many times this process ran the named statement (its timing histogram's count)."""
    row = TIMES.snapshot().get(name)
    return 0 if row is None else int(sum(row[:-1]))


@pytest.mark.parametrize("call", ["sync", "async"])
async def test_a_batch_of_plain_jobs_is_stored_as_returned_and_wakes_its_queue(
    tasks: App, sql: psycopg.Connection[Any], schema: str, call: str
) -> None:
    # Jobs that set no option share their task's row and, having no unique key, are
    # inserted without the upsert: each is still stored as given and as returned.
    sql.execute(f'LISTEN "{schema}.jobs"')
    keyless = statement_runs("job_insert_many_keyless")
    specs = [JobSpec("mail.send", {"to": f"{n}@b.c", "cc": [str(n)]}) for n in range(4)]
    if call == "sync":
        jobs = tasks.enqueue_many(specs, created_by="user:one")
        others = tasks.enqueue_many(specs[:2], created_by="user:two")
    else:
        jobs = await tasks.enqueue_many_async(specs, created_by="user:one")
        others = await tasks.enqueue_many_async(specs[:2], created_by="user:two")
    assert statement_runs("job_insert_many_keyless") == keyless + 2
    assert [job.args for job in jobs] == [spec.args for spec in specs]
    assert len({job.id for job in jobs + others}) == 6
    assert [job.id for job in jobs] == sorted(job.id for job in jobs)
    for job in jobs + others:
        stored = tasks.get_job(job.id)
        assert stored == job
        assert (stored.queue, stored.priority, stored.max_attempts, stored.timeout) == (
            "mail",
            5,
            7,
            12.5,
        )
        assert stored.state is JobState.PENDING and not stored.duplicate
    assert {tasks.get_job(job.id).created_by for job in jobs} == {"user:one"}
    assert {tasks.get_job(job.id).created_by for job in others} == {"user:two"}
    woken = [n.payload for n in sql.notifies(timeout=10, stop_after=2)]
    assert woken == ["mail", "mail"]  # each batch wakes its queue once


def test_a_key_in_a_batch_of_plain_jobs_still_finds_its_holder(tasks: App) -> None:
    held = tasks.enqueue("plain", {"n": -1}, unique_key="held")
    keyed = statement_runs("job_insert_many")
    jobs = tasks.enqueue_many(
        [JobSpec("plain", {"n": 0}), JobSpec("plain", {"n": 1}, unique_key="held")]
    )
    assert statement_runs("job_insert_many") == keyed + 1
    assert not jobs[0].duplicate and jobs[0].args == {"n": 0}
    assert jobs[1].duplicate and jobs[1].id == held.id and jobs[1].args == {"n": -1}


def test_the_keyless_statement_given_a_live_key_fails_rather_than_duplicating(
    tasks: App, sql: psycopg.Connection[Any]
) -> None:
    held = tasks.enqueue("plain", {"n": -1}, unique_key="held")
    row = JobRow("default", "plain", 0, 1, None, None, "held", "app")
    with tasks.db.pool().connection() as conn, pytest.raises(psycopg.errors.UniqueViolation):
        tasks.db.store.job_insert_many_keyless_sync(conn, jobs=[row, row], args="[{},{}]")
    assert sql.execute("SELECT id FROM jobs").fetchall() == [(held.id,)]


def test_jobs_of_a_task_given_new_options_take_them(tasks: App) -> None:
    task = tasks.get_task("plain")
    before = tasks.enqueue_many([JobSpec("plain", {"n": n}) for n in range(2)])
    task.options = dataclasses.replace(task.options, queue="elsewhere", priority=-7)
    after = tasks.enqueue_many([JobSpec("plain", {"n": n}) for n in range(2)])
    assert {(job.queue, job.priority) for job in before} == {("default", 0)}
    assert {(job.queue, job.priority) for job in after} == {("elsewhere", -7)}
    assert [tasks.get_job(job.id) for job in after] == after


def test_enqueue_many_takes_mappings_other_than_dicts(tasks: App) -> None:
    jobs = tasks.enqueue_many(
        [JobSpec("plain", MappingProxyType({"n": n})) for n in range(3)]
        + [JobSpec("mail.send", MappingProxyType({"to": "a", "cc": ["b"]}))]
    )
    assert [job.args for job in jobs] == [{"n": 0}, {"n": 1}, {"n": 2}, {"to": "a", "cc": ["b"]}]
    assert all(type(job.args) is dict for job in jobs)
    assert [tasks.get_job(job.id).args for job in jobs] == [job.args for job in jobs]
    with pytest.raises(EnqueueError) as raised:  # a value json cannot encode is still named
        tasks.enqueue_many([JobSpec("plain", {"n": 1}), JobSpec("plain", {"n": {1, 2}})])
    assert raised.value.field == "args.n"
