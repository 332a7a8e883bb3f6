"""The tasks ``tickwork.http`` and ``tickwork.script``: a definition's run, from the snapshot
its job carries, and its loop rule (the next run enqueued when this one succeeded)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
import traceback
from collections.abc import AsyncIterator, Iterator, Mapping
from datetime import timedelta
from typing import Any

from tickwork import logs, masking
from tickwork.config import Settings
from tickwork.db.database import Database
from tickwork.db.driver_errors import CONNECTION_ERRORS
from tickwork.db.store.jobs import JobRow
from tickwork.definitions.records import JOB_TIMEOUT, SCRIPT_QUEUES, RetryPolicy
from tickwork.definitions.templates import Variables, load, referenced
from tickwork.errors import DatabaseError, RunFailed
from tickwork.ops import metrics
from tickwork.queue.backoff import Backoff
from tickwork.queue.enqueue import insert_plan
from tickwork.runtimes import http, script
from tickwork.runtimes.netguard import networks
from tickwork.types import Job
from tickwork.worker.context import JobContext

log = logging.getLogger("tickwork.runtimes")
logs.mask_secrets()  # what the worker, the runtimes and httpx log while a run holds secrets

COUNT_ERRORS: tuple[type[BaseException], ...] = (DatabaseError, *CONNECTION_ERRORS)
"""What may keep a run's activity from being counted (logged; the run's outcome stands)."""


def job_backoff(job: Job) -> Backoff:
    """The retry wait of a definition's run: its definition's policy, as snapshotted."""
    retry = dict(job.args.get("policy", {}).get("retry", {}))
    retry.pop("max_attempts", None)
    return RetryPolicy.model_validate({"max_attempts": 1, **retry}).backoff()


@contextlib.contextmanager
def _masked_failure(variables: Variables) -> Iterator[None]:
    """A run's failure with its secrets masked: a RunFailed's message; any other error whose
    message or traceback shows a secret becomes a RunFailed naming its type (its traceback,
    which a VIEWER reads, would show the secret); the rest are raised as they are."""
    try:
        yield
    except RunFailed as exc:
        raise RunFailed(variables.mask(str(exc))) from None
    except Exception as exc:
        told = "".join(traceback.format_exception(exc))
        if variables.mask(told) != told:
            name = type(exc).__qualname__
            raise RunFailed(variables.mask(f"{name}: {exc}")) from None
        raise


class Runtimes:
    """The handlers of definitions' runs, on this process's database and settings."""

    def __init__(self, db: Database, settings: Settings) -> None:
        self.db = db
        self.settings = settings.runtimes
        self.allow = networks(settings.runtimes.http.allow_networks)

    async def _variables(self, texts: list[str | None], names: list[str]) -> Variables:
        pool = await self.db.async_pool()
        return await load(pool, self.db.store, referenced(texts) | set(names))

    async def http(
        self,
        ctx: JobContext,
        definition: Mapping[str, Any],
        spec: Mapping[str, Any],
        policy: Mapping[str, Any],
        trigger: Mapping[str, Any] | None = None,
        loop: Mapping[str, Any] | None = None,
    ) -> dict[str, Any]:
        """One run of an HTTP definition."""
        async with self._counted(definition, "-"):
            texts = [spec["url"], spec.get("body"), *spec.get("headers", {}).values()]
            variables = await self._variables(texts, [])
            with masking.held(variables.masker), _masked_failure(variables):
                result = await http.call(
                    spec,
                    exec_timeout=policy["exec_timeout"],
                    variables=variables,
                    settings=self.settings.http,
                    allow=self.allow,
                )
        await self._loop(ctx, definition, loop, policy)
        return result

    async def script(
        self,
        ctx: JobContext,
        definition: Mapping[str, Any],
        spec: Mapping[str, Any],
        policy: Mapping[str, Any],
        trigger: Mapping[str, Any] | None = None,
        loop: Mapping[str, Any] | None = None,
    ) -> dict[str, Any]:
        """One run of a script definition."""
        own = SCRIPT_QUEUES.get(spec["language"])
        if ctx.job.queue != own:  # a run is made on its language's queue: anything else is
            raise RunFailed(  # not a definition's run
                f"a {spec['language']} script runs only from queue {own}, not {ctx.job.queue}"
            )
        async with self._counted(definition, spec["language"]):
            variables = await self._variables([], list(spec.get("variables", [])))
            with masking.held(variables.masker), _masked_failure(variables):
                result = await script.run(
                    spec,
                    exec_timeout=policy["exec_timeout"],
                    variables=variables,
                    settings=self.settings.scripts,
                    trigger=trigger,
                    report=ctx.output,
                )
        await self._loop(ctx, definition, loop, policy)
        return result

    @contextlib.asynccontextmanager
    async def _counted(self, definition: Mapping[str, Any], language: str) -> AsyncIterator[None]:
        """Count the attempt in the definition's activity and the metrics as it ends:
        succeeded, or failed by an error (a cancel or a shutdown, which hand the run back, are
        not counted). The count is kept apart from the job's own outcome: a database error
        here is logged and never changes the outcome."""
        started = time.monotonic()
        try:
            yield
        except asyncio.CancelledError:
            raise
        except Exception:
            await self._count(definition, language, False, time.monotonic() - started)
            raise
        await self._count(definition, language, True, time.monotonic() - started)

    async def _count(
        self, definition: Mapping[str, Any], language: str, succeeded: bool, took: float
    ) -> None:
        metrics.definition_run(definition["kind"], language, succeeded, took)
        try:
            pool = await self.db.async_pool()
            async with pool.connection() as conn:
                await self.db.store.definition_activity_record(
                    conn, id=definition["id"], succeeded=succeeded, duration=took
                )
        except COUNT_ERRORS:
            log.warning("could not count a run's activity", extra={"definition": definition["id"]})

    async def _loop(
        self,
        ctx: JobContext,
        definition: Mapping[str, Any],
        loop: Mapping[str, Any] | None,
        policy: Mapping[str, Any],
    ) -> None:
        """The loop rule: after a success, the next run ``every`` seconds later, while runs
        are left. Keyed by the loop's first job and the run's number, so a retried success
        enqueues it once."""
        rule = policy.get("loop")
        if not rule:
            return
        root = loop["root"] if loop else ctx.job.id
        done = loop["run"] if loop else 0
        if done >= rule["times"]:
            return
        pool = await self.db.async_pool()
        args = dict(ctx.job.args) | {"loop": {"root": root, "run": done + 1}}
        async with pool.connection() as conn:
            now = await self.db.store.schedule_now(conn)  # the database's clock
        row = JobRow(
            queue=ctx.job.queue,
            task=ctx.job.task,
            priority=ctx.job.priority,
            max_attempts=ctx.job.max_attempts,
            run_at=now + timedelta(seconds=rule["every"]),
            timeout=JOB_TIMEOUT,
            unique_key=f"definition:{definition['id']}:loop:{root}:{done + 1}",
            created_by=f"loop:{root}",
        )
        plan = insert_plan([row], [args])
        async with pool.connection() as conn:
            await self.db.store.job_insert(conn, job=plan.sent[0], args=plan.args)
