"""The App: registry of tasks and the entry point to everything tickwork does."""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from collections.abc import Awaitable, Callable, Collection, Iterable, Mapping
from dataclasses import replace
from datetime import datetime
from typing import TYPE_CHECKING, Any, ParamSpec, Protocol, TypeVar, overload

from pydantic import ValidationError

from tickwork.config import (
    DEFAULT_MAX_ATTEMPTS,
    DEFAULT_PRIORITY,
    DEFAULT_QUEUE,
    DEFAULT_TASK_TIMEOUT,
    Settings,
    WorkerSettings,
    describe,
    load_settings,
)
from tickwork.db.database import Database
from tickwork.db.driver_errors import (
    DriverError,
    enqueue_error,
    retrying_deadlocks,
    retrying_deadlocks_async,
    translating,
)
from tickwork.db.migrate import migrate
from tickwork.db.store import AsyncConn, Conn, Row, Store
from tickwork.db.store.jobs import JobRow
from tickwork.definitions.records import (
    HTTP_QUEUE,
    HTTP_TASK,
    JOB_TIMEOUT,
    RUNTIME_TASKS,
    SCRIPT_QUEUES,
    SCRIPT_TASK,
)
from tickwork.errors import (
    ConfigError,
    EnqueueError,
    NotFoundError,
    ScheduleError,
    TaskDefinitionError,
    UnknownTaskError,
)
from tickwork.ops import metrics, tracing
from tickwork.ops.health import DEFAULT_XMIN_WARNING_SECONDS, Health, check
from tickwork.ops.rollups import Rollups
from tickwork.portal import Portal
from tickwork.queue import admin as queue_admin
from tickwork.queue import rows as decode
from tickwork.queue.admin import DeletedJob
from tickwork.queue.backoff import Backoff
from tickwork.queue.enqueue import (
    DEFAULT_CREATED_BY,
    InsertPlan,
    JobSpec,
    async_connection,
    callers_transaction,
    check_priority,
    check_queue,
    encode_args,
    insert_plan,
    unregistered_row,
)
from tickwork.queue.options import TaskOptions, task_options
from tickwork.queue.retention import Retention
from tickwork.queue.vacuum import VACUUM_CHECK_INTERVAL, JobVacuum
from tickwork.queue.wait import wait_async
from tickwork.queue.watchdog import Watchdog
from tickwork.runtimes import available
from tickwork.runtimes.handlers import Runtimes, job_backoff
from tickwork.schedule import admin as schedule_admin
from tickwork.schedule.admin import check_schedule_name
from tickwork.schedule.cron import CronSchedule
from tickwork.schedule.records import Misfire, Overlap, ScheduleSpec, StoredSchedule
from tickwork.schedule.scheduler import Scheduler, SchedulerService, catch_up_window
from tickwork.services.host import WORKER_ROLES, ServiceHost
from tickwork.services.leases import LeaseManager, Role, leaders
from tickwork.services.sampler import Sampler
from tickwork.signals.publisher import Signals
from tickwork.signals.purge import SignalRetention
from tickwork.signals.reactor import Reactor, Reactors
from tickwork.signals.runtime import SignalRuntime
from tickwork.task import Task
from tickwork.types import AuditEvent, Execution, Job, Leader
from tickwork.worker.attempt import Outcome
from tickwork.worker.run import run_blocking
from tickwork.worker.worker import Worker

if TYPE_CHECKING:
    from psycopg_pool import AsyncConnectionPool

P = ParamSpec("P")
R = TypeVar("R")
ReactorT = TypeVar("ReactorT", bound=Reactor)

log = logging.getLogger("tickwork")


class AfterEnqueue(Protocol):
    """What :attr:`App.after_enqueue` is told: jobs were stored on ``conn`` (None: tickwork's
    own connection, committed already)."""

    def enqueued(self, conn: Any) -> None:
        """After a sync enqueue."""

    async def enqueued_async(self, conn: Any) -> None:
        """After an async enqueue."""


