"""A statement the database aborts for another's sake runs again after a short random pause
that grows from one run to the next."""

from __future__ import annotations

import psycopg
import pytest

from tickwork.db import driver_errors as database


def test_the_pause_grows_and_is_drawn_at_random_within_its_bound() -> None:
    for attempt in (1, 2):
        bound = database.RETRY_PAUSE * database.RETRY_PAUSE_GROWTH ** (attempt - 1)
        drawn = {database.retry_pause(attempt) for _ in range(50)}
        assert all(bound * database.RETRY_PAUSE_JITTER <= d <= bound for d in drawn)
        assert len(drawn) > 1  # random, so two statements aborted together part ways
    assert database.RETRY_PAUSE_GROWTH > 1


@pytest.mark.parametrize(
    "abort", [psycopg.errors.DeadlockDetected, psycopg.errors.SerializationFailure]
)
def test_an_aborted_statement_pauses_before_each_run_again(
    abort: type[psycopg.Error], monkeypatch: pytest.MonkeyPatch
) -> None:
    pauses: list[int] = []
    monkeypatch.setattr(database, "pause_before_retry", pauses.append)
    runs = iter([abort("aborted"), abort("aborted"), "done"])

    def run() -> str:
        outcome = next(runs)
        if isinstance(outcome, BaseException):
            raise outcome
        return outcome

    assert database.retrying_deadlocks(run, "test") == "done"
    assert pauses == [1, 2]


async def test_the_async_runs_pause_too_and_the_last_abort_is_raised(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    pauses: list[int] = []

    async def pause(attempt: int) -> None:
        pauses.append(attempt)

    monkeypatch.setattr(database, "pause_before_retry_async", pause)

    async def run() -> None:
        raise psycopg.errors.DeadlockDetected("aborted")

    with pytest.raises(psycopg.errors.DeadlockDetected):
        await database.retrying_deadlocks_async(run, "test")
    assert pauses == list(range(1, database.DEADLOCK_RETRIES))  # none after the last run
