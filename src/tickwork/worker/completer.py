"""Batched outcome writes: every finished attempt joins the next ``job_complete_many``.

No timer: while one batch is being written, the outcomes that finish meanwhile queue up and
go together in the next statement, the way group commit works. At low load each outcome is
written at once; under load the batch grows to ``max_batch`` and the cost per outcome falls.
Fencing is per row inside the statement, so batching changes nothing about correctness.

An attempt does not wait for its write: it hands its outcome over and ends, and the writer
reports each written batch back in one call, so a finished attempt costs no future and no
second wake-up of its task.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from tickwork.types import ErrorInfo, ExecutionState

log = logging.getLogger("tickwork.worker")

DEFAULT_COMPLETION_BATCH = 1000
"""Most outcomes written by one statement."""


@dataclass(slots=True)  # not frozen: one per attempt, and a frozen __init__ costs 4x more
class Completion:
    """One attempt's outcome, waiting to be written."""

    job_id: int
    execution_id: int
    state: ExecutionState
    result: Any
    """The handler's return value (already known to be JSON-serialisable)."""
    error: ErrorInfo | None
    retry_delay: float
    progress: dict[str, Any] | None = None
    """The handler's last ``ctx.progress`` report, stored with the outcome."""


Written = Callable[[list[Completion], dict[int, str | None]], None]
"""Called with a written batch and its exceptions, by execution id: the job's state where it
is not the one named like the attempt's outcome, None where the attempt was fenced off."""
Failed = Callable[[list[Completion], BaseException], None]
"""Called with a batch the database would not take (after the executor's own retries)."""
Write = Callable[[str], Awaitable[list[tuple[Any, ...]]]]
"""Writes one batch (its outcomes as one JSON array) with ``job_complete_many``; returns its
answer, tuples ``(execution id, job state or None)`` of the exceptions."""


class Completer:
    """Collects outcomes and writes them in batches, reporting each batch when committed."""

    def __init__(
        self,
        write: Write,
        written: Written,
        failed: Failed,
        *,
        max_batch: int = DEFAULT_COMPLETION_BATCH,
    ) -> None:
        self._write_batch = write
        self._written = written
        self._failed = failed
        self._max_batch = max_batch
        self._pending: list[Completion] = []
        self._writer: asyncio.Task[None] | None = None

    @property
    def idle(self) -> bool:
        """Nothing is waiting to be written or being written."""
        return not self._pending and (self._writer is None or self._writer.done())

    def submit(self, completion: Completion) -> None:
        """Queue one outcome for the next batch."""
        self._pending.append(completion)
        if self._writer is None or self._writer.done():
            self._writer = asyncio.create_task(self._write(), name="tickwork-complete")

    async def flush(self, timeout: float | None = None) -> bool:
        """Wait until every outcome submitted so far has been written (or has failed), at
        most ``timeout`` seconds; True when nothing is left to write."""
        deadline = None if timeout is None else asyncio.get_running_loop().time() + timeout
        while self._writer is not None and not self._writer.done():
            left = None if deadline is None else deadline - asyncio.get_running_loop().time()
            if left is not None and left <= 0:
                return False
            await asyncio.wait([self._writer], timeout=left)  # a cancelled caller leaves it be
        return True

    async def _write(self) -> None:
        await asyncio.sleep(0)  # let outcomes finishing in this same loop turn join the batch
        while self._pending:
            batch = self._pending[: self._max_batch]
            del self._pending[: self._max_batch]
            try:
                found = await self._write_batch(_outcomes(batch))
            except Exception as exc:
                self._report(self._failed, batch, exc)
                continue
            self._report(self._written, batch, {row[0]: row[1] for row in found})

    @staticmethod
    def _report(
        to: Callable[[list[Completion], Any], None], batch: list[Completion], what: Any
    ) -> None:
        try:
            to(batch, what)
        except Exception:  # a failing report must not stop the writer: outcomes keep coming
            log.exception("reporting written outcomes failed", extra={"outcomes": len(batch)})


def _outcomes(batch: list[Completion]) -> str:
    # One JSON document for the batch: encoded in C here, decoded by the server, far
    # cheaper than one array parameter per column.
    return json.dumps([_outcome(c) for c in batch], separators=(",", ":"))


def _outcome(c: Completion) -> dict[str, Any]:
    outcome = {
        "job_id": c.job_id,
        "execution_id": c.execution_id,
        "outcome": c.state.value,
        "result": c.result,
        "error": _error_json(c.error) if c.error else None,
        "retry_delay": c.retry_delay,
    }
    if c.progress is not None:  # most outcomes carry none: the key is left out
        outcome["progress"] = c.progress
    return outcome


def _error_json(error: ErrorInfo) -> dict[str, str]:
    return {"type": error.type, "message": error.message, "traceback": error.traceback}