class App:
    """Holds the configuration, the database and the registered tasks.

    ``App()`` reads ``TICKWORK_*`` settings; with no ``TICKWORK_DATABASE_URL`` it uses the
    embedded PostgreSQL. Keyword arguments override settings: ``App(database_url=...)``.
    """

    def __init__(self, settings: Settings | None = None, **overrides: Any) -> None:
        self.settings = settings if settings is not None else load_settings(**overrides)
        self.db = Database(self.settings)
        self.portal = Portal("tickwork-portal", on_close=self.db.close_async_pool)
        """Runs the operations behind the sync methods (they are written once, async)."""
        self.wrap_sync_handler: Callable[[Callable[..., Any]], Callable[..., Any]] | None = None
        """Wraps each sync handler registered after it is set, as a worker calls it (Django's
        integration closes the thread's stale connections around each job, as Django does
        around a request); calling the task inline is not wrapped."""
        self.wrap_async_handler: (
            Callable[[Callable[..., Awaitable[Any]]], Callable[..., Awaitable[Any]]] | None
        ) = None
        """:attr:`wrap_sync_handler` for async handlers (Django's integration closes the
        stale connections of the thread Django's async ORM runs in)."""
        self.tasks: dict[str, Task[Any, Any]] = {}
        self.schedules: dict[str, ScheduleSpec] = {}
        self.reactors = Reactors()
        """Registered reactors (the framework's signal retention is one of them)."""
        self.reactors.add(SignalRetention(self.db.store, self.settings.signals.retention_days))
        self.signals = Signals(self.db)
        """Emit domain signals: ``app.signals.emit(...)`` / ``emit_async``."""
        self.after_enqueue: AfterEnqueue | None = None
        """Told of every enqueue once its jobs are stored (``tickwork.testing.eager`` runs
        them when their transaction commits)."""
        self._register_runtimes()

    def _register_runtimes(self) -> None:
        """The tasks of definitions' runs (``tickwork.http``, ``tickwork.script``): every
        app has them, so any worker given a runtime's queue can run its definitions."""
        runtimes = Runtimes(self.db, self.settings)
        for name, queue, handler in (
            (HTTP_TASK, HTTP_QUEUE, runtimes.http),
            (SCRIPT_TASK, SCRIPT_QUEUES["bash"], runtimes.script),
        ):
            task = self.task(
                name=name, queue=queue, timeout=JOB_TIMEOUT, max_attempts=3, pass_context=True
            )(handler)
            task.job_backoff = job_backoff

    # -- registration -------------------------------------------------------------------

    @overload
    def task(self, fn: Callable[P, R], /) -> Task[P, R]: ...

    @overload
    def task(
        self,
        *,
        name: str | None = ...,
        queue: str = ...,
        priority: int = ...,
        max_attempts: int = ...,
        timeout: float | None = ...,
        backoff: Backoff | None = ...,
        pass_context: bool = ...,
    ) -> Callable[[Callable[P, R]], Task[P, R]]: ...

    def task(  # type: ignore[misc]  # mypy cannot match an overload with only keywords
        self,
        fn: Callable[..., Any] | None = None,
        /,
        *,
        name: str | None = None,
        queue: str = DEFAULT_QUEUE,
        priority: int = DEFAULT_PRIORITY,
        max_attempts: int = DEFAULT_MAX_ATTEMPTS,
        timeout: float | None = DEFAULT_TASK_TIMEOUT,
        backoff: Backoff | None = None,
        pass_context: bool = False,
    ) -> Any:
        """Register a handler: ``@app.task`` or ``@app.task(queue=..., max_attempts=...)``.

        With ``pass_context=True`` the handler's first argument is a
        :class:`~tickwork.JobContext` (attempt number, cancel request).
        """

        def register(func: Callable[..., Any]) -> Task[Any, Any]:
            task_name = name or f"{func.__module__}.{func.__qualname__}"
            if task_name in self.tasks:
                raise TaskDefinitionError(f"task {task_name!r} is registered twice")
            runtime = available.runtime_of(queue)
            if runtime is not None and task_name not in RUNTIME_TASKS:
                raise TaskDefinitionError(  # its executor runs the runtime's runs alone
                    f"task {task_name!r}: queue {queue!r} is the {runtime} runtime's, which "
                    "runs definitions only; choose another queue"
                )
            options = task_options(
                queue=queue,
                priority=priority,
                max_attempts=max_attempts,
                timeout=timeout,
                backoff=backoff,
                name=task_name,
            )
            registered = Task(
                self, func, name=task_name, options=options, pass_context=pass_context
            )
            self.tasks[task_name] = registered
            return registered

        return register(fn) if fn is not None else register

    def add_reactor(self, reactor: Reactor) -> Reactor:
        """Register a reactor (an instance of a :class:`~tickwork.signals.Reactor` subclass)."""
        return self.reactors.add(reactor)

    def reactor(self, cls: type[ReactorT]) -> type[ReactorT]:
        """Class decorator: ``@app.reactor`` above a Reactor subclass registers an instance."""
        self.add_reactor(cls())
        return cls

    def add_schedule(
        self,
        name: str,
        task: str | Task[Any, Any],
        cron: str,
        *,
        timezone: str = "UTC",
        args: Mapping[str, Any] | None = None,
        queue: str | None = None,
        priority: int | None = None,
        misfire: str = "ONCE",
        misfire_limit: int = 100,
        overlap: str = "ALLOW",
    ) -> ScheduleSpec:
        """Define a schedule in code; it is stored (upserted by name) when a scheduler starts.

        ``misfire``: ONCE (default: one job for a missed window), ALL (every missed fire
        time, up to ``misfire_limit``) or SKIP. ``overlap``: ALLOW, or SKIP while the
        schedule's previous job is still pending or running.
        """

        task_name = task if isinstance(task, str) else task.name
        known = self.get_task(task_name)
        arguments = dict(args or {})
        known.check_args(arguments)
        encode_args(arguments)  # beyond the limits: refused here, not when a scheduler stores it
        check_schedule_name(name)
        if name in self.schedules:
            raise ScheduleError("name", name, "is already a schedule of this app")
        try:
            misfire_policy, overlap_policy = Misfire(misfire), Overlap(overlap)
        except ValueError as exc:
            raise ScheduleError("misfire/overlap", (misfire, overlap), str(exc)) from None
        if isinstance(misfire_limit, bool) or not isinstance(misfire_limit, int):
            raise ScheduleError("misfire_limit", misfire_limit, "must be a positive integer")
        if misfire_limit < 1:
            raise ScheduleError("misfire_limit", misfire_limit, "must be a positive integer")
        spec = ScheduleSpec(
            name=name,
            task=task_name,
            cron=CronSchedule.parse(cron, timezone).check_interval(
                self.settings.scheduler.min_interval
            ),
            args=arguments,
            queue=check_queue(queue) if queue is not None else None,
            priority=check_priority(priority) if priority is not None else None,
            misfire=misfire_policy,
            misfire_limit=misfire_limit,
            overlap=overlap_policy,
        )
        self.schedules[name] = spec
        return spec

    def schedule(
        self, cron: str, *, name: str | None = None, **options: Any
    ) -> Callable[[Task[P, R]], Task[P, R]]:
        """``@app.schedule("*/5 * * * *", timezone="Europe/Berlin", args={...})`` above
        ``@app.task``: run that task on a cron schedule (named after the task by default)."""

        def register(task: Task[P, R]) -> Task[P, R]:
            self.add_schedule(name or task.name, task, cron, **options)
            return task

        return register

    def list_schedules(self) -> list[StoredSchedule]:
        """Every stored schedule, by name."""
        return self._call(schedule_admin.list_all)

    def pause_schedule(
        self, name: str, *, paused: bool = True, actor: str = DEFAULT_CREATED_BY
    ) -> StoredSchedule:
        """Pause (or with ``paused=False`` resume) a stored schedule; it survives restarts."""
        return self._on_schedule(name, schedule_admin.set_paused, name, paused, actor=actor)

    def enable_schedule(
        self, name: str, *, enabled: bool = True, actor: str = DEFAULT_CREATED_BY
    ) -> StoredSchedule:
        """Enable (or with ``enabled=False`` disable) a stored schedule. Re-enabled, it goes on
        from its next fire time after now: the disabled window is not made up for."""
        return self._on_schedule(name, schedule_admin.set_enabled, name, enabled, actor=actor)

    def trigger_schedule(self, name: str, *, actor: str = DEFAULT_CREATED_BY) -> Job:
        """Enqueue one job of a stored schedule now, outside its cron."""
        job_id = self._on_schedule(
            name, schedule_admin.trigger, name, registered=self.registered, actor=actor
        )
        return self.get_job(job_id)

    def registered(self, task: str) -> TaskOptions | None:
        """This app's registration of ``task`` (what its jobs take from it), or None."""
        found = self.tasks.get(task)
        return found.options if found is not None else None

    def _on_schedule(
        self, name: str, operation: Callable[..., Awaitable[R]], *args: Any, **kwargs: Any
    ) -> R:
        """A schedule operation through the portal; a missing schedule is a
        :class:`ScheduleError` naming it."""
        try:
            return self._call(operation, *args, **kwargs)
        except NotFoundError:
            raise ScheduleError("name", name, "is not a stored schedule") from None

    def scheduler_service(
        self, pool: AsyncConnectionPool[Any], leases: LeaseManager | None = None
    ) -> SchedulerService:
        """The SCHEDULER-lease-gated scheduler for this app's schedules, on ``pool``; the role
        is added to ``leases`` (the process's lease manager), or to a manager of its own whose
        heartbeat the caller runs. Schedule writes wake it through :meth:`SchedulerService.wake`
        (:meth:`services` wires the worker's LISTEN connection to it)."""

        interval = self.settings.scheduler.interval
        scheduler = Scheduler(
            pool,
            self.db.store,
            lambda name: self.tasks[name].options if name in self.tasks else None,
            catch_up=catch_up_window(
                interval, self.settings.leases.ttl, self.settings.leases.heartbeat
            ),
        )
        if leases is None:
            leases = LeaseManager(pool, self.db.store, self.settings.leases, [])
        leases.compete([Role.SCHEDULER], self.settings.leases)
        return SchedulerService(scheduler, leases, interval=interval)

    def signal_runtime(
        self,
        pool: AsyncConnectionPool[Any],
        *,
        holder_id: str | None = None,
        leases: LeaseManager | None = None,
    ) -> SignalRuntime:
        """The signal processor and sweeps of this app's reactors, on ``pool``; their lease
        roles go to ``leases`` (the process's manager, whose heartbeat the caller runs), or to
        a manager of the runtime's own (``holder_id``) that it runs itself."""

        return SignalRuntime(
            pool,
            self.db.store,
            self.settings.signals,
            self.reactors,
            holder_id=holder_id,
            leases=leases,
        )

    def get_task(self, name: str) -> Task[Any, Any]:
        """The registered task called ``name``."""
        try:
            return self.tasks[name]
        except KeyError:
            raise UnknownTaskError(name, list(self.tasks)) from None

    # -- enqueue ------------------------------------------------------------------------

    def _rows(
        self,
        specs: Iterable[JobSpec | Mapping[str, Any]],
        created_by: str,
        any_task: bool = False,
        defaults: Mapping[str, Mapping[str, Any]] | None = None,
    ) -> tuple[list[JobRow], list[Mapping[str, Any]]]:
        """The validated rows of ``specs`` and, beside them, their arguments."""
        rows: list[JobRow] = []
        args: list[Mapping[str, Any]] = []
        tasks = self.tasks
        for index, item in enumerate(specs):
            spec = item if type(item) is JobSpec else _as_spec(item, index)
            task = tasks.get(spec.task)
            if task is None and any_task:
                rows.append(unregistered_row(spec, created_by, (defaults or {}).get(spec.task)))
            else:
                rows.append((task or self.get_task(spec.task)).row(spec, created_by))
            args.append(spec.args)
        return rows, args

    def enqueue(
        self,
        task: str,
        args: Mapping[str, Any] | None = None,
        *,
        conn: Any = None,
        queue: str | None = None,
        priority: int | None = None,
        max_attempts: int | None = None,
        run_at: datetime | None = None,
        timeout: float | None = None,
        unique_key: str | None = None,
        created_by: str = DEFAULT_CREATED_BY,
    ) -> Job:
        """Enqueue one job of a registered task; with ``conn``, in the caller's transaction.

        With ``unique_key`` set and a job holding that key still pending or running, the
        existing job is returned (``job.duplicate`` is True) instead of a new one.
        """
        spec = JobSpec(task, args or {}, queue, priority, max_attempts, run_at, timeout, unique_key)
        return self.enqueue_many([spec], conn=conn, created_by=created_by)[0]

    async def enqueue_async(
        self,
        task: str,
        args: Mapping[str, Any] | None = None,
        *,
        conn: Any = None,
        queue: str | None = None,
        priority: int | None = None,
        max_attempts: int | None = None,
        run_at: datetime | None = None,
        timeout: float | None = None,
        unique_key: str | None = None,
        created_by: str = DEFAULT_CREATED_BY,
    ) -> Job:
        """Async :meth:`enqueue`."""
        spec = JobSpec(task, args or {}, queue, priority, max_attempts, run_at, timeout, unique_key)
        return (await self.enqueue_many_async([spec], conn=conn, created_by=created_by))[0]

    def enqueue_many(
        self,
        jobs: Iterable[JobSpec | Mapping[str, Any]],
        *,
        conn: Any = None,
        created_by: str = DEFAULT_CREATED_BY,
        any_task: bool = False,
        defaults: Mapping[str, Mapping[str, Any]] | None = None,
    ) -> list[Job]:
        """Enqueue a batch in one round trip; results are in input order. All or nothing.

        With ``any_task=True`` a job of a task this app does not define is enqueued too, by
        name, for a worker that defines it: the options it leaves unset take ``defaults[task]``
        (what the workers recorded their task gives its jobs: ``admin.known_tasks``), else
        those of a task registered without options (queue ``default``, ...); its arguments
        are checked by that worker only.
        """
        job_rows, job_args = self._rows(jobs, created_by, any_task, defaults)
        if not job_rows:
            return []
        with tracing.sending(job_rows[0].queue, len(job_rows)) as trace_context:
            return self._enqueue_rows(traced(job_rows, trace_context), job_args, conn)

    def _enqueue_rows(
        self, job_rows: list[JobRow], job_args: list[Mapping[str, Any]], conn: Any
    ) -> list[Job]:
        plan = insert_plan(job_rows, job_args)
        store = self.db.store
        if conn is None and self.db.joined is not None:
            conn = self.db.joined()

        def alone() -> Row:
            with self.db.pool().connection() as own:
                return _insert_sync(store, own, plan)

        def run() -> Row:
            if conn is not None:
                with callers_transaction(conn) as joined:
                    return _insert_sync(store, joined, plan)
            # jobs holding the batch's unique keys are locked in input order: another batch
            # with the same keys in another order can deadlock with this one
            return retrying_deadlocks(alone, operation=_operation(plan))

        try:
            answer = run()
        except DriverError as exc:  # as in enqueue_many_async
            raise enqueue_error(exc, committing=conn is None) from exc
        enqueued = _in_order(answer, plan)
        _count_enqueued(enqueued, plan)
        if self.after_enqueue is not None:
            self.after_enqueue.enqueued(conn)
        return enqueued

    async def enqueue_many_async(
        self,
        jobs: Iterable[JobSpec | Mapping[str, Any]],
        *,
        conn: Any = None,
        created_by: str = DEFAULT_CREATED_BY,
        any_task: bool = False,
        defaults: Mapping[str, Mapping[str, Any]] | None = None,
    ) -> list[Job]:
        """Async :meth:`enqueue_many`."""
        job_rows, job_args = self._rows(jobs, created_by, any_task, defaults)
        if not job_rows:
            return []
        with tracing.sending(job_rows[0].queue, len(job_rows)) as trace_context:
            return await self._enqueue_rows_async(traced(job_rows, trace_context), job_args, conn)

    async def _enqueue_rows_async(
        self, job_rows: list[JobRow], job_args: list[Mapping[str, Any]], conn: Any
    ) -> list[Job]:
        plan = insert_plan(job_rows, job_args)
        store = self.db.store
        try:
            if conn is not None:
                answer = await _insert(store, await async_connection(conn), plan)
            else:
                pool = await self.db.async_pool()

                async def alone() -> Row:
                    async with pool.connection() as own:
                        return await _insert(store, own, plan)

                # the same deadlock as in enqueue_many, run again the same way
                answer = await retrying_deadlocks_async(alone, operation=_operation(plan))
        except DriverError as exc:
            # in autocommit the statement is its commit; in the caller's transaction nothing
            # is committed yet
            raise enqueue_error(exc, committing=conn is None) from exc
        enqueued = _in_order(answer, plan)
        _count_enqueued(enqueued, plan)
        if self.after_enqueue is not None:
            await self.after_enqueue.enqueued_async(conn)
        return enqueued

    # -- inspection and operator actions ------------------------------------------------

    def _call(self, operation: Callable[..., Awaitable[R]], *args: Any, **kwargs: Any) -> R:
        """``operation(pool, store, *args, **kwargs)``, a coroutine of the domain layer, run
        through the app's portal for a sync caller, the driver's errors translated."""

        async def call() -> R:
            with translating():
                pool = await self.db.async_pool()
                return await operation(pool, self.db.store, *args, **kwargs)

        return self.portal.call(call)

    def get_job(self, job_id: int) -> Job:
        """The job with its state, attempts, result and last error."""
        return self._call(queue_admin.get_job, job_id)

    async def get_job_async(self, job_id: int) -> Job:
        """Async :meth:`get_job`."""
        return await queue_admin.get_job(await self.db.async_pool(), self.db.store, job_id)

    def wait(self, job: Job | int, *, timeout: float | None = None) -> Job:
        """Block until the job is SUCCEEDED, CANCELLED or DEAD_LETTER and return it (its
        ``result``, or ``error``). Woken by the database's notification when the job ends,
        not by polling; each waiter holds one connection of its own while it waits.
        Raises :class:`~tickwork.errors.WaitTimeout` after ``timeout`` seconds (a
        ``TimeoutError``); a FAILED job awaiting its retry is still being waited for."""

        job_id = job if isinstance(job, int) else job.id
        return self.portal.call(lambda: self.wait_async(job_id, timeout=timeout))

    async def wait_async(self, job: Job | int, *, timeout: float | None = None) -> Job:
        """Async :meth:`wait`."""

        job_id = job if isinstance(job, int) else job.id
        with translating():
            return await wait_async(self.db, job_id, timeout)

    def list_executions(self, job_id: int) -> list[Execution]:
        """Every attempt of the job, oldest first."""
        return self._call(queue_admin.executions, job_id)

    def audit_events(self, job_id: int) -> list[AuditEvent]:
        """The audit trail of one job, oldest first."""
        return self._call(queue_admin.job_audit, job_id)

    def timeline(self, job_id: int) -> list[queue_admin.TimelineEntry]:
        """The job's life in time order, with who did each: created, each attempt claimed
        and ended, and its audit trail (operators' actions, reclaims, a dead letter)."""
        return self._call(queue_admin.job_timeline, job_id)

    def cancel(self, job_id: int, *, actor: str = DEFAULT_CREATED_BY) -> Job:
        """Cancel a PENDING or FAILED job at once; for a RUNNING job, request the cancel.

        The running attempt is told (async handlers are cancelled, sync ones can poll
        ``ctx.cancel_requested``) and the job becomes CANCELLED when the attempt completes.
        """
        return self._call(queue_admin.change_job, "cancel", job_id, actor)

    def retry(self, job_id: int, *, actor: str = DEFAULT_CREATED_BY) -> Job:
        """Send a DEAD_LETTER or FAILED job back to PENDING now; its history is kept."""
        return self._call(queue_admin.change_job, "retry", job_id, actor)

    def delete_job(self, job_id: int, *, actor: str = DEFAULT_CREATED_BY) -> DeletedJob:
        """Delete a job that is not RUNNING, with its attempts; the audit trail keeps a
        ``job.deleted`` event naming ``actor``. A RUNNING job raises
        :class:`~tickwork.errors.JobStateError` (cancel it first)."""
        return self._call(queue_admin.delete_job, job_id, actor)

    def leaders(self) -> list[Leader]:
        """Who holds each leader lease, and until when (database time)."""
        return self._call(leaders)

    def health(self, *, xmin_warning_seconds: float | None = None) -> Health:
        """Table sizes, dead tuples, HOT ratio and the oldest transaction holding back
        vacuum, with warnings past the thresholds."""

        threshold = (
            DEFAULT_XMIN_WARNING_SECONDS if xmin_warning_seconds is None else xmin_warning_seconds
        )

        async def look() -> Health:
            conn = await self.db.connect_async()  # one look: no pool to open (nor to wait out)
            async with conn:
                return await check(conn, self.db.store, xmin_warning_seconds=threshold)

        return self.portal.call(look)

    # -- running ------------------------------------------------------------------------

    def migrate(self) -> list[int]:
        """Apply pending schema migrations; return the versions applied now."""
        with self.db.connect() as conn:
            self.db.warn_if_pooled(conn)
            return migrate(conn, self.db.store)

    def worker(
        self,
        *,
        runtime: str | None = None,
        run_executor: bool = True,
        on_finished: Callable[[Outcome], None] | None = None,
        **options: Any,
    ) -> Worker:
        """A :class:`~tickwork.worker.Worker` (the executor alone) for these tasks; options
        (``queues``, ``concurrency``, ``poll_interval``, ...) override ``settings.worker``.
        ``tickwork worker`` runs one with the watchdog, the scheduler and retention
        (:meth:`services`).

        ``runtime`` (``http``, ``bash``, ``python``, ``node``, ``groovy``): the executor of
        that runtime's definitions, on its queue alone at its concurrency
        (``runtimes.http.concurrency`` or ``runtimes.scripts.concurrency``, unless
        ``concurrency`` is given); :class:`~tickwork.errors.RuntimeMissing` when this machine
        lacks its interpreter. Any other worker runs the app's own tasks and is refused
        (:class:`~tickwork.errors.ConfigError`) when its queues name a runtime's."""
        given = {k: v for k, v in options.items() if v is not None}
        unknown = sorted(set(given) - set(WorkerSettings.model_fields))
        if unknown:
            raise ConfigError(f"invalid worker options: unknown {', '.join(unknown)}")
        if runtime is not None:
            queue = available.check(runtime, self.settings.runtimes)
            if given.get("queues", [queue]) != [queue]:
                raise ConfigError(
                    f"worker.queues ({','.join(given['queues'])}): the {runtime} runtime's "
                    f"executor claims its queue ({queue}) alone; leave the queues out"
                )
            given["queues"] = [queue]
            given.setdefault("concurrency", available.concurrency(runtime, self.settings.runtimes))
        try:
            # unset fields stay unset: the thread pool's default depends on whether concurrency
            # was given (WorkerSettings.sync_threads)
            settings = WorkerSettings.model_validate(
                self.settings.worker.model_dump(exclude_unset=True) | given
            )
        except ValidationError as exc:
            raise ConfigError("invalid worker options: " + describe(exc, "worker")) from None
        if runtime is None and run_executor:
            available.refuse_runtime_queues(settings.queues)
        return Worker(
            available.TaskSelection(self.tasks, runtime),
            self.db,
            settings,
            run_executor=run_executor,
            on_finished=on_finished,
        )

    def task_queues(self) -> list[str]:
        """``default`` and the queues this app's own tasks declare (``serve``'s executor
        claims them when no queues are configured)."""
        tasks = available.TaskSelection(self.tasks, None)
        return sorted({DEFAULT_QUEUE, *(task.options.queue for task in tasks.values())})

    def services(
        self,
        pool: AsyncConnectionPool[Any],
        roles: Collection[str] = WORKER_ROLES,
        runtimes: Collection[str] = (),
        **worker_options: Any,
    ) -> ServiceHost:
        """This process's background services by role, on ``pool``: ``executor`` (a
        :meth:`worker` with ``worker_options``), ``watchdog``, ``scheduler`` and
        ``retention`` (each unless disabled in the settings) and ``signals`` (the processor
        and the sweeps); the singletons share the host's one lease manager. A worker record
        is kept whenever a job-path role runs (code schedules name it as their definer).
        ``runtimes``: the executors of these definitions' runtimes besides (one per runtime,
        at its own concurrency: :func:`tickwork.runtimes.available.executors`)."""

        settings = self.settings
        store = self.db.store
        host = ServiceHost(pool, store, settings.leases)
        worker = None
        if set(roles) & {"executor", "watchdog", "scheduler", "retention"}:
            worker = self.worker(run_executor="executor" in roles, **worker_options)
            host.add_executor(worker)
        if worker is not None and "executor" in roles:
            for name, concurrency in available.executors(runtimes, settings.runtimes):
                runtime = self.worker(runtime=name, concurrency=concurrency)
                host.add_executor(runtime, name=f"executor-{name}")
        if worker is not None and settings.worker.metrics_interval > 0:
            what = ",".join(sorted(roles)) + f" (queues {','.join(worker.queues)}"
            what += f"; runtimes {','.join(runtimes)})" if runtimes else ")"
            sampler = Sampler(
                pool,
                store,
                worker_id=worker.id,
                roles=what,
                interval=settings.worker.metrics_interval,
            )
            host.add("sampler", sampler.run)
        if worker is not None and "watchdog" in roles:
            watchdog = Watchdog(
                pool,
                store,
                actor=f"watchdog:{worker.id}",
                interval=worker.settings.watchdog_interval,
                batch=worker.settings.watchdog_batch,
            )
            host.add("watchdog", watchdog.run)
        if worker is not None and "scheduler" in roles and settings.scheduler.enabled:
            scheduler = self.scheduler_service(pool, host.leases)
            # woken by schedule writes over the worker's LISTEN connection: no connection more
            worker.also_listen(store.channel("schedules"), lambda _payload: scheduler.wake())
            schedules = list(self.schedules.values())
            defined_by = worker.id

            async def schedule(stop: asyncio.Event) -> None:
                await scheduler.scheduler.sync(schedules, defined_by=defined_by)
                await scheduler.run(stop)

            host.add("scheduler", schedule, after_election=True)
        if "retention" in roles and settings.retention.enabled:
            # vacuums on connections of their own, without the pool's statement_timeout
            retention = Retention(pool, store, settings.retention, connect=self.db.connect_async)
            host.add_singleton(
                Role.RETENTION,
                "retention",
                retention.run_once,
                interval=settings.retention.interval,
                lease_settings=settings.leases,
            )
            vacuum = JobVacuum(pool, store, settings.retention, connect=self.db.connect_async)
            if vacuum.enabled:
                host.add_singleton(
                    Role.RETENTION,
                    "vacuum",
                    vacuum.run_once,
                    interval=VACUUM_CHECK_INTERVAL,
                    lease_settings=settings.leases,
                )
        if "signals" in roles:
            host.signals = self.signal_runtime(pool, leases=host.leases)
            host.add("signals", host.signals.run, after_election=True)
        if worker is not None or "signals" in roles:
            host.add("rollups", Rollups(pool, store).run)
        return host

    def run_worker(
        self,
        queues: list[str] | None = None,
        concurrency: int | None = None,
        *,
        migrate: bool = True,
        **options: Any,
    ) -> None:
        """Migrate, then claim and run jobs until SIGTERM/SIGINT (blocking), with the
        watchdog, the scheduler and retention (:meth:`services`); ``runtime=NAME`` runs that
        runtime's executor (:meth:`worker`)."""

        if migrate:
            self.migrate()

        async def start() -> ServiceHost:
            pool = await self.db.async_pool()
            return self.services(
                pool, WORKER_ROLES, queues=queues, concurrency=concurrency, **options
            )

        run_blocking(start, close=self.aclose)

    def close(self) -> None:
        """Close the app's connection pools (and the portal's loop, which starts again on
        the next sync call)."""
        self.portal.close()
        self.db.close()

    async def aclose(self) -> None:
        """:meth:`close`, and the async pool of the running event loop."""
        await asyncio.to_thread(self.portal.close)
        await self.db.aclose()

    def __enter__(self) -> App:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _as_spec(item: JobSpec | Mapping[str, Any], index: int) -> JobSpec:
    if isinstance(item, JobSpec):
        return item
    if isinstance(item, Mapping):
        try:
            return JobSpec(**item)
        except TypeError as exc:
            raise EnqueueError(f"jobs[{index}]", dict(item), f"is not a job spec: {exc}") from None
    raise EnqueueError(f"jobs[{index}]", item, "must be a JobSpec or a mapping")


