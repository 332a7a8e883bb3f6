"""Cron parsing and next-fire computation, with the daylight-saving rules checked by hand in
several zones and as properties over random instants."""

from __future__ import annotations

import itertools
from datetime import UTC, date, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tickwork.errors import ScheduleError
from tickwork.schedule.cron import ALIASES, CronSchedule


def utc(*args: int) -> datetime:
    return datetime(*args, tzinfo=UTC)  # type: ignore[misc]


def local(zone: str, *args: int, fold: int = 0) -> datetime:
    return datetime(*args, tzinfo=ZoneInfo(zone), fold=fold).astimezone(UTC)  # type: ignore[misc]


# -- parsing ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("expression", "timezone", "field", "fragment"),
    [
        ("61 * * * *", "UTC", "cron", "invalid"),
        ("* * *", "UTC", "cron", "5 fields"),
        ("@fortnightly", "UTC", "cron", "not a known alias"),
        ("", "UTC", "cron", "non-empty"),
        ("0 * * * *", "Mars/Olympus_Mons", "timezone", "IANA"),
        ("0 * * * *", "", "timezone", "IANA"),
    ],
)
def test_invalid_input_is_refused_naming_field_and_value(
    expression: str, timezone: str, field: str, fragment: str
) -> None:
    with pytest.raises(ScheduleError) as raised:
        CronSchedule.parse(expression, timezone)
    assert raised.value.field == field
    assert str(raised.value).startswith(f"{field} (")
    assert fragment in str(raised.value)


def test_six_fields_take_seconds_first() -> None:
    every_ten_minutes = CronSchedule.parse("0 */10 * * * *")
    assert every_ten_minutes.next_after(utc(2026, 1, 1, 0, 0, 0)) == utc(2026, 1, 1, 0, 10, 0)
    every_30s = CronSchedule.parse("*/30 * * * * *")
    assert every_30s.next_after(utc(2026, 1, 1, 0, 0, 1)) == utc(2026, 1, 1, 0, 0, 30)


@pytest.mark.parametrize("alias", sorted(ALIASES))
def test_aliases_mean_their_standard_expressions(alias: str) -> None:
    start = utc(2026, 5, 17, 13, 45)
    assert CronSchedule.parse(alias).next_after(start) == CronSchedule.parse(
        ALIASES[alias]
    ).next_after(start)


def test_next_fire_is_strictly_after_and_in_utc() -> None:
    hourly = CronSchedule.parse("0 * * * *", "Asia/Kolkata")  # +05:30: on the local hour
    fire = hourly.next_after(utc(2026, 1, 1, 0, 30))
    assert fire == utc(2026, 1, 1, 1, 30) and fire.tzinfo is UTC
    assert hourly.next_after(fire) == utc(2026, 1, 1, 2, 30)
    with pytest.raises(ScheduleError, match="instant"):
        hourly.next_after(datetime(2026, 1, 1))


# -- daylight saving, checked by hand -------------------------------------------------------


@pytest.mark.parametrize(
    ("zone", "day", "gap_start_hour"),
    [
        ("Europe/Berlin", (2026, 3, 29), 2),  # 02:00 -> 03:00
        ("America/New_York", (2026, 3, 8), 2),  # 02:00 -> 03:00
        ("Australia/Adelaide", (2026, 10, 4), 2),  # 02:00 -> 03:00 (+10:30)
    ],
)
def test_spring_forward_nonexistent_time_fires_once_at_the_next_valid_instant(
    zone: str, day: tuple[int, int, int], gap_start_hour: int
) -> None:
    daily = CronSchedule.parse(f"30 {gap_start_hour} * * *", zone)
    before = local(zone, *day, 0, 0)
    fires = daily.fire_times(before, before + timedelta(days=2))
    assert fires[0] == local(zone, *day, gap_start_hour + 1, 0)  # the instant after the gap
    next_day = date(*day) + timedelta(days=1)
    assert fires[1] == local(zone, *next_day.timetuple()[:3], gap_start_hour, 30)
    assert len(fires) == 2


@pytest.mark.parametrize(
    ("zone", "day"),
    [
        ("Europe/Berlin", (2026, 10, 25)),  # 03:00 -> 02:00
        ("America/New_York", (2026, 11, 1)),  # 02:00 -> 01:00
        ("Australia/Adelaide", (2026, 4, 5)),  # 03:00 -> 02:00
    ],
)
def test_fall_back_repeated_time_fires_once(zone: str, day: tuple[int, int, int]) -> None:
    repeated_hour = 1 if zone == "America/New_York" else 2
    daily = CronSchedule.parse(f"30 {repeated_hour} * * *", zone)
    start = local(zone, *day, 0, 0)
    fires = daily.fire_times(start, start + timedelta(hours=24))
    assert fires == [local(zone, *day, repeated_hour, 30, fold=0)]  # the first pass only


