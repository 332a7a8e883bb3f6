"""Cron expressions in a time zone: parsing (by cronsim) and the next fire time.

Accepted: standard 5 fields (``m h dom mon dow``), 6 fields with seconds first (``s m h dom
mon dow``, the Spring form, e.g. ``0 */10 * * * *``), and the aliases ``@yearly``
(``@annually``), ``@monthly``, ``@weekly``, ``@daily`` (``@midnight``), ``@hourly``.

Daylight-saving rules (local wall-clock time in the schedule's zone):
- a fire time that does not exist (the clock springs forward over it) fires once, at the
  first instant after the gap (02:30 on a night that jumps 02:00 → 03:00 fires at 03:00);
- a fire time that happens twice (the clock falls back) fires once, at its first occurrence,
  when the schedule names the hour; a schedule whose hour field is ``*`` (``*/15 * * * *``)
  keeps its real-time rhythm and fires in both passes of the repeated hour.
Fire times are returned in UTC.

How often: a schedule stored from now on may not fire more often than every
``scheduler.min_interval`` seconds (:meth:`CronSchedule.check_interval`); the default, 1 s,
is the finest a cron can say, and the scheduler honours it (docs/schedules.md).
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from cronsim import CronSim, CronSimError

from tickwork.config import DEFAULT_SCHEDULE_MIN_INTERVAL
from tickwork.errors import ScheduleError

ALIASES = {
    "@yearly": "0 0 1 1 *",
    "@annually": "0 0 1 1 *",
    "@monthly": "0 0 1 * *",
    "@weekly": "0 0 * * 0",
    "@daily": "0 0 * * *",
    "@midnight": "0 0 * * *",
    "@hourly": "0 * * * *",
}


MAX_TIMEZONE = 100
"""Characters of a time zone name at most (the longest IANA name has 32)."""
MIN_INTERVAL = DEFAULT_SCHEDULE_MIN_INTERVAL
"""Seconds between two fire times at least, by default: every second, the finest a cron can
say, which the scheduler honours (a job per fire time, created within a second of it)."""
GAP_SAMPLE = 250
"""Fire times looked at for the shortest gap between two (from :data:`GAP_FROM`)..."""
GAP_HORIZON = timedelta(days=800)
"""...within this much time (a cron of a few fire times a year needs no more)."""
GAP_FROM = datetime(2001, 1, 1)
"""Where the look starts (wall-clock time in the schedule's zone): a fixed instant, so the
answer is the same whenever it is asked."""


@dataclass(frozen=True, slots=True)
class CronSchedule:
    """A validated cron expression in an IANA time zone."""

    expression: str
    """As given (an alias stays an alias)."""
    timezone: str
    """IANA zone name, e.g. ``Europe/Berlin``."""
    _zone: ZoneInfo = field(repr=False, compare=False)
    _fields: str = field(repr=False, compare=False)

    @classmethod
    def parse(cls, expression: str, timezone: str = "UTC") -> CronSchedule:
        """Validate both; errors name the field and the value."""
        if not isinstance(expression, str) or not expression.strip():
            raise ScheduleError("cron", expression, "must be a non-empty cron expression")
        text = " ".join(expression.split())
        fields = ALIASES.get(text.lower(), text)
        if fields.startswith("@"):
            known = ", ".join(sorted(ALIASES))
            raise ScheduleError("cron", expression, f"is not a known alias ({known})")
        if len(fields.split()) not in (5, 6):
            raise ScheduleError(
                "cron", expression, "must have 5 fields (m h dom mon dow) or 6 (s m h dom mon dow)"
            )
        try:
            if len(timezone) > MAX_TIMEZONE:  # no file lookup for a name no zone has
                raise ValueError(timezone)
            zone = ZoneInfo(timezone)
        # OSError: a name too long for a file name, where the tzdata package is installed
        except (ZoneInfoNotFoundError, ValueError, TypeError, OSError):
            raise ScheduleError("timezone", timezone, "is not an IANA time zone name") from None
        try:
            CronSim(fields, datetime(2000, 1, 1, tzinfo=zone))
        except CronSimError as exc:
            raise ScheduleError("cron", expression, f"is invalid: {exc}") from None
        return cls(text, timezone, zone, fields)

    def shortest_gap(self) -> tuple[timedelta, datetime] | None:
        """The shortest time between two consecutive fire times, and the first fire time of
        that pair (UTC); None for a cron that fires at most once in :data:`GAP_HORIZON`. Read
        from the first :data:`GAP_SAMPLE` fire times from :data:`GAP_FROM`: a cron's gaps
        repeat with its minute, hour or day, so the short ones show there (a cron that fires
        every few seconds repeats its minute well within them)."""
        start = GAP_FROM.replace(tzinfo=self._zone).astimezone(UTC)
        until = start + GAP_HORIZON
        times = itertools.takewhile(lambda t: t <= until, self.iter_after(start))
        found: tuple[timedelta, datetime] | None = None
        for earlier, later in itertools.pairwise(itertools.islice(times, GAP_SAMPLE)):
            if found is None or later - earlier < found[0]:
                found = (later - earlier, earlier)
        return found

    def check_interval(self, min_interval: float = MIN_INTERVAL) -> CronSchedule:
        """This schedule, if no two of its fire times are less than ``min_interval`` seconds
        apart (``scheduler.min_interval``); else a :class:`ScheduleError` naming the limit."""
        if min_interval <= MIN_INTERVAL:
            return self  # no cron fires more often than every second
        found = self.shortest_gap()
        if found is not None and found[0].total_seconds() < min_interval:
            gap, at = found
            local = at.astimezone(self._zone).strftime("%H:%M:%S")
            raise ScheduleError(
                "cron",
                self.expression,
                f"fires {gap.total_seconds():g} s apart (from {local}); schedules fire at "
                f"most every {min_interval:g} s (scheduler.min_interval)",
            )
        return self

    def next_after(self, instant: datetime) -> datetime:
        """The first fire time strictly after ``instant`` (time-zone aware), in UTC."""
        if instant.tzinfo is None:
            raise ScheduleError("instant", instant, "must be time-zone aware")
        local = instant.astimezone(self._zone)
        fire = next(CronSim(self._fields, local))
        return fire.astimezone(UTC)

    def iter_after(self, instant: datetime) -> Iterator[datetime]:
        """Fire times strictly after ``instant``, in order, in UTC (endless)."""
        if instant.tzinfo is None:
            raise ScheduleError("instant", instant, "must be time-zone aware")
        for fire in CronSim(self._fields, instant.astimezone(self._zone)):
            yield fire.astimezone(UTC)

    def fire_times(self, after: datetime, until: datetime) -> list[datetime]:
        """Every fire time in ``(after, until]``, in UTC."""
        return list(itertools.takewhile(lambda t: t <= until, self.iter_after(after)))
