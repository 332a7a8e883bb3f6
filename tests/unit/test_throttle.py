"""The per-process rate limit of webhooks: a sliding window per key, bounded memory."""

from __future__ import annotations

from tickwork.api.throttle import Limiter


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_calls_past_the_limit_wait_until_the_oldest_leaves_the_window() -> None:
    clock = Clock()
    limiter = Limiter(3, 60.0, clock=clock)
    assert [limiter.wait("a") for _ in range(3)] == [0.0, 0.0, 0.0]
    clock.now += 10
    assert limiter.wait("a") == 50.0  # refused calls are not counted
    assert limiter.wait("b") == 0.0  # another key has its own window
    clock.now += 50
    assert limiter.wait("a") == 0.0


def test_keys_past_the_bound_evict_the_least_recently_used() -> None:
    clock = Clock()
    limiter = Limiter(1, 60.0, max_keys=2, clock=clock)
    for key in ("a", "b", "c"):
        assert limiter.wait(key) == 0.0
    assert limiter.wait("a") == 0.0  # "a" was evicted: it starts afresh
    assert limiter.wait("c") == 60.0
