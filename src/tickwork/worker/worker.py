"""The worker: claim a batch, run handlers, renew leases, record outcomes (fenced).

Data flow: the claim loop asks ``job_claim`` for as many jobs as it has free slots (jobs of
sync tasks: no more than it has free threads) and starts one asyncio task per attempt; the
handler runs inside that task (async handlers on the event loop, sync handlers in a bounded
thread pool), so a cancel or a timeout is a cancellation of it. Outcomes go to the completer,
which writes them in batches with ``job_complete_many``; that statement changes nothing for an
attempt that is no longer live. The lease renewer
extends every in-flight lease in one statement per interval and learns of cancel requests and
lost leases from its answer; the listener wakes the claim loop on NOTIFY and forwards cancel
requests at once.
"""

from __future__ import annotations

import asyncio
import functools
import json
import logging
import os
import random
import socket
import time
import uuid
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeVar

import psycopg
from psycopg_pool import AsyncConnectionPool

from tickwork.config import WorkerSettings
from tickwork.db.database import Database
from tickwork.db.driver_errors import CONNECTION_LOST, DriverError, ValueRefused
from tickwork.db.store import AsyncConn
from tickwork.limits import cut
from tickwork.ops import metrics, tracing
from tickwork.queue import rows as decode
from tickwork.queue.backoff import retry_delay
from tickwork.services.periodic import run_periodically
from tickwork.types import ErrorInfo, ExecutionState, Job, JobState
from tickwork.worker.attempt import JOB_STATE_OF, JOB_STATES, Attempt, Outcome, run_handler
from tickwork.worker.completer import Completer, Completion
from tickwork.worker.context import JobContext
from tickwork.worker.listener import Listener
from tickwork.worker.progress import PROGRESS_INTERVAL, ProgressBuffer
from tickwork.worker.renewer import Renewer
from tickwork.worker.threads import HandlerThreads

if TYPE_CHECKING:
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
# JIT is off on every worker connection: these are short statements, and a plan whose
# estimate passes jit_above_cost (the generic claim's does once ~100,000 jobs wait: it cannot
# see its LIMIT) is compiled anew on every execution, 12-14 ms of code generation for a
# 1 ms claim (a drain of 100,000 queued jobs: 7,300 jobs/s with JIT, 20,000-28,000 without).
WORKER_SERVER_SETTINGS = {"plan_cache_mode": "force_custom_plan", "jit": "off"}
# The claim reaches jobs by primary key from its own index scan, so one generic plan serves
# 1 row and 1,000 alike (measured: the same time for 1,000), and an idle worker's one-job
# claim skips its 0.4 ms of planning: pickup latency is mostly this statement.
CLAIM_SERVER_SETTINGS = {"plan_cache_mode": "force_generic_plan", "jit": "off"}


@dataclass(frozen=True, slots=True)
class RunOnceResult:
    """What one :meth:`Worker.run_once` did."""

    outcomes: list[Outcome] = field(default_factory=list)
    """One entry per attempt claimed."""

    @property
    def claimed(self) -> int:
        """Number of jobs claimed."""
        return len(self.outcomes)


