"""A per-process rate limit by key: at most ``limit`` calls in any ``window`` seconds (a
sliding window). Keys beyond ``max_keys`` evict the least recently used, so a flood of
distinct keys (ids made up by a caller) costs bounded memory."""

from __future__ import annotations

import time
from collections import OrderedDict, deque
from collections.abc import Callable


class Limiter:
    """Counts calls per key; :meth:`wait` says how long until the next is allowed."""

    def __init__(
        self,
        limit: int,
        window: float = 60.0,
        *,
        max_keys: int = 10_000,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.limit = limit
        self.window = window
        self.max_keys = max_keys
        self.clock = clock
        self._calls: OrderedDict[object, deque[float]] = OrderedDict()

    def peek(self, key: object) -> float:
        """:meth:`wait` without counting a call: 0 when one would be allowed now."""
        now = self.clock()
        calls = self._calls.get(key)
        if calls is None:
            return 0.0
        while calls and calls[0] <= now - self.window:
            calls.popleft()
        return calls[0] + self.window - now if len(calls) >= self.limit else 0.0

    def wait(self, key: object) -> float:
        """0 when a call under ``key`` is allowed now (and counts it); else the seconds until
        one is (not counted)."""
        now = self.clock()
        calls = self._calls.pop(key, None) or deque()
        while calls and calls[0] <= now - self.window:
            calls.popleft()
        self._calls[key] = calls  # the most recently used last
        if len(self._calls) > self.max_keys:
            self._calls.popitem(last=False)
        if len(calls) >= self.limit:
            return calls[0] + self.window - now
        calls.append(now)
        return 0.0
