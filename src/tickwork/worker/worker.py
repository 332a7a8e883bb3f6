"""The worker: claim a batch, run handlers, renew leases, record outcomes (fenced).

Data flow: the claim loop asks ``job_claim`` for as many jobs as it has free slots and starts
one asyncio task per attempt; the handler runs inside that task (async handlers on the event
loop, sync handlers in a bounded thread pool), so a cancel or a timeout is a cancellation of
it. Outcomes go to the completer, which writes them in batches with ``job_complete_many``;
that statement changes nothing for an attempt that is no longer live. The lease renewer
extends every in-flight lease in one statement per interval and learns of cancel requests and
lost leases from its answer; the listener wakes the claim loop on NOTIFY and forwards cancel
requests at once.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import functools
import json
import logging
import math
import os
import random
import socket
import time
import traceback
import uuid
from collections.abc import Awaitable, Callable, Coroutine
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeVar

import psycopg
from psycopg import sql
from psycopg_pool import AsyncConnectionPool
from pydantic import ValidationError

from tickwork import metrics
from tickwork.config import WorkerSettings, describe
from tickwork.db.database import POOL_RECONNECT_TIMEOUT
from tickwork.db.store import AsyncConn
from tickwork.errors import ConfigError, JobCancelled
from tickwork.leases import LeaseManager, Role
from tickwork.limits import MAX_JSON_BYTES, cut, json_refusal
from tickwork.periodic import raise_if_cancelled, run_periodically, wait_for_stop
from tickwork.queue import rows as decode
from tickwork.queue.backoff import retry_delay
from tickwork.queue.retention import Retention
from tickwork.queue.watchdog import Watchdog
from tickwork.types import ErrorInfo, ExecutionState, Job, JobState
from tickwork.worker.completer import Completer, Completion
from tickwork.worker.context import JobContext
from tickwork.worker.progress import PROGRESS_INTERVAL, ProgressBuffer
from tickwork.worker.threads import HandlerThreads

if TYPE_CHECKING:
    from tickwork.app import App
    from tickwork.schedule.scheduler import SchedulerService
    from tickwork.task import Task

log = logging.getLogger("tickwork.worker")
_T = TypeVar("_T")

LOGGED_ERROR_CHARS = 500
"""A failed attempt's log line carries this much of its error message (the stored error, on
the job's page, has all of it up to the storage limit)."""
CLAIM_RETRY_DELAY = 1.0
"""Seconds, at most, before a claim that failed (the database out of reach, say) is tried
again."""
COMPLETE_RETRY_FIRST_DELAY = 0.1
"""First pause before retrying an outcome write the database refused (doubles each time)."""
RECONNECT_MAX_DELAY = 5.0
"""Longest pause between attempts to re-open the listen connection."""
POOL_WAIT = 5.0
"""Seconds a claim or an outcome write waits for a pooled connection before it fails (and
is tried again). A pool that gave up reconnecting during an outage connects again only when
asked anew: a claim still waiting from before would otherwise wait out psycopg_pool's 30 s
default after the database is back (measured: 26 s from restore to the next finished job)."""
SHUTDOWN_SETTLE_TIMEOUT = 2.0
"""After the grace period, how long interrupted attempts get to unwind before release."""
CLAIMS_IN_FLIGHT = 2
"""Most claims one worker has on the database at once; each takes at most its share of the
slots, so the next batch is being claimed while the last one is being started."""

# The batch statements take arrays whose length varies from 1 to thousands; a cached generic
# plan chosen for one size can be orders of magnitude slower for another (lease renewal of
# 5,000 attempts: 46 ms planned for its arrays, 450 ms generic), so every execution is
# planned for its actual parameters (planning costs well under 1 ms).
WORKER_SERVER_SETTINGS = {"plan_cache_mode": "force_custom_plan"}
# The claim reaches jobs by primary key from its own index scan, so one generic plan serves
# 1 row and 1,000 alike (measured: the same time for 1,000), and an idle worker's one-job
# claim skips its 0.4 ms of planning: pickup latency is mostly this statement.
CLAIM_SERVER_SETTINGS = {"plan_cache_mode": "force_generic_plan"}


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


@dataclass(frozen=True, slots=True)
class RunOnceResult:
    """What one :meth:`Worker.run_once` did."""

    outcomes: list[Outcome] = field(default_factory=list)
    """One entry per attempt claimed."""

    @property
    def claimed(self) -> int:
        """Number of jobs claimed."""
        return len(self.outcomes)