class Worker:
    """Claims jobs from ``queues`` and runs up to ``concurrency`` of them at once."""

    def __init__(
        self,
        tasks: Mapping[str, Task[Any, Any]],
        db: Database,
        settings: WorkerSettings,
        *,
        run_executor: bool = True,
        on_finished: Callable[[Outcome], None] | None = None,
    ) -> None:
        """``tasks``: the handlers by name (the App's registry); ``db``: where the jobs are;
        ``settings``: the worker's (built by :meth:`tickwork.App.worker`)."""
        self.tasks = tasks
        self.db = db
        self.settings = settings
        self.id = uuid.uuid4()
        self.actor = f"worker:{self.id}"
        self.run_executor = run_executor
        """False: the worker claims nothing; it is this process's record in the workers table
        (which code schedules name as their definer) for a process hosting only services."""
        self.on_finished = on_finished
        self.store = db.store
        self._async_tasks: list[str] = []  # claimed by slot
        self._sync_tasks: list[str] = []  # claimed by slot and free thread
        self._sort_tasks()
        self._inflight: dict[int, Attempt] = {}
        self._pool: AsyncConnectionPool[Any] | None = None
        self._claim_pool: AsyncConnectionPool[Any] | None = None  # job_claim only
        self._threads: HandlerThreads | None = None
        self._wake = asyncio.Event()
        self._stop = asyncio.Event()
        self._hurry = asyncio.Event()  # a second stop request: the grace period ends now
        self._drained = asyncio.Event()  # shutdown past the drain: the lease loops end
        self._background: list[asyncio.Task[None]] = []
        self._capacity_bound = False  # the last claim came back full: the queue may hold more
        self._busy = 0  # attempts whose handler has not returned yet (their slots are taken)
        self._reserved = 0  # slots promised to claims in flight
        self._claiming = 0  # claims in flight
        self._threads_reserved = 0  # threads promised to claims in flight (sync jobs)
        self._thread_waiting: set[int] = set()  # sync attempts started, call not yet submitted
        self._threads_bound = False  # the last claim took every free thread: wake when one frees
        self._claim_owed = False  # the claim loop was woken but could not claim yet
        self._completer = Completer(self._complete_many, self._written, self._not_written)
        self._progress = ProgressBuffer()
        self.listening = asyncio.Event()
        """Set while the LISTEN connection is up (cleared when it drops)."""
        self._also: dict[str, Callable[[str], None]] = {}  # more channels (also_listen)
        self._leased_at: dict[int, float] = {}
        """Execution id -> monotonic time its claim was sent, until its attempt starts."""
        self._renewer = Renewer(
            self._pooled,
            self.store,
            self._inflight,
            worker_id=self.id,
            record=lambda: (self.task_names, self._task_options()),
            lease_ttl=self.settings.lease_ttl,
            interval=self.settings.lease_renew_interval,
        )

    @property
    def _claim_batch(self) -> int:
        return max(1, -(-self.concurrency // CLAIMS_IN_FLIGHT))

    @property
    def _thread_batch(self) -> int:  # sync jobs per claim, as slots are for all jobs
        return max(1, -(-self.threads // CLAIMS_IN_FLIGHT))

    @property
    def queues(self) -> list[str]:
        """Queues this worker claims from."""
        return self.settings.queues

    @property
    def concurrency(self) -> int:
        """Most attempts running at once."""
        return self.settings.concurrency

    @property
    def threads(self) -> int:
        """Most sync handlers running at once (see ``WorkerSettings.sync_threads``)."""
        return self.settings.sync_threads

    @property
    def task_names(self) -> list[str]:
        """Tasks this worker claims: those registered in its App (none without an executor).
        Jobs of other tasks wait for a worker that has them."""
        return sorted(self.tasks) if self.run_executor else []

    def _sort_tasks(self) -> None:
        self._async_tasks = sorted(n for n, t in self.tasks.items() if t.is_async)
        self._sync_tasks = sorted(n for n, t in self.tasks.items() if not t.is_async)

    def _task_options(self) -> str:
        """JSON of what this worker's tasks give their jobs, by task name."""
        tasks = self.tasks
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
        self._sort_tasks()  # tasks registered since this worker was made
        self._pool = await self.db.open_pool(
            f"tickwork-worker-{self.id}",
            max_size=min(self.concurrency, 8) + 3,
            timeout=POOL_WAIT,
            **WORKER_SERVER_SETTINGS,
        )
        self._claim_pool = await self.db.open_pool(
            f"tickwork-claim-{self.id}",
            max_size=CLAIMS_IN_FLIGHT,
            timeout=POOL_WAIT,
            **CLAIM_SERVER_SETTINGS,
        )
        self._threads = HandlerThreads(self.threads, thread_name_prefix="tickwork-task")
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
        except DriverError as exc:
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
        """Stop claiming; in-flight attempts get the grace period (none if ``immediate``,
        which also ends a grace period already begun: they are released at once)."""
        if immediate and not self._hurry.is_set():
            self._hurry.set()  # wakes a drain waiting out its grace period
            log.info("grace period skipped", extra={"in_flight": len(self._inflight)})
        self._stop.set()
        self._wake.set()

    async def run(self) -> None:
        """Claim and run jobs until :meth:`request_stop`; then shut down gracefully."""
        await self.open()
        self._background = [
            asyncio.create_task(
                Listener(
                    self._connect_listener,
                    self._channels,
                    on_notify=self._on_notify,
                    on_connected=self._on_listening,
                    on_lost=lambda: self.listening.clear(),
                ).run(self._drained),
                name="tickwork-listen",
            ),
            asyncio.create_task(self._renewer.run(self._drained), name="tickwork-renew"),
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
        try:
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
                    limit = min(free, self._claim_batch)
                    threads = min(limit, self._free_threads(), self._thread_batch)
                    if not self._async_tasks:  # sync tasks only: a claim per free thread
                        if not threads:
                            self._threads_bound = True  # a thread that frees wakes this loop
                            break
                        limit = threads
                    self._claim_owed = False
                    self._reserved += limit
                    self._threads_reserved += threads
                    self._claiming += 1
                    free -= limit
                    claim = asyncio.create_task(self._claim_and_start(limit, threads))
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

    def _free_threads(self) -> int:
        # Threads taken: calls in the pool (a released attempt's handler that is still running
        # included: a thread cannot be interrupted), attempts started whose call is not
        # submitted yet, and threads promised to claims in flight.
        if not self._sync_tasks:
            return 0
        submitted = 0 if self._threads is None else self._threads.outstanding
        taken = submitted + len(self._thread_waiting) + self._threads_reserved
        return max(0, self.threads - taken)

    async def _claim_and_start(self, limit: int, threads: int) -> None:
        claimed: list[tuple[Job, int, float]] = []
        try:
            claimed = await self._claim(limit, threads)
        except Exception as exc:  # jobs a failed read left RUNNING go back via the watchdog
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
            self._threads_reserved -= threads
            self._claiming -= 1
            if self._claim_owed:
                self._wake.set()
        sync = 0
        for row in claimed:
            sync += not self._start(row).is_async
        # A full batch: the queue may hold more, so claim again as soon as slots free up. A
        # claim that took every thread it could (or could take none) may have left jobs of
        # sync tasks behind: a thread that frees wakes the loop for them.
        self._capacity_bound = len(claimed) == limit
        self._threads_bound = threads < limit and sync == threads and bool(self._sync_tasks)
        if self._capacity_bound:
            self._wake.set()

    def _poll_delay(self) -> float:
        return self.settings.poll_interval * random.uniform(0.9, 1.1)

    async def _claim(self, limit: int, threads: int | None = None) -> list[tuple[Job, int, float]]:
        """Claim up to ``limit`` jobs, at most ``threads`` of them of sync tasks (None: the
        threads free now): (job, execution id, seconds it waited after it was due). The
        monotonic time the claim was sent is kept for :meth:`_start` in ``_leased_at``: the
        leases run for ``lease_ttl`` from the database's now(), which is no earlier."""
        assert self._claim_pool is not None, "worker is not open"
        if not self.tasks:
            return []  # e.g. `serve` without an app: no job is for this worker
        free = self._free_threads() if threads is None else threads
        async_tasks, sync_tasks = self._async_tasks, self._sync_tasks
        capped = False
        if not sync_tasks or free >= limit:  # every job claimed can run now: one plain claim
            tasks = [*async_tasks, *sync_tasks]
        elif not free:  # no thread free: jobs of sync tasks wait where they are
            tasks = async_tasks
        elif not async_tasks:  # sync tasks only: as many as threads are free
            tasks, limit = sync_tasks, free
        else:  # both kinds, fewer threads free than slots
            tasks, capped = async_tasks, True
        if not tasks:
            return []
        with tracing.receiving(self.queues) as claimed:
            async with self._claim_pool.connection() as conn:
                sent = time.monotonic()
                if capped:
                    rows = await self.store.job_claim_capped(
                        conn,
                        queues=self.queues,
                        tasks=tasks,
                        limit=limit,
                        sync_tasks=sync_tasks,
                        sync_limit=free,
                        worker_id=self.id,
                        lease_ttl=self.settings.lease_ttl,
                    )
                else:
                    rows = await self.store.job_claim(
                        conn,
                        queues=self.queues,
                        tasks=tasks,
                        limit=limit,
                        worker_id=self.id,
                        lease_ttl=self.settings.lease_ttl,
                    )
            claimed(len(rows))
        jobs, undecoded = decode.claimed(rows)
        self._leased_at.update((execution_id, sent) for _, execution_id, _ in jobs)
        if undecoded:
            await self._dead_letter_undecoded(undecoded)
        return jobs

    async def _dead_letter_undecoded(self, undecoded: list[decode.Undecoded]) -> None:
        """Dead-letter the claimed jobs whose rows could not be decoded (their handler could
        never be called); the rest of their batch runs. Should the write fail, the watchdog
        reclaims them when their leases expire, and a later claim tries again."""
        for bad in undecoded:
            log.error(
                "claimed job cannot be decoded; dead-lettering it",
                extra={
                    "job_id": bad.job_id,
                    "execution_id": bad.execution_id,
                    "error": bad.message,
                },
            )
        batch = json.dumps(
            [
                {"job_id": b.job_id, "execution_id": b.execution_id, "message": b.message}
                for b in undecoded
            ]
        )
        try:
            await self._pooled(
                lambda conn: self.store.job_dead_letter_undecodable(conn, undecodable=batch)
            )
        except Exception as exc:  # the batch-mates must still start
            log.error(
                "could not dead-letter undecodable jobs; their attempts will be reclaimed",
                extra={"jobs": len(undecoded), "error": str(exc)},
            )

    def _start(
        self, claimed: tuple[Job, int, float], done: asyncio.Future[Outcome] | None = None
    ) -> Attempt:
        job, execution_id, waited = claimed
        task = self.tasks.get(job.task)
        running = Attempt(job, execution_id, is_async=task is not None and task.is_async)
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
        leased_at = self._leased_at.pop(execution_id, None)
        running.lease_until = self._renewer.lease_until(leased_at or time.monotonic())
        metrics.picked_up(job.queue, waited)
        self._busy += 1
        running.runner = asyncio.create_task(self._attempt(running, task))
        if not running.is_async and task is not None:
            # its thread is taken from now until its call is in the pool (counted there);
            # an attempt cancelled before it ran never submits it
            self._thread_waiting.add(execution_id)
            running.runner.add_done_callback(lambda _: self._thread_waiting.discard(execution_id))
        return running

    # -- running one attempt ------------------------------------------------------------

    async def _attempt(self, running: Attempt, task: Task[Any, Any] | None) -> None:
        job = running.job
        # run_handler submits a sync call to the pool before it first suspends, so from here
        # the pool counts the thread (see _free_threads)
        self._thread_waiting.discard(running.execution_id)
        try:
            try:
                with tracing.processing(job) as traced:
                    state, result, error = await run_handler(running, task, self._threads)
                    traced(state is ExecutionState.SUCCEEDED, error)
            finally:
                # The slot frees when the handler returns, not when its outcome is written:
                # the next claim then overlaps with the previous batch's outcome write.
                self._busy -= 1
                if self._capacity_bound or self._claim_owed or self._threads_bound:
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
            policy = task.options.backoff if task.job_backoff is None else task.job_backoff(job)
            delay = retry_delay(policy, job.attempts)
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
        self, running: Attempt, completion: Completion, exceptions: dict[int, str | None]
    ) -> None:
        if completion.execution_id not in exceptions:  # the job's state is the outcome's
            job_state: JobState | None = JOB_STATE_OF[completion.state]
        elif (state := exceptions[completion.execution_id]) is not None:
            job_state = JOB_STATES[state]
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
        running: Attempt,
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
        except ValueRefused as exc:  # not for the database to store: never retried
            log.warning(
                "progress reports refused", extra={"reports": len(reports), "error": str(exc)}
            )
        except BaseException:
            self._progress.put_back(reports)
            raise

    # -- leases, cancels, wake-ups ------------------------------------------------------

    async def renew_leases(self) -> None:
        """Extend the leases of every in-flight attempt; react to cancels and lost leases."""
        await self._renewer.renew_once()

    def also_listen(self, channel: str, on_notify: Callable[[str], None]) -> None:
        """Listen on ``channel`` too, on the worker's one LISTEN connection (call before
        :meth:`run`): ``on_notify(payload)`` for each notification, and ``on_notify("")``
        each time the connection listens again (what was sent while it did not is lost)."""
        self._also[channel] = on_notify

    def _on_notify(self, channel: str, payload: str) -> None:
        if channel in self._also:
            self._also[channel](payload)
        elif channel == self._channels[0]:
            if payload in self.queues:
                self._wake.set()
        elif payload.startswith("cancel:"):
            try:
                job_id = int(payload.removeprefix("cancel:"))
            except ValueError:
                return
            for running in list(self._inflight.values()):
                if running.job.id == job_id:
                    running.interrupt("cancel")

    @property
    def _channels(self) -> tuple[str, ...]:
        return self.store.channel("jobs"), self.store.channel("control"), *self._also

    async def _connect_listener(self) -> psycopg.AsyncConnection[Any]:
        return await self.db.connect_listener(f"tickwork-listen-{self.id}")

    def _on_listening(self) -> None:
        self._wake.set()  # notifications sent while disconnected are lost: claim anyway
        for on_notify in self._also.values():
            on_notify("")
        self.listening.set()

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
        if runners and not self._hurry.is_set():
            log.info(
                "waiting for in-flight attempts",
                extra={"in_flight": len(runners), "grace": self.settings.shutdown_grace},
            )
            await self._grace(runners)
        # The attempts that finished are recorded, not released; a database that is down
        # does not hold shutdown past the settle time (unwritten attempts are reclaimed).
        await self._completer.flush(timeout=SHUTDOWN_SETTLE_TIMEOUT)
        left = list(self._inflight.values())
        if not left:
            return
        for running in left:
            running.interrupt("shutdown")
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
            "released in-flight attempts at shutdown",
            extra={
                "released": len(released),
                "in_flight": len(ids),
                "grace_skipped": self._hurry.is_set(),
            },
        )

    async def _grace(self, runners: list[asyncio.Task[None]]) -> None:
        """Wait until ``runners`` have all ended, the grace period is over, or a second stop
        request (:meth:`request_stop` ``immediate``) ends it now."""
        all_ended = asyncio.ensure_future(asyncio.wait(runners))  # waits; never cancels them
        hurried = asyncio.ensure_future(self._hurry.wait())
        try:
            await asyncio.wait(
                [all_ended, hurried],
                timeout=max(self.settings.shutdown_grace, 0.001),
                return_when=asyncio.FIRST_COMPLETED,
            )
        finally:
            all_ended.cancel()
            hurried.cancel()

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
            except CONNECTION_LOST as exc:
                if time.monotonic() >= give_up_at:
                    raise
                log.warning(
                    "database unavailable; retrying",
                    extra={"operation": operation, "error": str(exc), "retry_in": delay},
                )
                await asyncio.sleep(delay)
                delay = min(delay * 2, RECONNECT_MAX_DELAY)
