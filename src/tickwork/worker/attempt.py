"""One attempt: the record of an attempt in flight, how its handler is run (async on the
loop, sync in the worker's threads; a timeout or an interrupt is a cancellation of the runner
task), and how it ends (an :class:`Outcome`)."""

from __future__ import annotations

import asyncio
import contextvars
import functools
import json
import logging
import math
import traceback
from concurrent.futures import Executor
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from tickwork.errors import JobCancelled
from tickwork.limits import MAX_JSON_BYTES, cut, json_refusal, storable
from tickwork.types import ErrorInfo, ExecutionState, Job, JobState
from tickwork.worker.context import JobContext

if TYPE_CHECKING:
    from tickwork.task import Task

log = logging.getLogger("tickwork.worker")


@dataclass(slots=True)  # not frozen: one per attempt, and a frozen __init__ costs 4x more
class Outcome:
    """How one attempt ended, as this worker saw and recorded it."""

    job_id: int
    """The job."""
    execution_id: int
    """The attempt."""
    task: str
    """The task name."""
    execution_state: ExecutionState
    """The attempt's outcome (RELEASED when handed back at shutdown)."""
    job_state: JobState | None
    """The job's state after recording; None when the write was fenced off."""
    error: ErrorInfo | None = None
    """Why the attempt did not succeed."""

    @property
    def fenced(self) -> bool:
        """True when the attempt was no longer live, so its outcome was not recorded."""
        return self.job_state is None


@dataclass(slots=True)
class Attempt:
    """One attempt in flight: its job, the runner task it runs in, how it is interrupted."""

    job: Job
    execution_id: int
    is_async: bool
    ctx: JobContext | None = None  # only for tasks that take one
    runner: asyncio.Task[None] | None = None
    interrupted_for: str | None = None  # "cancel" | "lease_lost" | "lease_expired" | "shutdown"
    in_handler: bool = False  # the runner is inside the handler (interrupts land there)
    cancel_sent: bool = False  # the runner task was cancelled by interrupt()
    thread_result: asyncio.Future[Any] | None = None  # a sync handler's pending result
    cut: bool = False  # interrupted by shutdown: _drain releases it instead of recording
    started: float = 0.0  # monotonic start of the attempt (metrics)
    lease_until: float = math.inf  # monotonic: the lease surely ends after this (renewer)
    done: asyncio.Future[Outcome] | None = None  # set when recorded; only run_once awaits one

    def interrupt(self, reason: str) -> None:
        """Stop the handler for ``reason`` (once): an async handler gets CancelledError at its
        next await (it may catch it and finish); a sync handler cannot be interrupted and
        learns it from its context (at shutdown its runner stops waiting for it)."""
        if self.interrupted_for is not None:
            return
        self.interrupted_for = reason
        if self.ctx is not None:
            self.ctx._cancel.set()
        log.info(
            "interrupting attempt",
            extra={"job_id": self.job.id, "execution_id": self.execution_id, "reason": reason},
        )
        # Only a runner inside its handler is cancelled, so the cancellation lands there.
        finished_in_thread = self.thread_result is not None and self.thread_result.done()
        if (
            self.in_handler
            and not finished_in_thread  # its result is in: let the runner record it
            and self.runner is not None
            and (self.is_async or reason == "shutdown")
        ):
            self.cancel_sent = True
            self.runner.cancel()


