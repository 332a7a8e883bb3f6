"""What a running handler may know about its attempt."""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from uuid import UUID

from tickwork.errors import JobCancelled
from tickwork.types import Job


@dataclass(slots=True)
class JobContext:
    """Passed as the first argument to tasks registered with ``pass_context=True``."""

    job: Job
    """The job as claimed (state RUNNING, ``attempts`` counts this attempt)."""
    execution_id: int
    """The live execution of this attempt."""
    worker_id: UUID
    """The worker process running it."""
    _cancel: threading.Event = field(default_factory=threading.Event)

    @property
    def attempt(self) -> int:
        """1-based number of this attempt."""
        return self.job.attempts

    @property
    def cancel_requested(self) -> bool:
        """True once the job's cancel was requested or this attempt lost its lease."""
        return self._cancel.is_set()

    def raise_if_cancelled(self) -> None:
        """Raise :class:`~tickwork.errors.JobCancelled` when a cancel was requested."""
        if self._cancel.is_set():
            raise JobCancelled(f"job {self.job.id} was cancelled")

    def wait_for_cancel(self, timeout: float | None = None) -> bool:
        """Block (in a sync handler) until cancelled or ``timeout``; True when cancelled."""
        return self._cancel.wait(timeout)
