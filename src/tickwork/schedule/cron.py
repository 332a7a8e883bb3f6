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
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from cronsim import CronSim, CronSimError

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
