"""What one API process remembers about sessions it has checked, for at most a second.

An access token is honoured only while its session stands and its user holds the role it
names (see ``session_check``). The answer is kept per (user, session, role) for
:data:`SESSION_CACHE_TTL` seconds, so a burst of
requests costs one lookup; a revocation made here forgets the user's entries at once, and
one made by another process reaches this one by NOTIFY (and by the expiry, if that is lost).
"""

from __future__ import annotations

import time
from uuid import UUID

from tickwork.auth.roles import Role

SESSION_CACHE_TTL = 1.0
"""Seconds a session check's answer is reused: the longest a revocation made by another
process may go unnoticed when its notification is lost."""
SESSION_CACHE_MAX = 10_000
"""Entries kept at most; past it the cache starts over (each entry lives a second anyway)."""


class SessionCache:
    """Recent answers of the session check: None for a session that stands, else why not."""

    def __init__(self, ttl: float = SESSION_CACHE_TTL) -> None:
        self.ttl = ttl
        self._entries: dict[int, dict[tuple[UUID, Role], tuple[float, str | None]]] = {}
        self._size = 0

    def get(self, user_id: int, session: UUID, role: Role) -> tuple[bool, str | None]:
        """(found, answer) for a token of ``session`` naming ``role``: found False when
        nothing fresh is remembered. The role is part of the key: the answer for a token
        naming another role says nothing about this one."""
        entry = self._entries.get(user_id, {}).get((session, role))
        if entry is None or entry[0] <= time.monotonic():
            return False, None
        return True, entry[1]

    def put(self, user_id: int, session: UUID, role: Role, answer: str | None) -> None:
        if self._size >= SESSION_CACHE_MAX:
            self.clear()
        sessions = self._entries.setdefault(user_id, {})
        if (session, role) not in sessions:
            self._size += 1
        sessions[(session, role)] = (time.monotonic() + self.ttl, answer)

    def forget(self, user_id: int) -> None:
        """A session of this user changed: check each of theirs again."""
        self._size -= len(self._entries.pop(user_id, {}))

    def clear(self) -> None:
        self._entries.clear()
        self._size = 0
