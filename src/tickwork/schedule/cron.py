"""Cron expressions in a time zone: parsing (by cronsim) and the next fire time.

Accepted: standard 5 fields (``m h dom mon dow``), 6 fields with seconds first (``s m h dom
mon dow``, the Spring form, e.g. ``0 */10 * * * *``), and the aliases ``@yearly``
(``@annually``), ``@monthly``, ``@weekly``, ``@daily`` (``@midnight``), ``@hourly``.

Daylight-saving rules (local wall-clock time in the schedule's zone), the same for 5 and 6
fields:
- a schedule that names its hour and minute (neither field starts with ``*``: ``30 2 * * *``,
  ``0 30 2 * * *``, ``*/10 30 2 * * *``) follows the wall clock: a fire time that does not
  exist (the clock springs forward over it) fires once, at the first instant after the gap
  (02:30 on a night that jumps 02:00 → 03:00 fires at 03:00), and a fire time that happens
  twice (the clock falls back) fires once, at its first occurrence;
- a schedule whose hour or minute field starts with ``*`` (``*/15 * * * *``, ``0 0 * * * *``,
  ``* 2 * * *``) keeps its real-time rhythm: it fires in both passes of a repeated hour and
  has no fires in a skipped one.
The first is cronsim's rule for 5 fields (Debian cron's), which cronsim does not apply to 6
fields; and cronsim's own stepping through a zone can miss an hour where the clock shifts by
30 min. So cronsim here only walks naive wall-clock times, and :meth:`CronSchedule.iter_after`
places them in the zone by these rules, for 5 and 6 fields alike. Fire times are returned in
UTC.

How often: a schedule stored from now on may not fire more often than every
``scheduler.min_interval`` seconds (:meth:`CronSchedule.check_interval`); the default, 1 s,
is the finest a cron can say, and the scheduler honours it (docs/schedules.md).
"""

from __future__ import annotations

import heapq
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
    _wall_clock: bool = field(repr=False, compare=False)
    """Whether fire times follow the wall clock through DST changes (see the module doc)."""

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
        minute, hour = fields.split()[-5:-3]
        wall_clock = not minute.startswith("*") and not hour.startswith("*")
        return cls(text, timezone, zone, fields, wall_clock)

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
        return next(self.iter_after(instant))

    def iter_after(self, instant: datetime) -> Iterator[datetime]:
        """Fire times strictly after ``instant``, in order, in UTC (endless)."""
        if instant.tzinfo is None:
            raise ScheduleError("instant", instant, "must be time-zone aware")
        # Walk naive wall-clock times (cronsim sees no DST) and place each in the zone: its
        # first occurrence (fold=0) and, on the real-time rule, its second (fold=1) as a
        # second walk, merged. Each walk starts at ``instant``'s wall time, or where its
        # readings pass ``instant`` when the clock falls back nearby. A gap's wall times all
        # land on its end, kept once by keeping only what is later than the last instant.
        zone, wall = self._zone, instant.astimezone(self._zone).replace(tzinfo=None)
        first_from = second_from = wall
        fall_back = _fall_back_near(instant, zone)
        if fall_back is not None:
            at, shift = fall_back
            repeat_from = at.astimezone(zone).replace(tzinfo=None) - timedelta(seconds=1)
            if at <= instant:  # the first pass is over: on from the end of the repeated time
                first_from = max(wall, repeat_from + shift)
            else:  # the second pass is still to come, from its start
                second_from = min(wall, repeat_from)
        places: Iterator[datetime]
        if self._wall_clock:
            places = (_first(w, zone) for w in CronSim(self._fields, first_from))
        else:
            places = heapq.merge(
                _reading(CronSim(self._fields, first_from), zone, 0),
                _reading(CronSim(self._fields, second_from), zone, 1),
            )
        last = instant
        for fire in places:
            if fire > last:
                last = fire
                yield fire

    def fire_times(self, after: datetime, until: datetime) -> list[datetime]:
        """Every fire time in ``(after, until]``, in UTC."""
        return list(itertools.takewhile(lambda t: t <= until, self.iter_after(after)))


ZERO = timedelta(0)
SHIFT_BOUND = timedelta(hours=3)
"""More than any clock change (the largest are 2 h), less than half the time between two."""


def _offset(instant: datetime, zone: ZoneInfo) -> timedelta:
    return instant.astimezone(zone).utcoffset() or ZERO


def _fall_back_near(instant: datetime, zone: ZoneInfo) -> tuple[datetime, timedelta] | None:
    """The instant the clock falls back within :data:`SHIFT_BOUND` of ``instant``, either
    side, and by how much; None if it does not."""
    early, late = instant - SHIFT_BOUND, instant + SHIFT_BOUND
    before, after = _offset(early, zone), _offset(late, zone)
    if after >= before:
        return None
    while late - early > timedelta(seconds=1):  # to the first second on the later offset
        middle = early + timedelta(seconds=(late - early).total_seconds() // 2)
        if _offset(middle, zone) < before:
            late = middle
        else:
            early = middle
    return late, before - after


def _first(wall: datetime, zone: ZoneInfo) -> datetime:
    """A wall-clock time at its first occurrence, or at the end of the gap it falls in."""
    first = wall.replace(tzinfo=zone, fold=0).astimezone(UTC)
    return first if _exists(first, wall, zone) else _gap_end(wall, zone)


def _reading(walls: Iterator[datetime], zone: ZoneInfo, fold: int) -> Iterator[datetime]:
    """The wall-clock times that exist, each at its first (``fold`` 0) or last (1)
    occurrence: in order either way."""
    for wall in walls:
        instant = wall.replace(tzinfo=zone, fold=fold).astimezone(UTC)
        if _exists(instant, wall, zone):
            yield instant


def _exists(instant: datetime, wall: datetime, zone: ZoneInfo) -> bool:
    """Whether ``instant`` reads ``wall`` on the clock in ``zone``."""
    return instant.astimezone(zone).replace(tzinfo=None) == wall


def _gap_end(wall: datetime, zone: ZoneInfo) -> datetime:
    """The first instant (UTC) after the gap in which ``wall`` falls, a wall-clock time the
    clock springs over in ``zone``."""
    # In a gap, fold=0 reads the wall time with the offset before the jump, which places it
    # after the jump, and fold=1 with the offset after, before it; the jump lies between.
    # Bisect on whole seconds for the first instant whose wall time is past ``wall``.
    before = wall.replace(tzinfo=zone, fold=1).astimezone(UTC)
    after = wall.replace(tzinfo=zone, fold=0).astimezone(UTC)
    while after - before > timedelta(seconds=1):
        middle = before + timedelta(seconds=(after - before).total_seconds() // 2)
        if middle.astimezone(zone).replace(tzinfo=None) > wall:
            after = middle
        else:
            before = middle
    return after