def test_wildcard_hour_keeps_its_real_time_rhythm_through_the_repeated_hour() -> None:
    every_30 = CronSchedule.parse("*/30 * * * *", "Europe/Berlin")
    start = local("Europe/Berlin", 2026, 10, 25, 1, 50)
    fires = every_30.fire_times(start, start + timedelta(hours=2, minutes=30))
    gaps = {b - a for a, b in itertools.pairwise(fires)}
    assert gaps == {timedelta(minutes=30)}  # both passes of 02:xx fire, evenly spaced
    assert len(fires) == 5


def test_six_fields_naming_the_hour_fire_once_when_the_clock_falls_back() -> None:
    """``0 30 2 * * *`` used to fire in both passes of 02:30 (cronsim keeps its wall-clock
    rule for 5 fields); now it fires as ``30 2 * * *`` does."""
    start, until = utc(2026, 10, 24, 22), utc(2026, 10, 25, 4)
    for expression in ("0 30 2 * * *", "30 2 * * *"):
        fires = CronSchedule.parse(expression, "Europe/Berlin").fire_times(start, until)
        assert fires == [utc(2026, 10, 25, 0, 30)], expression  # 02:30 CEST, not 02:30 CET
    seconds = CronSchedule.parse("*/20 30 2 * * *", "Europe/Berlin").fire_times(start, until)
    assert seconds == [utc(2026, 10, 25, 0, 30, s) for s in (0, 20, 40)]  # the first pass


def test_six_fields_naming_the_hour_fire_once_after_a_gap() -> None:
    start = utc(2026, 3, 28, 22)
    for expression in ("0 30 2 * * *", "15 30 2 * * *", "*/10 30 2 * * *", "30 2 * * *"):
        daily = CronSchedule.parse(expression, "Europe/Berlin")
        fires = daily.fire_times(start, start + timedelta(hours=6))
        assert fires == [utc(2026, 3, 29, 1)], expression  # 03:00 CEST, on the jump
    # Lord Howe jumps 02:00 -> 02:30: 02:10:15 fires at 02:30:00, 02:30:15 is itself
    lord_howe = CronSchedule.parse("15 10,30 2 * * *", "Australia/Lord_Howe")
    fires = lord_howe.fire_times(utc(2026, 10, 3, 12), utc(2026, 10, 3, 18))
    assert fires == [utc(2026, 10, 3, 15, 30), utc(2026, 10, 3, 15, 30, 15)]


def test_six_fields_with_a_wildcard_hour_keep_both_passes() -> None:
    start = local("Europe/Berlin", 2026, 10, 25, 1, 50)
    for expression in ("0 */30 * * * *", "*/30 * * * *"):
        every_30 = CronSchedule.parse(expression, "Europe/Berlin")
        fires = every_30.fire_times(start, start + timedelta(hours=2, minutes=30))
        assert fires == [utc(2026, 10, 25, 0) + timedelta(minutes=30 * i) for i in range(5)]


def test_next_fire_from_the_second_pass_is_not_the_first_pass_again() -> None:
    """From 02:10 CET (the second pass), 02:30 has fired already (at 02:30 CEST): the next
    fire time is tomorrow's, never one before the instant asked about."""
    second_pass = local("Europe/Berlin", 2026, 10, 25, 2, 10, fold=1)
    for expression in ("30 2 * * *", "0 30 2 * * *"):
        daily = CronSchedule.parse(expression, "Europe/Berlin")
        assert daily.next_after(second_pass) == local("Europe/Berlin", 2026, 10, 26, 2, 30)
        assert daily.fire_times(second_pass, second_pass + timedelta(hours=1)) == []


# -- properties ----------------------------------------------------------------------------

ZONES = ["Europe/Berlin", "America/New_York", "Australia/Adelaide", "Asia/Kolkata", "UTC"]
instants = st.datetimes(
    min_value=datetime(2024, 1, 1), max_value=datetime(2030, 12, 31), timezones=st.just(UTC)
)