async def run_handler(
    running: Attempt, task: Task[Any, Any] | None, threads: Executor | None
) -> tuple[ExecutionState, Any, ErrorInfo | None]:
    """Run the handler in this runner task (no task of its own); interrupts and the
    timeout arrive as cancellation of this task while it is inside the handler."""
    job = running.job
    if task is None:
        return (
            ExecutionState.FAILED,
            None,
            ErrorInfo(
                "tickwork.UnknownTask",
                f"no task named {job.task!r} is registered in this worker",
            ),
        )
    args: tuple[Any, ...] = (running.ctx,) if running.ctx is not None else ()
    scope = asyncio.timeout(job.timeout) if job.timeout is not None else _NO_TIMEOUT
    running.in_handler = True
    try:
        async with scope:
            if running.is_async:
                result = await task.in_worker(*args, **job.args)
            else:
                call = functools.partial(
                    contextvars.copy_context().run, task.in_worker, *args, **job.args
                )
                loop = asyncio.get_running_loop()
                running.thread_result = loop.run_in_executor(threads, call)
                result = await running.thread_result
    except asyncio.CancelledError:
        if not running.cancel_sent:
            raise  # not an interrupt of ours: the worker itself is being torn down
        running.cut = running.interrupted_for == "shutdown"
        if running.interrupted_for == "cancel":
            return (
                ExecutionState.CANCELLED,
                None,
                ErrorInfo("tickwork.JobCancelled", f"job {job.id} was cancelled while running"),
            )
        return (
            ExecutionState.FAILED,
            None,
            ErrorInfo(
                "asyncio.CancelledError", f"the attempt was interrupted ({running.interrupted_for})"
            ),
        )
    except TimeoutError as exc:
        if not scope.expired():
            return ExecutionState.FAILED, None, error_info(exc)  # the handler's own
        if running.ctx is not None:
            running.ctx._cancel.set()  # a sync handler that polls its context can stop
        return (
            ExecutionState.FAILED,
            None,
            ErrorInfo("tickwork.TaskTimeout", f"attempt exceeded its timeout of {job.timeout}s"),
        )
    except JobCancelled as exc:
        cancelled = running.interrupted_for == "cancel"
        return (
            (ExecutionState.CANCELLED if cancelled else ExecutionState.FAILED),
            None,
            error_info(exc),
        )
    except Exception as exc:
        return ExecutionState.FAILED, None, error_info(exc)
    finally:
        running.in_handler = False
        if running.cancel_sent:
            running.cancel_sent = False
            current = asyncio.current_task()
            if current is not None:
                current.uncancel()  # the interrupt was delivered and handled here
    if _plainly_json(result):
        return ExecutionState.SUCCEEDED, result, None
    try:  # refuse now what the batch could not encode, or could not be served back
        refusal = json_refusal(json.dumps(result, allow_nan=False), result)
    except (TypeError, ValueError, RecursionError) as bad:
        refusal = f"is not JSON-serialisable: {bad or 'nested too deep'}"
    if refusal is None:
        return ExecutionState.SUCCEEDED, result, None
    return (
        ExecutionState.FAILED,
        None,
        ErrorInfo("tickwork.ResultNotSerialisable", f"the task's return value {refusal}"),
    )


JOB_STATES = {state.value: state for state in JobState}
JOB_STATE_OF = {
    ExecutionState.SUCCEEDED: JobState.SUCCEEDED,
    ExecutionState.FAILED: JobState.FAILED,
    ExecutionState.CANCELLED: JobState.CANCELLED,
}
"""The job's state after an outcome, unless job_complete_many reports otherwise."""


class _NoTimeout:
    """Stands in for ``asyncio.timeout(None)`` without its per-attempt cost."""

    async def __aenter__(self) -> None:
        return None

    async def __aexit__(self, *exc: object) -> None:
        return None

    def expired(self) -> bool:
        return False


_NO_TIMEOUT = _NoTimeout()


def _plainly_json(value: Any) -> bool:
    """True for results that need no trial encoding (the common no-op and scalar cases)."""
    if value is None or value is True or value is False:
        return True
    kind = type(value)
    if kind is str:  # short enough that no escaping takes it past the limit, and plain text
        return len(value) <= MAX_JSON_BYTES // 6 and value.isascii() and "\x00" not in value
    return kind is int or (kind is float and math.isfinite(value))


def error_info(exc: BaseException) -> ErrorInfo:
    kind = type(exc)
    module = kind.__module__
    name = kind.__qualname__ if module == "builtins" else f"{module}.{kind.__qualname__}"
    if module.startswith("tickwork"):
        name = f"tickwork.{kind.__qualname__}"
    return ErrorInfo(  # storable: a NUL in an error's text would fail the outcome's batch
        type=name,
        message=storable(cut(str(exc))),
        traceback=storable(cut("".join(traceback.format_exception(exc)))),
    )
