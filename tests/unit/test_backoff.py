from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tickwork import ExponentialBackoff, FixedBackoff
from tickwork.queue.backoff import MAX_BACKOFF_SECONDS, retry_delay


def test_exponential_without_jitter_doubles_then_caps() -> None:
    policy = ExponentialBackoff(base=1, factor=2, max_delay=10, jitter=0)
    assert [policy(a) for a in range(1, 7)] == [1, 2, 4, 8, 10, 10]


@given(st.integers(min_value=1, max_value=10_000))
def test_default_policy_is_bounded_and_jittered_around_the_curve(attempt: int) -> None:
    policy = ExponentialBackoff()
    delay = retry_delay(policy, attempt)
    nominal = min(policy.base * policy.factor ** min(attempt - 1, 64), policy.max_delay)
    assert nominal * (1 - policy.jitter) <= delay <= nominal * (1 + policy.jitter)
    assert 0 <= delay <= MAX_BACKOFF_SECONDS


def test_any_policy_result_is_clamped() -> None:
    assert retry_delay(lambda attempt: -5, 1) == 0
    assert retry_delay(lambda attempt: 10**12, 1) == MAX_BACKOFF_SECONDS
    assert retry_delay(lambda attempt: math.nan, 1) == 0
    assert retry_delay(FixedBackoff(7), 3) == 7


def test_broken_policy_falls_back_to_the_default() -> None:
    def broken(attempt: int) -> float:
        raise ZeroDivisionError

    assert 0 < retry_delay(broken, 1) <= 2


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"base": -1}, "backoff.base"),
        ({"factor": 0.5}, "backoff.factor"),
        ({"jitter": 2}, "jitter"),
    ],
)
def test_invalid_policies_are_refused(kwargs: dict[str, float], field: str) -> None:
    with pytest.raises(ValueError, match=field):
        ExponentialBackoff(**kwargs)