@dataclass(slots=True)
class _Running:
    job: Job
    execution_id: int
    is_async: bool
    ctx: JobContext | None = None  # only for tasks that take one
    runner: asyncio.Task[None] | None = None
    interrupt: str | None = None  # "cancel" | "lease_lost" | "shutdown"
    in_handler: bool = False  # the runner is inside the handler (interrupts land there)
    cancel_sent: bool = False  # the runner task was cancelled by _interrupt
    thread_result: asyncio.Future[Any] | None = None  # a sync handler's pending result
    cut: bool = False  # interrupted by shutdown: _drain releases it instead of recording
    started: float = 0.0  # monotonic start of the attempt (metrics)
    done: asyncio.Future[Outcome] | None = None  # set when recorded; only run_once awaits one


class Worker:
    """Claims jobs from ``queues`` and runs up to ``concurrency`` of them at once."""

    def __init__(
        self,
        app: App,
        *,
        queues: list[str] | None = None,
        concurrency: int | None = None,
        poll_interval: float | None = None,
        lease_ttl: float | None = None,
        lease_renew_interval: float | None = None,
        watchdog_interval: float | None = None,
        watchdog_batch: int | None = None,
        shutdown_grace: float | None = None,
        run_watchdog: bool = True,
        run_executor: bool = True,
        run_scheduler: bool | None = None,
        run_retention: bool | None = None,
        leases: LeaseManager | None = None,
        on_finished: Callable[[Outcome], None] | None = None,
    ) -> None:
        given = {
            "queues": queues,
            "concurrency": concurrency,
            "poll_interval": poll_interval,
            "lease_ttl": lease_ttl,
            "lease_renew_interval": lease_renew_interval,
            "watchdog_interval": watchdog_interval,
            "watchdog_batch": watchdog_batch,
            "shutdown_grace": shutdown_grace,
        }
        merged = app.settings.worker.model_dump() | {
            k: v for k, v in given.items() if v is not None
        }
        try:
            self.settings = WorkerSettings.model_validate(merged)
        except ValidationError as exc:
            raise ConfigError("invalid worker options: " + describe(exc, "worker")) from None
        self.app = app
        self.id = uuid.uuid4()
        self.actor = f"worker:{self.id}"
        self.run_watchdog = run_watchdog
        self.run_executor = run_executor
        """False: only the background services (watchdog, scheduler, retention) run."""
        self.run_scheduler = (
            app.settings.scheduler.enabled if run_scheduler is None else run_scheduler
        )
        """Host the scheduler tick (SCHEDULER lease); default: ``scheduler.enabled``."""
        self.run_retention = (
            app.settings.retention.enabled if run_retention is None else run_retention
        )
        """Host retention (RETENTION lease); default: ``retention.enabled``."""
        self.leases = leases
        """The process's lease manager (given by a host that runs its heartbeat, or made by
        :meth:`run` when the worker hosts a singleton)."""
        self.on_finished = on_finished
        self.store = app.db.store
        self._inflight: dict[int, _Running] = {}
        self._pool: AsyncConnectionPool[Any] | None = None
        self._claim_pool: AsyncConnectionPool[Any] | None = None  # job_claim only
        self._threads: HandlerThreads | None = None
        self._wake = asyncio.Event()
        self._stop = asyncio.Event()
        self._drained = asyncio.Event()  # shutdown past the drain: the lease loops end
        self._background: list[asyncio.Task[None]] = []
        self._capacity_bound = False  # the last claim came back full: the queue may hold more
        self._busy = 0  # attempts whose handler has not returned yet (their slots are taken)
        self._reserved = 0  # slots promised to claims in flight
        self._claiming = 0  # claims in flight
        self._claim_owed = False  # the claim loop was woken but could not claim yet
        self.watchdog: Watchdog | None = None
        self.retention: Retention | None = None
        self.scheduler_service: SchedulerService | None = None
        self._completer = Completer(self._complete_many, self._written, self._not_written)
        self._progress = ProgressBuffer()
        self.listening = asyncio.Event()
        """Set while the LISTEN connection is up (cleared when it drops)."""

    @property
    def _claim_batch(self) -> int:
        return max(1, -(-self.concurrency // CLAIMS_IN_FLIGHT))

    @property
    def queues(self) -> list[str]:
        """Queues this worker claims from."""
        return self.settings.queues

    @property
    def concurrency(self) -> int:
        """Most attempts running at once."""
        return self.settings.concurrency

    @property
    def task_names(self) -> list[str]:
        """Tasks this worker claims: those registered in its App (none without an executor).
        Jobs of other tasks wait for a worker that has them."""
        return sorted(self.app.tasks) if self.run_executor else []

    def _task_options(self) -> str:
        """JSON of what this worker's tasks give their jobs, by task name."""
        tasks = self.app.tasks
        return json.dumps({name: tasks[name].options.stored() for name in self.task_names})

    @property
    def in_flight(self) -> int:
        """Attempts running now."""
        return len(self._inflight)

    @property
    def handlers_running(self) -> int:
        """Sync handlers running in a thread now, released attempts' included: a sync
        handler cannot be interrupted, only waited for (idle threads are not counted)."""
        return 0 if self._threads is None else self._threads.running

    # -- lifecycle ----------------------------------------------------------------------

    async def __aenter__(self) -> Worker:
        await self.open()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def open(self) -> None:
        """Open the pool and register this worker; no jobs are claimed yet."""
        if self._pool is not None:
            return
        url = await asyncio.to_thread(lambda: self.app.db.url)
        self._url = url
        self._pool = AsyncConnectionPool(
            url,
            min_size=1,
            max_size=min(self.concurrency, 8) + 3,
            kwargs=self.app.db.connection_kwargs(url, **WORKER_SERVER_SETTINGS),
            timeout=POOL_WAIT,
            reconnect_timeout=POOL_RECONNECT_TIMEOUT,
            open=False,
            name=f"tickwork-worker-{self.id}",
        )
        self._claim_pool = AsyncConnectionPool(
            url,
            min_size=1,
            max_size=CLAIMS_IN_FLIGHT,
            kwargs=self.app.db.connection_kwargs(url, **CLAIM_SERVER_SETTINGS),
            timeout=POOL_WAIT,
            reconnect_timeout=POOL_RECONNECT_TIMEOUT,
            open=False,
            name=f"tickwork-claim-{self.id}",
        )
        await self._pool.open(wait=True)
        await self._claim_pool.open(wait=True)
        self._threads = HandlerThreads(self.concurrency, thread_name_prefix="tickwork-task")
        self.retention = Retention(self._pool, self.store, self.app.settings.retention)
        self.watchdog = Watchdog(
            self._pool,
            self.store,
            actor=f"watchdog:{self.id}",
            interval=self.settings.watchdog_interval,
            batch=self.settings.watchdog_batch,
        )
        await self._pooled(
            lambda conn: self.store.worker_register(
                conn,
                worker_id=self.id,
                host=socket.gethostname(),
                pid=os.getpid(),
                queues=self.queues,
                concurrency=self.concurrency,
                tasks=self.task_names,
                task_options=self._task_options(),
            )
        )
        log.info(
            "worker started",
            extra={
                "worker_id": str(self.id),
                "queues": ",".join(self.queues),
                "concurrency": self.concurrency,
            },
        )

    async def close(self) -> None:
        """Mark this worker stopped and close its pool."""
        if self._pool is None:
            return
        try:
            await self._pooled(lambda conn: self.store.worker_stop(conn, worker_id=self.id))
        except psycopg.Error as exc:
            log.warning("could not mark worker stopped", extra={"error": str(exc)})
        await self._pool.close()
        self._pool = None
        if self._claim_pool is not None:
            await self._claim_pool.close()
            self._claim_pool = None
        if self._threads is not None:
            self._threads.shutdown(wait=False, cancel_futures=True)
        log.info("worker stopped", extra={"worker_id": str(self.id)})

    def request_stop(self, *, immediate: bool = False) -> None:
        """Stop claiming; in-flight attempts get the grace period (none if ``immediate``)."""
        if immediate:
            self.settings = self.settings.model_copy(update={"shutdown_grace": 0.0})
        self._stop.set()
        self._wake.set()

    async def run(self) -> None:
        """Claim and run jobs until :meth:`request_stop`; then shut down gracefully."""
        await self.open()
        self._background = [
            asyncio.create_task(self._listen_loop(), name="tickwork-listen"),
            asyncio.create_task(self._renew_loop(), name="tickwork-renew"),
            asyncio.create_task(
                run_periodically(  # on through the drain, as the renewals
                    self._write_progress,
                    interval=PROGRESS_INTERVAL,
                    stop=self._drained,
                    log=log,
                    name="progress write",
                ),
                name="tickwork-progress",
            ),
        ]
        if self.run_watchdog and self.watchdog is not None:
            self._background.append(
                asyncio.create_task(self.watchdog.run(self._stop), name="tickwork-watchdog")
            )
        try:  # a start of the singletons that fails or is cancelled still ends the loops
            await self._start_singletons()
            if self.run_executor:
                await self._claim_loop()
            else:
                await self._stop.wait()
        finally:
            try:
                await self._drain()
            finally:  # a drain that failed (the database is down) still ends the loops
                await self._stop_background()
                await self.close()

    async def _start_singletons(self) -> None:
        """Start the lease-gated services this worker hosts (the scheduler, retention) on
        the process's lease manager: the one given, or one of its own whose heartbeat it
        runs."""
        assert self._pool is not None, "worker is not open"
        settings = self.app.settings
        leases = self.leases
        if leases is None:
            leases = self.leases = LeaseManager(self._pool, self.store, settings.leases, [])
            own = True
        else:
            own = False
        services: list[tuple[str, Coroutine[Any, Any, None]]] = []
        if self.run_scheduler:
            self.scheduler_service = self.app.scheduler_service(self._pool, leases)
            await self.scheduler_service.scheduler.sync(
                list(self.app.schedules.values()), defined_by=self.id
            )
            services.append(("tickwork-scheduler", self.scheduler_service.run(self._stop)))
        if self.run_retention and self.retention is not None:
            leases.compete([Role.RETENTION], settings.leases)
            retention = run_periodically(
                leases.gate(Role.RETENTION, self.retention.run_once),
                interval=settings.retention.interval,
                stop=self._stop,
                log=log,
                name="retention pass",
            )
            services.append(("tickwork-retention", retention))
        if not leases.roles:
            return
        # take the leases before the services' first pass, which would otherwise find them
        # not held and wait a whole interval (the heartbeat tries again after a failure)
        with contextlib.suppress(psycopg.Error, OSError):
            await leases.run_once()
        for name, service in services:
            self._background.append(asyncio.create_task(service, name=name))
        if own:
            self._background.append(
                asyncio.create_task(leases.run(self._stop), name="tickwork-leases")
            )

    async def run_once(self) -> RunOnceResult:
        """Claim up to ``concurrency`` jobs, run them all to the end, record the outcomes."""
        await self.open()
        claimed = await self._claim(self.concurrency)
        loop = asyncio.get_running_loop()
        attempts = [self._start(row, loop.create_future()) for row in claimed]
        try:
            return RunOnceResult(list(await asyncio.gather(*(a.done for a in attempts if a.done))))
        except asyncio.CancelledError:
            for attempt in attempts:  # the caller gave up: so do the handlers
                if attempt.runner is not None:
                    attempt.runner.cancel()
            raise

    # -- claiming -----------------------------------------------------------------------

    async def _claim_loop(self) -> None:
        # Up to CLAIMS_IN_FLIGHT claims run at once, each for at most half the slots: while
        # the worker starts one batch's attempts (CPU here), the next claim is already on
        # the database, instead of the two taking turns.
        claims: set[asyncio.Task[None]] = set()
        loop = asyncio.get_running_loop()
        try:
            while not self._stop.is_set():
                self._wake.clear()
                free = self._free_slots()
                # Whatever woke this pass (a NOTIFY, a freed slot) is owed a claim that starts
                # after it: if none can start now, the claim in flight, a freed slot or a
                # written batch wakes the loop again instead of the wake being used up.
                self._claim_owed = True
                while free > 0 and (
                    not self._claiming
                    or (self._claiming < CLAIMS_IN_FLIGHT and self._capacity_bound)
                ):
                    self._claim_owed = False
                    limit = min(free, self._claim_batch)
                    self._reserved += limit
                    self._claiming += 1
                    free -= limit
                    claim = asyncio.create_task(self._claim_and_start(limit))
                    claims.add(claim)
                    claim.add_done_callback(claims.discard)
                if self._stop.is_set():
                    break
                # the poll interval is a timer that wakes the loop like a notification would
                # (wait_for would wrap the wait in a task of its own on every pass)
                poll = loop.call_later(self._poll_delay(), self._wake.set)
                try:
                    await self._wake.wait()
                finally:
                    poll.cancel()
        finally:
            if claims:  # their rows are started, so the shutdown drain sees them
                await asyncio.wait(claims)

    def _free_slots(self) -> int:
        # An attempt whose handler returned holds no slot while its outcome waits for the
        # write, up to one concurrency's worth of such outcomes; beyond that claims wait for
        # the writes, so a database slower to record than to hand out work cannot make the
        # backlog of unwritten outcomes (and the memory holding them) grow without bound.
        unwritten = len(self._inflight) - self._busy
        backlog = max(0, unwritten - self.concurrency)
        return self.concurrency - self._busy - self._reserved - backlog

    async def _claim_and_start(self, limit: int) -> None:
        claimed: list[tuple[Job, int, float]] = []
        try:
            claimed = await self._claim(limit)
        except Exception as exc:  # jobs a failed decode left RUNNING go back via the watchdog
            # the notification that asked for this claim is used up: claim again soon rather
            # than at the poll interval, which may be long (a wake may come sooner)
            retry_in = min(self.settings.poll_interval, CLAIM_RETRY_DELAY)
            log.error("claim failed; retrying", extra={"error": str(exc), "retry_in": retry_in})
            self._capacity_bound = False
            asyncio.get_running_loop().call_later(retry_in, self._wake.set)
            return
        finally:
            # counted out here, not by the task's done callback: the wake below resumes the
            # claim loop before that callback runs, and a pass that still counted this claim
            # would leave the wake it is owed unclaimed
            self._reserved -= limit
            self._claiming -= 1
            if self._claim_owed:
                self._wake.set()
        for row in claimed:
            self._start(row)
        # A full batch: the queue may hold more, so claim again as soon as slots free up.
        self._capacity_bound = len(claimed) == limit
        if self._capacity_bound:
            self._wake.set()

    def _poll_delay(self) -> float:
        return self.settings.poll_interval * random.uniform(0.9, 1.1)

    async def _claim(self, limit: int) -> list[tuple[Job, int, float]]:
        """Claim up to ``limit`` jobs: (job, execution id, seconds it waited after it was due)."""
        assert self._claim_pool is not None, "worker is not open"
        if not self.app.tasks:
            return []  # e.g. `serve` without an app: no job is for this worker
        async with self._claim_pool.connection() as conn:
            rows = await self.store.job_claim(
                conn,
                queues=self.queues,
                tasks=list(self.app.tasks),
                limit=limit,
                worker_id=self.id,
                lease_ttl=self.settings.lease_ttl,
            )
        return decode.claimed(rows)

    def _start(
        self, claimed: tuple[Job, int, float], done: asyncio.Future[Outcome] | None = None
    ) -> _Running:
        job, execution_id, waited = claimed
        task = self.app.tasks.get(job.task)
        running = _Running(job, execution_id, is_async=task is not None and task.is_async)
        running.done = done
        if task is not None and task.pass_context:
            running.ctx = JobContext(
                job=job,
                execution_id=execution_id,
                worker_id=self.id,
                _report=functools.partial(self._progress.report, job.id, execution_id),
            )
        self._inflight[execution_id] = running
        running.started = time.monotonic()
        metrics.picked_up(job.queue, waited)
        self._busy += 1
        running.runner = asyncio.create_task(self._attempt(running, task))
        return running

    # -- running one attempt ------------------------------------------------------------

    async def _attempt(self, running: _Running, task: Task[Any, Any] | None) -> None:
        job = running.job
        try:
            try:
                state, result, error = await self._invoke(running, task)
            finally:
                # The slot frees when the handler returns, not when its outcome is written:
                # the next claim then overlaps with the previous batch's outcome write.
                self._busy -= 1
                if self._capacity_bound or self._claim_owed:
                    self._wake.set()
        except BaseException as exc:
            self._inflight.pop(running.execution_id, None)  # the worker is being torn down
            if running.done is not None and not running.done.done():
                running.done.set_exception(exc)
            raise
        if running.cut:
            # handed back by _drain with execution_release_many, not recorded here
            if running.done is not None and not running.done.done():
                running.done.set_result(
                    Outcome(
                        job.id, running.execution_id, job.task, ExecutionState.RELEASED, None, error
                    )
                )
            return
        progress = None
        if running.ctx is not None and running.ctx.last_progress is not None:
            progress = running.ctx.last_progress  # written with the outcome, fenced alike
            self._progress.take(running.execution_id)  # so not a second time on its own
        delay = 0.0
        if state is ExecutionState.FAILED and task is not None:
            delay = retry_delay(task.options.backoff, job.attempts)
        # Even after a lost lease the write is attempted: the statement fences it off. The
        # attempt ends here; _written finishes it once the batch holding it has committed.
        self._completer.submit(
            Completion(job.id, running.execution_id, state, result, error, delay, progress)
        )

    def _written(self, batch: list[Completion], exceptions: dict[int, str | None]) -> None:
        if self._capacity_bound or self._claim_owed:
            self._wake.set()  # slots held back by the backlog of unwritten outcomes free up
        for completion in batch:
            running = self._inflight.pop(completion.execution_id, None)
            if running is None:
                continue  # released at shutdown meanwhile
            try:
                self._written_one(running, completion, exceptions)
            except Exception:  # one attempt's report must not strand the rest of the batch
                log.exception("finishing an attempt failed", extra={"job_id": completion.job_id})

    def _written_one(
        self, running: _Running, completion: Completion, exceptions: dict[int, str | None]
    ) -> None:
        if completion.execution_id not in exceptions:  # the job's state is the outcome's
            job_state: JobState | None = _JOB_STATE_OF[completion.state]
        elif (state := exceptions[completion.execution_id]) is not None:
            job_state = _JOB_STATES[state]
        else:
            job_state = None
            log.warning(
                "attempt was fenced off: its execution is no longer live",
                extra={"job_id": completion.job_id, "execution_id": completion.execution_id},
            )
        self._finished(running, completion.state, job_state, completion.error)

    def _not_written(self, batch: list[Completion], exc: BaseException) -> None:
        # The watchdog reclaims these attempts once their leases expire; they run again.
        log.error(
            "could not record outcomes; their attempts will be reclaimed",
            extra={"outcomes": len(batch), "error": str(exc)},
        )
        for completion in batch:
            running = self._inflight.pop(completion.execution_id, None)
            if running is not None and running.done is not None and not running.done.done():
                running.done.set_exception(exc)

    def _finished(
        self,
        running: _Running,
        state: ExecutionState,
        job_state: JobState | None,
        error: ErrorInfo | None,
    ) -> None:
        job = running.job
        metrics.attempt_finished(
            job.task,
            state.value,
            time.monotonic() - running.started,
            job_state is JobState.DEAD_LETTER,
        )
        level = logging.DEBUG if state is ExecutionState.SUCCEEDED else logging.WARNING
        if log.isEnabledFor(level):
            fields: dict[str, Any] = {
                "job_id": job.id,
                "execution_id": running.execution_id,
                "task": job.task,
                "queue": job.queue,
                "attempt": job.attempts,
                "outcome": state.value,
                "job_state": job_state.value if job_state else "FENCED",
            }
            if error is not None:  # why it failed: the type and the start of the message
                fields["error_type"] = error.type
                fields["error"] = cut(error.message, LOGGED_ERROR_CHARS)
            log.log(level, "attempt finished", extra=fields)
        if self.on_finished is None and running.done is None:
            return
        outcome = Outcome(job.id, running.execution_id, job.task, state, job_state, error)
        if self.on_finished is not None:
            try:
                self.on_finished(outcome)
            except Exception:
                log.exception("on_finished hook failed", extra={"job_id": job.id})
        if running.done is not None and not running.done.done():
            running.done.set_result(outcome)

    async def _invoke(
        self, running: _Running, task: Task[Any, Any] | None
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
                    result = await task.fn(*args, **job.args)
                else:
                    call = functools.partial(
                        contextvars.copy_context().run, task.fn, *args, **job.args
                    )
                    loop = asyncio.get_running_loop()
                    running.thread_result = loop.run_in_executor(self._threads, call)
                    result = await running.thread_result
        except asyncio.CancelledError:
            if not running.cancel_sent:
                raise  # not an interrupt of ours: the worker itself is being torn down
            running.cut = running.interrupt == "shutdown"
            if running.interrupt == "cancel":
                return (
                    ExecutionState.CANCELLED,
                    None,
                    ErrorInfo("tickwork.JobCancelled", f"job {job.id} was cancelled while running"),
                )
            return (
                ExecutionState.FAILED,
                None,
                ErrorInfo(
                    "asyncio.CancelledError", f"the attempt was interrupted ({running.interrupt})"
                ),
            )
        except TimeoutError as exc:
            if not scope.expired():
                return ExecutionState.FAILED, None, _error(exc)  # the handler's own
            if running.ctx is not None:
                running.ctx._cancel.set()  # a sync handler that polls its context can stop
            return (
                ExecutionState.FAILED,
                None,
                ErrorInfo(
                    "tickwork.TaskTimeout", f"attempt exceeded its timeout of {job.timeout}s"
                ),
            )
        except JobCancelled as exc:
            cancelled = running.interrupt == "cancel"
            return (
                (ExecutionState.CANCELLED if cancelled else ExecutionState.FAILED),
                None,
                _error(exc),
            )
        except Exception as exc:
            return ExecutionState.FAILED, None, _error(exc)
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

    # -- progress -----------------------------------------------------------------------

    async def _write_progress(self, execution_id: int | None = None) -> None:
        """Store the pending progress reports (of one attempt, or of all) in one statement;
        on a database error they stay pending for the next pass."""
        reports = self._progress.take(execution_id)
        if not reports:
            return
        try:
            await self._pooled(
                lambda conn: self.store.job_progress_many(conn, reports=json.dumps(reports))
            )
        except psycopg.DataError as exc:  # not for the database to store: never retried
            log.warning(
                "progress reports refused", extra={"reports": len(reports), "error": str(exc)}
            )
        except BaseException:
            self._progress.put_back(reports)
            raise

    # -- leases, cancels, wake-ups ------------------------------------------------------

    async def renew_leases(self) -> None:
        """Extend the leases of every in-flight attempt; react to cancels and lost leases."""
        await self._pooled(
            lambda conn: self.store.worker_heartbeat(
                conn,
                worker_id=self.id,
                tasks=self.task_names,
                task_options=self._task_options(),
            )
        )
        ids = list(self._inflight)
        if not ids:
            return
        job_ids = [self._inflight[i].job.id for i in ids if i in self._inflight]
        found = await self._pooled(
            lambda conn: self.store.execution_renew_leases(
                conn, job_ids=job_ids, execution_ids=ids, lease_ttl=self.settings.lease_ttl
            )
        )
        alive = {row["id"]: row["cancel_requested"] for row in found if row["renewed"]}
        busy = {row["id"] for row in found if not row["renewed"]}
        for execution_id in ids:
            running = self._inflight.get(execution_id)
            if running is None or not running.in_handler or execution_id in busy:
                continue  # finished (its outcome write changed the state), or decided later
            if execution_id not in alive:
                self._interrupt(running, "lease_lost")
            elif alive[execution_id]:
                self._interrupt(running, "cancel")

    def _interrupt(self, running: _Running, reason: str) -> None:
        if running.interrupt is not None:
            return
        running.interrupt = reason
        if running.ctx is not None:
            running.ctx._cancel.set()
        log.info(
            "interrupting attempt",
            extra={
                "job_id": running.job.id,
                "execution_id": running.execution_id,
                "reason": reason,
            },
        )
        # Async handlers get CancelledError at their next await (they may catch it and
        # finish); a sync handler cannot be interrupted and learns it from its context.
        # Only a runner inside its handler is cancelled, so the cancellation lands there.
        finished_in_thread = running.thread_result is not None and running.thread_result.done()
        if (
            running.in_handler
            and not finished_in_thread  # its result is in: let the runner record it
            and running.runner is not None
            and (running.is_async or reason == "shutdown")
        ):
            running.cancel_sent = True
            running.runner.cancel()

    def _on_notify(self, channel: str, payload: str) -> None:
        if channel == self._channels[0]:
            if payload in self.queues:
                self._wake.set()
        elif payload.startswith("cancel:"):
            try:
                job_id = int(payload.removeprefix("cancel:"))
            except ValueError:
                return
            for running in list(self._inflight.values()):
                if running.job.id == job_id:
                    self._interrupt(running, "cancel")

    @property
    def _channels(self) -> tuple[str, str]:
        return self.store.channel("jobs"), self.store.channel("control")

    async def _listen_loop(self) -> None:
        delay = COMPLETE_RETRY_FIRST_DELAY
        while not self._drained.is_set():
            try:
                conn = await psycopg.AsyncConnection.connect(
                    self._url,
                    application_name=f"tickwork-listen-{self.id}",
                    **self.app.db.connection_kwargs(self._url),
                )
                async with conn:
                    for channel in self._channels:
                        await conn.execute(sql.SQL("LISTEN {}").format(sql.Identifier(channel)))
                    raise_if_cancelled()  # not to listen on after a dropped cancellation
                    self._wake.set()  # notifications sent while disconnected are lost
                    self.listening.set()
                    delay = COMPLETE_RETRY_FIRST_DELAY
                    async for note in conn.notifies():
                        self._on_notify(note.channel, note.payload)
            except (psycopg.Error, OSError) as exc:
                log.warning("listen connection lost; reconnecting", extra={"error": str(exc)})
            self.listening.clear()
            raise_if_cancelled()
            await wait_for_stop(self._drained, delay)
            delay = min(delay * 2, RECONNECT_MAX_DELAY)

    async def _renew_loop(self) -> None:
        # Renewal goes on through the drain: attempts finishing in the grace period keep
        # their leases until their outcomes are written.
        while not await wait_for_stop(self._drained, self.settings.lease_renew_interval):
            try:
                await self.renew_leases()
            except (psycopg.Error, OSError) as exc:
                log.error("lease renewal failed", extra={"error": str(exc)})
            raise_if_cancelled()

    async def _stop_background(self) -> None:
        """End the background loops: each stops at its event, and is cancelled so that one
        in the middle of a pass does not wait for it to finish."""
        self._drained.set()
        for task in self._background:
            task.cancel()
        if self._background:
            ended, stuck = await asyncio.wait(self._background, timeout=SHUTDOWN_SETTLE_TIMEOUT)
            for task in ended:
                if not task.cancelled() and task.exception() is not None:
                    log.error(
                        "background loop failed",
                        extra={"task": task.get_name(), "error": repr(task.exception())},
                    )
            if stuck:
                log.warning(
                    "background loops did not stop; closing without them",
                    extra={"tasks": sorted(t.get_name() for t in stuck)},
                )
        self._background = []

    # -- shutdown -----------------------------------------------------------------------

    async def _drain(self) -> None:
        """Let in-flight attempts finish within the grace period, then release the rest."""
        runners = [r.runner for r in self._inflight.values() if r.runner is not None]
        if runners:
            log.info(
                "waiting for in-flight attempts",
                extra={"in_flight": len(runners), "grace": self.settings.shutdown_grace},
            )
            await asyncio.wait(runners, timeout=max(self.settings.shutdown_grace, 0.001))
        # The attempts that finished are recorded, not released; a database that is down
        # does not hold shutdown past the settle time (unwritten attempts are reclaimed).
        await self._completer.flush(timeout=SHUTDOWN_SETTLE_TIMEOUT)
        left = list(self._inflight.values())
        if not left:
            return
        for running in left:
            self._interrupt(running, "shutdown")
        settling = [r.runner for r in left if r.runner is not None and not r.runner.done()]
        if settling:
            await asyncio.wait(settling, timeout=SHUTDOWN_SETTLE_TIMEOUT)
        await self._completer.flush(timeout=SHUTDOWN_SETTLE_TIMEOUT)  # finished while settling
        left = [r for r in left if r.execution_id in self._inflight]
        if not left:
            return
        ids = [r.execution_id for r in left]
        job_ids = [r.job.id for r in left]
        released = await self._with_retry(
            "release of unfinished attempts",
            lambda: self._pooled(
                lambda conn: self.store.execution_release_many(
                    conn, job_ids=job_ids, execution_ids=ids
                )
            ),
        )
        for running in left:
            self._inflight.pop(running.execution_id, None)
            if running.runner is not None and not running.runner.done():
                running.runner.cancel()
        log.warning(
            "released unfinished attempts at shutdown",
            extra={"released": len(released), "in_flight": len(ids)},
        )

    # -- database -----------------------------------------------------------------------

    async def _pooled(self, call: Callable[[AsyncConn], Awaitable[_T]]) -> _T:
        """Run ``call`` (a store method) on a connection of the worker's pool."""
        assert self._pool is not None, "worker is not open"
        async with self._pool.connection() as conn:
            return await call(conn)

    async def _complete_many(self, outcomes: str) -> list[tuple[Any, ...]]:
        """Write one batch of outcomes (JSON text); the exceptions, as tuples."""
        return await self._with_retry(
            "outcome write",
            lambda: self._pooled(
                lambda conn: self.store.job_complete_many(conn, outcomes=outcomes)
            ),
        )

    async def _with_retry(self, operation: str, call: Callable[[], Awaitable[_T]]) -> _T:
        # An outcome must not be lost to a brief outage. Retry for about one lease TTL; after
        # that the watchdog reclaims the attempt anyway and a late write would be fenced.
        delay = COMPLETE_RETRY_FIRST_DELAY
        give_up_at = time.monotonic() + self.settings.lease_ttl  # waits for the pool count too
        while True:
            try:
                return await call()
            except (psycopg.OperationalError, psycopg.InterfaceError, OSError) as exc:
                if time.monotonic() >= give_up_at:
                    raise
                log.warning(
                    "database unavailable; retrying",
                    extra={"operation": operation, "error": str(exc), "retry_in": delay},
                )
                await asyncio.sleep(delay)
                delay = min(delay * 2, RECONNECT_MAX_DELAY)


_JOB_STATES = {state.value: state for state in JobState}
_JOB_STATE_OF = {
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
    if kind is str:  # short enough that no escaping takes it past the limit
        return len(value) <= MAX_JSON_BYTES // 6
    return kind is int or (kind is float and math.isfinite(value))


def _error(exc: BaseException) -> ErrorInfo:
    kind = type(exc)
    module = kind.__module__
    name = kind.__qualname__ if module == "builtins" else f"{module}.{kind.__qualname__}"
    if module.startswith("tickwork"):
        name = f"tickwork.{kind.__qualname__}"
    return ErrorInfo(
        type=name,
        message=cut(str(exc)),
        traceback=cut("".join(traceback.format_exception(exc))),
    )
