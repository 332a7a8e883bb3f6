"""How a batch is planned: a task's plain jobs share one row, which the store sends as one
value per column through the statement without the upsert; anything else goes column by
column, and a unique key anywhere means the upsert."""

from __future__ import annotations

import pytest

from tickwork import App, JobSpec
from tickwork.db.store.jobs import INSERT_MANY_COLUMNS, _insert_many_params, insert_many_statement
from tickwork.queue.enqueue import insert_plan


@pytest.fixture
def app() -> App:
    the_app = App(database_url="postgresql://unused.invalid/x", schema="plan")

    @the_app.task(name="plain", queue="q", priority=2)
    def plain(n: int = 0) -> None:
        pass

    return the_app


def test_plain_jobs_of_a_task_share_one_row_sent_once_per_column(app: App) -> None:
    rows, args = app._rows([JobSpec("plain", {"n": n}) for n in range(3)], "app")
    assert rows[0] is rows[1] is rows[2]
    plan = insert_plan(rows, args)
    assert plan.shared is rows[0] and plan.position == [0, 1, 2]
    assert plan.args == '[{"n":0},{"n":1},{"n":2}]'
    params = _insert_many_params(plan.sent, plan.args)
    assert all(params[column] == [] for column in INSERT_MANY_COLUMNS)
    assert (params["queue_all"], params["priority_all"], params["unique_key_all"]) == ("q", 2, None)
    assert insert_many_statement(plan.sent) == "job_insert_many_keyless"


def test_a_row_per_caller_and_rows_with_options_of_their_own(app: App) -> None:
    rows, _ = app._rows([JobSpec("plain"), JobSpec("plain")], "user:a")
    other, _ = app._rows([JobSpec("plain")], "user:b")
    assert rows[0] is rows[1] and other[0] is not rows[0]
    assert (rows[0].created_by, other[0].created_by) == ("user:a", "user:b")
    own, _ = app._rows([JobSpec("plain", priority=2), JobSpec("plain", priority=2)], "app")
    assert own[0] is not own[1]  # equal, not shared: compared by identity, sent per column
    plan = insert_plan(own, [{}, {}])
    assert plan.shared is None
    params = _insert_many_params(plan.sent, plan.args)
    assert (params["priority"], params["priority_all"]) == ([], 2)  # one value all the same


def test_a_unique_key_anywhere_means_the_upsert(app: App) -> None:
    rows, args = app._rows(
        [JobSpec("plain", {"n": 1}), JobSpec("plain", {"n": 2}, unique_key="k")], "app"
    )
    plan = insert_plan(rows, args)
    assert plan.shared is None
    assert insert_many_statement(plan.sent) == "job_insert_many"
    repeated, repeated_args = app._rows([JobSpec("plain", unique_key="k")] * 3, "app")
    plan = insert_plan(repeated, repeated_args)
    assert len(plan.sent) == 1 and plan.position == [0, 0, 0] and plan.shared is None
    assert insert_many_statement(plan.sent) == "job_insert_many"