def traced(rows: list[JobRow], trace_context: str | None) -> list[JobRow]:
    """``rows``, carrying the enqueuer's trace context when it traces (a row shared by many
    jobs is replaced by one shared row)."""
    if trace_context is None:
        return rows
    made: dict[int, JobRow] = {}
    out = []
    for row in rows:
        new = made.get(id(row))
        if new is None:
            new = made[id(row)] = dataclasses.replace(row, trace_context=trace_context)
        out.append(new)
    return out


def _insert_sync(store: Store, conn: Conn, plan: InsertPlan) -> Row:
    """Run ``plan`` on a sync connection; the statement's answer row."""
    if plan.many:
        return store.job_insert_many_sync(conn, jobs=plan.sent, args=plan.args)
    return store.job_insert_sync(conn, job=plan.sent[0], args=plan.args)


async def _insert(store: Store, conn: AsyncConn, plan: InsertPlan) -> Row:
    """:func:`_insert_sync` on an async connection."""
    if plan.many:
        return await store.job_insert_many(conn, jobs=plan.sent, args=plan.args)
    return await store.job_insert(conn, job=plan.sent[0], args=plan.args)


def _operation(plan: InsertPlan) -> str:
    """What a re-run of ``plan`` is logged as."""
    return "enqueue_many" if plan.many else "enqueue"


