"""What a task gives its jobs by default (queue, priority, attempts, timeout, backoff), and
the check of those options when a task is registered."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from tickwork.config import (
    DEFAULT_MAX_ATTEMPTS,
    DEFAULT_PRIORITY,
    DEFAULT_QUEUE,
    DEFAULT_TASK_TIMEOUT,
    QUEUE_NAME,
)
from tickwork.errors import EnqueueError, TaskDefinitionError
from tickwork.queue.backoff import Backoff, ExponentialBackoff
from tickwork.queue.enqueue import check_max_attempts, check_priority, check_queue, check_timeout


@dataclass(frozen=True, slots=True)
class TaskOptions:
    """Defaults a task gives its jobs; each may be overridden per job."""

    queue: str
    priority: int
    max_attempts: int
    timeout: float | None
    backoff: Backoff

    def stored(self) -> dict[str, Any]:
        """What a job takes from these options, as workers record them (JSON)."""
        return {
            "queue": self.queue,
            "priority": self.priority,
            "max_attempts": self.max_attempts,
            "timeout": self.timeout,
        }

    @classmethod
    def from_stored(cls, stored: Mapping[str, Any] | None) -> TaskOptions:
        """Options recorded by a worker (:meth:`stored`); what is missing takes the defaults
        of a task registered without options."""
        given = stored or {}
        return cls(
            queue=given.get("queue") or DEFAULT_QUEUE,
            priority=given.get("priority", DEFAULT_PRIORITY),
            max_attempts=given.get("max_attempts", DEFAULT_MAX_ATTEMPTS),
            timeout=given.get("timeout", DEFAULT_TASK_TIMEOUT),
            backoff=ExponentialBackoff(),
        )


def task_options(
    *,
    queue: str,
    priority: int,
    max_attempts: int,
    timeout: float | None,
    backoff: Backoff | None,
    name: str,
) -> TaskOptions:
    """Validate a task's options at registration, naming the task and the option."""
    try:
        if not QUEUE_NAME.match(queue):
            check_queue(queue)
        check_priority(priority)
        check_max_attempts(max_attempts)
        timeout = check_timeout(timeout)
    except EnqueueError as exc:
        raise TaskDefinitionError(f"task {name!r}: {exc}") from None
    if backoff is not None and not callable(backoff):
        raise TaskDefinitionError(
            f"task {name!r}: backoff ({backoff!r}) must be callable (attempt -> seconds)"
        )
    return TaskOptions(
        queue=queue,
        priority=priority,
        max_attempts=max_attempts,
        timeout=timeout,
        backoff=backoff or ExponentialBackoff(),
    )
