"""Retry delays. The default is exponential with jitter; every delay is bounded."""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Protocol

MAX_BACKOFF_SECONDS = 24 * 3600.0
"""No retry waits longer than this, whatever a policy computes."""

DEFAULT_BACKOFF_BASE = 1.0
DEFAULT_BACKOFF_FACTOR = 2.0
DEFAULT_BACKOFF_MAX = 3600.0
DEFAULT_BACKOFF_JITTER = 0.25


class Backoff(Protocol):
    """Seconds to wait before attempt ``attempt + 1`` after attempt ``attempt`` failed."""

    def __call__(self, attempt: int) -> float: ...


@dataclass(frozen=True, slots=True)
class ExponentialBackoff:
    """``base * factor ** (attempt - 1)``, capped at ``max_delay``, then +/- ``jitter``."""

    base: float = DEFAULT_BACKOFF_BASE
    factor: float = DEFAULT_BACKOFF_FACTOR
    max_delay: float = DEFAULT_BACKOFF_MAX
    jitter: float = DEFAULT_BACKOFF_JITTER

    def __post_init__(self) -> None:
        if self.base < 0:
            raise ValueError(f"backoff.base ({self.base}) must be >= 0")
        if self.factor < 1:
            raise ValueError(f"backoff.factor ({self.factor}) must be >= 1")
        if not 0 <= self.jitter <= 1:
            raise ValueError(f"backoff.jitter ({self.jitter}) must be between 0 and 1")

    def __call__(self, attempt: int) -> float:
        exponent = min(max(attempt - 1, 0), 64)  # beyond 2**64 every delay is capped anyway
        delay = min(self.base * self.factor**exponent, self.max_delay)
        return delay * (1 + random.uniform(-self.jitter, self.jitter))


@dataclass(frozen=True, slots=True)
class FixedBackoff:
    """The same delay before every retry."""

    delay: float

    def __post_init__(self) -> None:
        if self.delay < 0:
            raise ValueError(f"backoff.delay ({self.delay}) must be >= 0")

    def __call__(self, attempt: int) -> float:
        return self.delay


def retry_delay(policy: Backoff, attempt: int) -> float:
    """The policy's delay, bounded to ``[0, MAX_BACKOFF_SECONDS]`` (a bad policy cannot stall)."""
    try:
        delay = float(policy(attempt))
    except Exception:
        delay = ExponentialBackoff()(attempt)
    if delay != delay:  # NaN
        delay = 0.0
    return min(max(delay, 0.0), MAX_BACKOFF_SECONDS)