def _in_order(answer: Row, plan: InsertPlan) -> list[Job]:
    """Jobs in input order. New rows got ids in input order; a duplicate comes back whole, as
    the job holding its key, so keyed rows are matched by key first."""
    if not plan.many:  # one job, answered with scalars
        if answer["existing"] is not None:
            return [decode.duplicate_job(answer["existing"])]
        return [
            decode.inserted_job(plan.sent[0], answer["id"], plan.sent_args[0], answer["created_at"])
        ]
    if not answer["duplicates"] and len(plan.position) == len(plan.sent):
        # the common case: every row new, sent once each, ids in input order
        created_at = answer["created_at"]
        if plan.shared is not None:  # one row shared by every job
            return decode.inserted_jobs(plan.shared, answer["ids"], plan.sent_args, created_at)
        return [
            decode.inserted_job(row, job_id, args, created_at)
            for row, job_id, args in zip(plan.sent, answer["ids"], plan.sent_args, strict=True)
        ]
    holders = {doc["unique_key"]: doc for doc in answer["duplicates"]}
    new_ids = iter(answer["ids"])
    per_sent = []
    for row, args in zip(plan.sent, plan.sent_args, strict=True):
        holder = holders.get(row.unique_key) if row.unique_key is not None else None
        if holder is not None:
            per_sent.append(decode.duplicate_job(holder))
        else:
            per_sent.append(decode.inserted_job(row, next(new_ids), args, answer["created_at"]))
    jobs: list[Job] = []
    seen: set[int] = set()
    for sent_index in plan.position:
        job = per_sent[sent_index]
        if sent_index in seen:  # repeated key within the batch: the first one enqueued it
            job = replace(job, duplicate=True)
        seen.add(sent_index)
        jobs.append(job)
    return jobs


def _count_enqueued(jobs: list[Job], plan: InsertPlan) -> None:
    """Metrics: new jobs by task (one counter call per task of the batch)."""
    if plan.shared is not None:  # one row without a key: one task, every job new
        metrics.enqueued(plan.shared.task, len(jobs))
        return
    by_task: dict[str, int] = {}
    for job in jobs:
        if not job.duplicate:
            by_task[job.task] = by_task.get(job.task, 0) + 1
    for task, count in by_task.items():
        metrics.enqueued(task, count)
