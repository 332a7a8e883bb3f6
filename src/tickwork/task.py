"""Tasks: Python handlers registered with an :class:`~tickwork.App`."""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from datetime import datetime
from typing import TYPE_CHECKING, Any, Generic, ParamSpec, TypeVar

from tickwork.db.store.jobs import JobRow
from tickwork.errors import EnqueueError, TaskDefinitionError
from tickwork.queue.backoff import Backoff
from tickwork.queue.enqueue import (
    DEFAULT_CREATED_BY,
    JobSpec,
    check_args_mapping,
    check_max_attempts,
    check_priority,
    check_queue,
    check_run_at,
    check_timeout,
    check_unique_key,
)
from tickwork.queue.options import TaskOptions
from tickwork.types import Job

if TYPE_CHECKING:
    from tickwork.app import App

P = ParamSpec("P")
R = TypeVar("R")

PLAIN_ROWS_KEPT = 64
"""Shared rows a task keeps (one per ``created_by``: an API that enqueues as each user keeps
at most this many, then starts again)."""

RESERVED_ARGUMENTS = frozenset({"conn"})
"""Keyword names ``defer`` keeps for itself; a task may not take an argument so named."""


class Task(Generic[P, R]):
    """A registered handler. Call it to run it inline; ``defer`` it to enqueue a job."""

    def __init__(
        self,
        app: App,
        fn: Callable[P, R],
        *,
        name: str,
        options: TaskOptions,
        pass_context: bool,
    ) -> None:
        self.app = app
        self.fn = fn
        self.name = name
        self.options = options
        self.pass_context = pass_context
        self.job_backoff: Callable[[Job], Backoff] | None = None
        """The retry wait of one job, when it depends on the job (a definition's run carries
        its definition's policy); else ``options.backoff``."""
        self._plain_rows: dict[str, tuple[TaskOptions, JobRow]] = {}
        """The row shared by jobs that set no option, per ``created_by``, with the options it
        was made from (a task given new options makes it anew)."""
        self.is_async = inspect.iscoroutinefunction(fn)
        wrap: Callable[[Callable[..., Any]], Callable[..., Any]] | None = (
            app.wrap_async_handler if self.is_async else app.wrap_sync_handler
        )
        self.in_worker: Callable[..., Any] = fn if wrap is None else wrap(fn)
        """What a worker calls: ``fn``, or what :attr:`App.wrap_sync_handler` (or
        :attr:`App.wrap_async_handler`) made of it."""
        self._signature = inspect.signature(fn)
        params = list(self._signature.parameters.values())[1 if pass_context else 0 :]
        by_keyword = [p for p in params if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)]
        self._keywords = frozenset(p.name for p in by_keyword)
        self._required = frozenset(p.name for p in by_keyword if p.default is p.empty)
        self._any_keyword = any(p.kind is p.VAR_KEYWORD for p in params)
        if any(p.kind is p.POSITIONAL_ONLY and p.default is p.empty for p in params):
            self._required |= {"<positional-only>"}  # never satisfiable: bind() explains
        clash = RESERVED_ARGUMENTS & set(self._signature.parameters)
        if clash:
            raise TaskDefinitionError(
                f"task {name!r} takes argument(s) {sorted(clash)} reserved by defer()"
            )
        if pass_context and not self._signature.parameters:
            raise TaskDefinitionError(
                f"task {name!r} has pass_context=True but takes no context argument"
            )

    def __call__(self, *args: P.args, **kwargs: P.kwargs) -> R:
        return self.fn(*args, **kwargs)

    def __repr__(self) -> str:
        return f"<Task {self.name} queue={self.options.queue}>"

    def check_args(self, args: Mapping[str, Any]) -> None:
        """Refuse arguments the handler could not be called with."""
        keys = (args if type(args) is dict else check_args_mapping(args)).keys()
        if self._required <= keys and (self._any_keyword or keys <= self._keywords):
            return  # the common case, without building a BoundArguments
        try:
            if self.pass_context:
                self._signature.bind(None, **args)
            else:
                self._signature.bind(**args)
        except TypeError as exc:
            names = ", ".join(sorted(map(str, keys))) or "none"
            raise EnqueueError(  # names the arguments, never their values (one may be a secret)
                "args", f"arguments: {names}", f"do not fit task {self.name!r}: {exc}"
            ) from None

    def row(self, spec: JobSpec, created_by: str = DEFAULT_CREATED_BY) -> JobRow:
        """Validate one job of this task against its options (checked at registration, so
        only the options a job sets itself are checked here); its arguments are checked
        against the handler and travel beside the row."""
        self.check_args(spec.args)
        opts = self.options
        if (  # the common case: only arguments given, every option the task's own
            spec.queue is None
            and spec.priority is None
            and spec.max_attempts is None
            and spec.run_at is None
            and spec.timeout is None
            and spec.unique_key is None
        ):
            # one row for all such jobs (rows are never changed): no object per job, and a
            # batch of them is seen as uniform by identity (the store sends each column once)
            plain = self._plain_rows.get(created_by)
            if plain is None or plain[0] is not opts:
                row = JobRow(
                    opts.queue,
                    self.name,
                    opts.priority,
                    opts.max_attempts,
                    None,
                    opts.timeout,
                    None,
                    created_by,
                )
                if len(self._plain_rows) >= PLAIN_ROWS_KEPT:
                    self._plain_rows.clear()
                plain = self._plain_rows[created_by] = (opts, row)
            return plain[1]
        return JobRow(
            queue=opts.queue if spec.queue is None else check_queue(spec.queue),
            task=self.name,
            priority=opts.priority if spec.priority is None else check_priority(spec.priority),
            max_attempts=opts.max_attempts
            if spec.max_attempts is None
            else check_max_attempts(spec.max_attempts),
            run_at=None if spec.run_at is None else check_run_at(spec.run_at),
            timeout=opts.timeout if spec.timeout is None else check_timeout(spec.timeout),
            unique_key=None if spec.unique_key is None else check_unique_key(spec.unique_key),
            created_by=created_by,
        )

    def spec(self, **kwargs: Any) -> JobSpec:
        """A :class:`JobSpec` of this task with these arguments, for ``enqueue_many``."""
        return JobSpec(task=self.name, args=kwargs)

    def configure(
        self,
        *,
        queue: str | None = None,
        priority: int | None = None,
        max_attempts: int | None = None,
        run_at: datetime | None = None,
        timeout: float | None = None,
        unique_key: str | None = None,
    ) -> Deferrer:
        """Per-job options: ``task.configure(run_at=...).defer(x=1)``."""
        return Deferrer(
            self,
            JobSpec(
                task=self.name,
                queue=queue,
                priority=priority,
                max_attempts=max_attempts,
                run_at=run_at,
                timeout=timeout,
                unique_key=unique_key,
            ),
        )

    def defer(self, *, conn: Any = None, **kwargs: Any) -> Job:
        """Enqueue a job now; with ``conn``, inside the caller's open transaction."""
        return Deferrer(self, JobSpec(task=self.name)).defer(conn=conn, **kwargs)

    async def defer_async(self, *, conn: Any = None, **kwargs: Any) -> Job:
        """Async :meth:`defer`; ``conn`` may be a psycopg AsyncConnection or AsyncSession."""
        return await Deferrer(self, JobSpec(task=self.name)).defer_async(conn=conn, **kwargs)


@dataclass(frozen=True, slots=True)
class Deferrer:
    """A task with per-job options fixed, waiting for its arguments."""

    task: Task[Any, Any]
    spec: JobSpec

    def defer(self, *, conn: Any = None, **kwargs: Any) -> Job:
        """Enqueue with these options and arguments."""
        return self.task.app.enqueue_many([replace(self.spec, args=kwargs)], conn=conn)[0]

    async def defer_async(self, *, conn: Any = None, **kwargs: Any) -> Job:
        """Async :meth:`defer`."""
        jobs = await self.task.app.enqueue_many_async([replace(self.spec, args=kwargs)], conn=conn)
        return jobs[0]
