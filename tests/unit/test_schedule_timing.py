"""The pure parts of when a schedule fires: which due fire times a pass runs (every one while
the scheduler is live, the misfire policy after downtime), the catch-up window, and the
shortest gap between fire times that ``scheduler.min_interval`` refuses."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from tickwork.errors import ScheduleError
from tickwork.schedule.cron import CronSchedule
from tickwork.schedule.records import Misfire
from tickwork.schedule.scheduler import DEFAULT_CATCH_UP, catch_up_window, fire_times_to_run

EVERY_FIVE = CronSchedule.parse("*/5 * * * * *")
NOW = datetime(2026, 5, 1, 12, 0, 0, 300000, tzinfo=UTC)


@pytest.mark.parametrize("misfire", list(Misfire))
def test_a_live_scheduler_runs_every_due_fire_time_whatever_the_policy(misfire: Misfire) -> None:
    oldest = datetime(2026, 5, 1, 11, 59, 10, tzinfo=UTC)  # 50 s late: within the window
    times, passed_over = fire_times_to_run(EVERY_FIVE, oldest, NOW, misfire, 3)
    assert passed_over == 0
    assert times == [oldest + timedelta(seconds=5 * n) for n in range(11)]


@pytest.mark.parametrize(
    ("misfire", "runs"), [(Misfire.ONCE, 1), (Misfire.ALL, 3), (Misfire.SKIP, 1)]
)
def test_after_downtime_the_policy_decides(misfire: Misfire, runs: int) -> None:
    oldest = NOW.replace(microsecond=0) - DEFAULT_CATCH_UP - timedelta(seconds=5)
    times, passed_over = fire_times_to_run(EVERY_FIVE, oldest, NOW, misfire, 3)
    assert (
        times == [NOW.replace(microsecond=0) - timedelta(seconds=5 * n) for n in range(runs)][::-1]
    )
    assert len(times) + passed_over == 17  # 80 s of fire times every 5 s, and now's


def test_after_downtime_skip_runs_the_latest_only_if_it_is_on_time() -> None:
    hourly = CronSchedule.parse("0 * * * *")
    oldest = datetime(2026, 5, 1, 9, 0, tzinfo=UTC)  # three hours unwatched
    latest = datetime(2026, 5, 1, 12, 0, tzinfo=UTC)
    assert fire_times_to_run(hourly, oldest, NOW, Misfire.SKIP, 100)[0] == [latest]
    two_minutes_late = latest + timedelta(minutes=2)
    assert fire_times_to_run(hourly, oldest, two_minutes_late, Misfire.SKIP, 100)[0] == []


def test_the_catch_up_window_is_the_longest_a_live_fleet_leaves_a_fire_time() -> None:
    assert catch_up_window(30, 30, 15) == DEFAULT_CATCH_UP == timedelta(seconds=75)
    assert catch_up_window(300, 10, 3) == timedelta(seconds=313)


@pytest.mark.parametrize(
    ("expression", "gap"),
    [
        ("* * * * * *", 1),
        ("*/5 * * * * *", 5),
        ("0,1 * * * * *", 1),
        ("0,59 0,1 * * * *", 1),  # 00:00:59 then 00:01:00
        ("0,59 0 * * * *", 59),  # 59 s, then 59 min 1 s: never 1 s apart
        ("*/15 * * * *", 900),
        ("@hourly", 3600),
    ],
)
def test_the_shortest_gap_between_fire_times(expression: str, gap: int) -> None:
    found = CronSchedule.parse(expression).shortest_gap()
    assert found is not None and found[0] == timedelta(seconds=gap)


def test_a_cron_that_fires_once_in_the_horizon_has_no_gap() -> None:
    assert CronSchedule.parse("0 0 29 2 *").shortest_gap() is None  # 2004-02-29 only


def test_a_cron_finer_than_the_limit_is_refused_naming_both() -> None:
    every_second = CronSchedule.parse("* * * * * *")
    assert every_second.check_interval() is every_second  # the default: every second
    assert every_second.check_interval(1) is every_second
    with pytest.raises(ScheduleError) as refused:
        every_second.check_interval(5)
    assert refused.value.field == "cron"
    assert "fires 1 s apart" in str(refused.value)
    assert "every 5 s (scheduler.min_interval)" in str(refused.value)
    assert EVERY_FIVE.check_interval(5) is EVERY_FIVE  # at the limit: accepted
    with pytest.raises(ScheduleError, match=r"fires 1 s apart \(from 00:00:59\)"):
        CronSchedule.parse("0,59 0,1 * * * *").check_interval(2)