@settings(max_examples=150, deadline=None)
@given(
    zone=st.sampled_from(ZONES),
    hour=st.integers(0, 23),
    minute=st.integers(0, 59),
    start=instants,
)
def test_fixed_daily_time_fires_once_per_local_day_at_that_time_unless_skipped_by_a_gap(
    zone: str, hour: int, minute: int, start: datetime
) -> None:
    daily = CronSchedule.parse(f"{minute} {hour} * * *", zone)
    fires = daily.fire_times(start, start + timedelta(days=10))
    tz = ZoneInfo(zone)
    local_days = [f.astimezone(tz).date() for f in fires]
    assert len(local_days) == len(set(local_days))  # never twice on one local day
    assert all(a < b for a, b in itertools.pairwise(fires))
    assert 9 <= len(fires) <= 11  # a DST change can stretch 10 UTC days over 11 local 8:00s
    for fire in fires:
        wall = fire.astimezone(tz)
        if (wall.hour, wall.minute) != (hour, minute):
            # only allowed when that wall time did not exist that day (sprung over): then it
            # fired exactly at the end of the gap, where the zone's offset changes
            wanted = datetime(wall.year, wall.month, wall.day, hour, minute, tzinfo=tz)
            round_trip = wanted.astimezone(UTC).astimezone(tz).replace(tzinfo=None)
            assert round_trip != wanted.replace(tzinfo=None)  # did not exist
            just_before = (fire - timedelta(microseconds=1)).astimezone(tz)
            assert just_before.utcoffset() != wall.utcoffset()


@settings(max_examples=150, deadline=None)
@given(zone=st.sampled_from(ZONES), step=st.sampled_from([5, 10, 15, 20, 30]), start=instants)
def test_minute_steps_keep_real_time_spacing_across_transitions(
    zone: str, step: int, start: datetime
) -> None:
    every = CronSchedule.parse(f"*/{step} * * * *", zone)
    fires = every.fire_times(start, start + timedelta(hours=30))
    gaps = {b - a for a, b in itertools.pairwise(fires)}
    # uniform in real time, except where a 30/45-minute offset zone meets a 60-divisible grid
    assert all(timedelta(0) < g <= timedelta(minutes=step) for g in gaps)


# -- misfire selection --------------------------------------------------------------------


def test_misfire_selection_looks_back_from_now_without_enumerating_the_downtime() -> None:
    from tickwork.schedule.records import Misfire
    from tickwork.schedule.scheduler import fire_times_to_run

    every_minute = CronSchedule.parse("* * * * *")
    now = utc(2026, 6, 1, 12, 0, 30)
    long_ago = utc(2020, 1, 1)  # six years of minutes: never listed one by one
    once, missed = fire_times_to_run(every_minute, long_ago, now, Misfire.ONCE, 100)
    assert once == [utc(2026, 6, 1, 12, 0)] and missed >= 59
    every, _ = fire_times_to_run(every_minute, long_ago, now, Misfire.ALL, 3)
    assert every == [utc(2026, 6, 1, 11, 58), utc(2026, 6, 1, 11, 59), utc(2026, 6, 1, 12, 0)]
    on_time, _ = fire_times_to_run(every_minute, long_ago, now, Misfire.SKIP, 100)
    assert on_time == [utc(2026, 6, 1, 12, 0)]  # 30 s late: within the grace
    yearly = CronSchedule.parse("@yearly")
    late, _ = fire_times_to_run(yearly, utc(2020, 1, 1), now, Misfire.SKIP, 100)
    assert late == []  # five months late: skipped
    due_now, missed = fire_times_to_run(yearly, utc(2026, 1, 1), now, Misfire.ONCE, 100)
    assert due_now == [utc(2026, 1, 1)] and missed == 0


@pytest.mark.parametrize("zone", ["x" * 10_000, "x" * 256 + "/y", "Europe/" + "P" * 300, ""])
def test_a_zone_no_name_can_be_is_refused_naming_the_field(zone: str) -> None:
    """Refused as a bad time zone whether or not the tzdata package is installed (where it
    is, a name too long for a file used to raise OSError: a 500 from the API)."""
    with pytest.raises(ScheduleError, match="timezone"):
        CronSchedule.parse("0 3 * * *", zone)


# -- 6 fields against 5, around transitions -------------------------------------------------

TRANSITIONS = {  # 2026, UTC: each zone's spring-forward and fall-back instants
    "Europe/Berlin": [utc(2026, 3, 29, 1), utc(2026, 10, 25, 1)],
    "America/New_York": [utc(2026, 3, 8, 7), utc(2026, 11, 1, 6)],
    "Australia/Lord_Howe": [utc(2026, 10, 3, 15, 30), utc(2026, 4, 4, 15)],  # 30-min shifts
}
minutes = st.one_of(
    st.integers(0, 59).map(str),
    st.sampled_from(["*", "*/15", "*/20", "0,30", "10-40/10", "29-31", "0", "30"]),
)
hours = st.one_of(
    st.integers(0, 4).map(str),
    st.integers(0, 23).map(str),
    st.sampled_from(["*", "*/2", "1-3", "2,3", "1,2"]),
)


