"""What a running handler may know about its attempt."""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any
from uuid import UUID

from tickwork.errors import JobCancelled
from tickwork.types import Job
from tickwork.worker.progress import progress_value


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
    _report: Callable[[dict[str, Any]], None] | None = None
    last_progress: dict[str, Any] | None = None
    """The latest report made with :meth:`progress` (as stored, without its time)."""

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

    def progress(
        self, current: float, total: float | None = None, message: str | None = None
    ) -> None:
        """Report how far the attempt has got: ``ctx.progress(3, 10, "resizing")``.

        Cheap to call often (from async or sync handlers): the worker stores the latest
        report within about half a second, and once more when the attempt ends; the API
        (``progress`` of a job) and ``tickwork jobs show`` show it. Numbers are finite and
        not negative (a total of 0 shows no fraction); the message is cut at 500 characters.
        """
        self._keep(progress_value(current, total, message, self.attempt))

    def output(self, stdout: str, stderr: str, written: int) -> None:
        """Report a running script's output so far (the tails of stdout and stderr, secrets
        masked, and the bytes written in all), stored as its progress: the dashboard and
        ``tickwork jobs show`` show it while the script runs. The script runtime calls this."""
        self._keep(
            progress_value(
                written, None, "output", self.attempt, {"stdout": stdout, "stderr": stderr}
            )
        )

    def _keep(self, value: dict[str, Any]) -> None:
        self.last_progress = value
        if self._report is not None:
            self._report(value)
