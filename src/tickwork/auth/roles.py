"""Roles: three ordered levels of authority, stored by name."""

from __future__ import annotations

import enum

from tickwork.errors import InvalidInput


class Role(enum.IntEnum):
    """What a user (or a token) may do; a higher role may do everything a lower one may."""

    VIEWER = 1
    """Reads jobs, queues, schedules, workers and variables (not the audit trail)."""
    OPERATOR = 2
    """Also acts on jobs, queues and schedules (retry, cancel, pause, trigger) and reads
    the audit trail."""
    ADMIN = 3
    """Also manages users, invites, settings and secrets."""

    @classmethod
    def parse(cls, value: object, field: str = "role") -> Role:
        """A role from a :class:`Role` or its name (any case); else :class:`InvalidInput`."""
        if isinstance(value, Role):
            return value
        if isinstance(value, str) and value.upper() in cls.__members__:
            return cls[value.upper()]
        names = ", ".join(cls.__members__)
        raise InvalidInput(field, value, f"must be one of {names}")