def test_the_transition_table_is_true() -> None:
    for zone, instants in TRANSITIONS.items():
        tz = ZoneInfo(zone)
        for at in instants:
            before = (at - timedelta(seconds=1)).astimezone(tz).utcoffset()
            assert before != at.astimezone(tz).utcoffset(), (zone, at)


@settings(max_examples=300, deadline=None)
@given(
    zone=st.sampled_from(sorted(TRANSITIONS)),
    which=st.integers(0, 1),
    second=st.one_of(st.just(0), st.integers(1, 58)),
    minute=minutes,
    hour=hours,
    lead=st.integers(0, 6 * 60),
    probe=st.integers(0, 12 * 3600),
)
def test_six_fields_fire_as_their_five_field_equivalent_across_transitions(
    zone: str, which: int, second: int, minute: str, hour: str, lead: int, probe: int
) -> None:
    # a window of 12 h starting up to 6 h before the transition, bounds at :59 s so that a
    # minute's fire time and the same minute's at `second` s fall in it together
    after = TRANSITIONS[zone][which] - timedelta(minutes=lead, seconds=1)
    until = after + timedelta(hours=12)
    six = CronSchedule.parse(f"{second} {minute} {hour} * * *", zone)
    five = CronSchedule.parse(f"{minute} {hour} * * *", zone)
    fires = six.fire_times(after, until)
    expected = five.fire_times(after, until)
    if second == 0:
        assert fires == expected
    else:  # the same minutes at `second` s, except where a gap moved one to its end
        shifted = {f - timedelta(seconds=second) if f.second == second else f for f in fires}
        assert sorted(shifted) == expected
    assert all(a < b for a, b in itertools.pairwise([after, *fires]))  # after, in order
    assert expected == by_hand(zone, TRANSITIONS[zone][which], minute, hour, after, until)
    # next_after (the scheduler's next_run_at) agrees with fire_times (what it fires), from
    # any instant, the second pass of a repeated hour included
    for schedule, times in ((six, fires), (five, expected)):
        chained, at = [], after
        while (at := schedule.next_after(at)) <= until:
            chained.append(at)
        assert chained == times
        instant = after + timedelta(seconds=probe, microseconds=probe % 7)
        later = [t for t in times if t > instant]
        if later:
            assert schedule.next_after(instant) == later[0]


def values(field: str, top: int) -> set[int]:
    """The values a minute or hour field of the forms drawn above names."""
    if "," in field:
        return {v for part in field.split(",") for v in values(part, top)}
    span, _, step = field.partition("/")
    low, _, high = span.partition("-")
    first, last = (0, top) if span == "*" else (int(low), int(high or low))
    return set(range(first, (top if step and not high else last) + 1, int(step or 1)))


def by_hand(
    zone: str, transition: datetime, minute: str, hour: str, after: datetime, until: datetime
) -> list[datetime]:
    """The fire times of ``minute hour * * *`` in ``(after, until]`` by the documented rules,
    minute by minute: every instant reading a matching wall time when either field starts
    with ``*``; else each matching wall time's first occurrence, or the transition if the
    clock springs over it."""
    tz, minutes, hours = ZoneInfo(zone), values(minute, 59), values(hour, 23)
    if minute.startswith("*") or hour.startswith("*"):
        every = (after + timedelta(seconds=1) + timedelta(minutes=i) for i in range(12 * 60))
        return [t for t in every if (w := t.astimezone(tz)).minute in minutes and w.hour in hours]
    start = (after + timedelta(seconds=1)).astimezone(tz).replace(tzinfo=None)
    walls = (start + timedelta(minutes=i) for i in range(-180, 15 * 60))
    fires = set()
    for wall in walls:
        if wall.minute in minutes and wall.hour in hours:
            first = wall.replace(tzinfo=tz).astimezone(UTC)
            sprung = first.astimezone(tz).replace(tzinfo=None) != wall
            fires.add(transition if sprung else first)
    return sorted(t for t in fires if after < t <= until)


def test_the_dashboard_cron_help_names_every_alias() -> None:
    """The cron field's help (ui/src/components/CronField.tsx) lists the aliases by hand."""
    from pathlib import Path

    field = Path(__file__).parents[2] / "ui" / "src" / "components" / "CronField.tsx"
    help_text = field.read_text()
    assert [alias for alias in ALIASES if alias not in help_text] == []
