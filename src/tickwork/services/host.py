"""The services host: one process's background services, started, lease-gated and stopped
the same way.

A host is built by role (:meth:`tickwork.App.services` for ``tickwork worker`` and ``serve``):
the executor (a :class:`~tickwork.worker.worker.Worker`), the watchdog, and the singletons,
each behind a role of the host's one :class:`~tickwork.services.leases.LeaseManager` (one
holder id per process, one heartbeat statement for all its roles). :meth:`ServiceHost.run`
starts the services that need no lease at once, takes the leases, then starts the singletons
(a first pass that found its lease not yet held would wait a whole interval); it ends when
:meth:`ServiceHost.request_stop` is called or a service fails, stopping every other service
and releasing the leases.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable, Coroutine
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from psycopg_pool import AsyncConnectionPool

from tickwork.config import LeaseSettings
from tickwork.db.driver_errors import CONNECTION_ERRORS
from tickwork.db.store import Store
from tickwork.services.leases import LeaseManager
from tickwork.services.periodic import run_periodically

if TYPE_CHECKING:
    from tickwork.signals.runtime import SignalRuntime
    from tickwork.worker.worker import Worker

log = logging.getLogger("tickwork.services")

SERVICE_ROLES = ("executor", "watchdog", "scheduler", "retention", "signals")
"""What a process's host can run: the executor (claims and runs jobs), the watchdog (every
executor's process reclaims expired attempts), the scheduler and retention (singletons behind
the SCHEDULER and RETENTION leases) and signals (the processor and sweeps, behind
SIGNAL_MASTER and SWEEP_MASTER)."""
WORKER_ROLES = frozenset({"executor", "watchdog", "scheduler", "retention"})
"""What ``tickwork worker`` runs."""

SETTLE_TIMEOUT = 2.0
"""Seconds the services other than the executor get to end once cancelled at a stop."""

ServiceRun = Callable[[asyncio.Event], Coroutine[Any, Any, None]]
"""A service: runs until the event is set."""


@dataclass(frozen=True, slots=True)
class _Service:
    name: str
    run: ServiceRun
    after_election: bool  # started once the host has tried for its leases


class ServiceHost:
    """The background services of one process, on ``pool``."""

    def __init__(
        self, pool: AsyncConnectionPool[Any], store: Store, lease_settings: LeaseSettings
    ) -> None:
        self.pool = pool
        self.store = store
        self.leases = LeaseManager(pool, store, lease_settings, [])
        """The process's lease manager: singletons add their roles to it."""
        self.executor: Worker | None = None
        """The process's worker, when a job-path role runs."""
        self.executors: list[Worker] = []
        """Every executor: the worker, then one per runtime (``serve``)."""
        self.signals: SignalRuntime | None = None
        """The signal runtime, when the ``signals`` role runs (the API's switches act on it)."""
        self._services: list[_Service] = []
        self._stop = asyncio.Event()

    def add(self, name: str, run: ServiceRun, *, after_election: bool = False) -> None:
        """A service that runs until the host stops (``after_election``: started once the
        host has tried for its leases, for a service that gates itself on one)."""
        self._services.append(_Service(name, run, after_election))

    def add_singleton(
        self,
        role: str,
        name: str,
        run_once: Callable[[], Awaitable[Any]],
        *,
        interval: float,
        lease_settings: LeaseSettings,
    ) -> None:
        """``run_once`` every ``interval`` while this process holds ``role`` (its lease with
        the time to live of ``lease_settings``)."""
        self.leases.compete([role], lease_settings)
        gated = self.leases.gate(role, run_once)

        async def run(stop: asyncio.Event) -> None:
            await run_periodically(gated, interval=interval, stop=stop, log=log, name=name)

        self.add(name, run, after_election=True)

    def add_executor(self, worker: Worker, name: str = "executor") -> None:
        """An executor (the first is the process's worker): stopped by :meth:`request_stop`
        (immediately on request), through its own graceful drain."""
        if self.executor is None:
            self.executor = worker
        self.executors.append(worker)

        async def run(stop: asyncio.Event) -> None:
            await worker.run()  # request_stop stops it

        self.add(name, run)

    def request_stop(self, *, immediate: bool = False) -> None:
        """Stop every service; the executor drains (in-flight attempts get its grace period,
        none if ``immediate``)."""
        self._stop.set()
        for executor in self.executors:
            executor.request_stop(immediate=immediate)

    async def run(self) -> None:
        """Run the services until :meth:`request_stop`, or until one fails (then the others
        are stopped and its error is raised)."""
        started: list[asyncio.Task[None]] = [
            asyncio.create_task(s.run(self._stop), name=f"tickwork-{s.name}")
            for s in self._services
            if not s.after_election
        ]
        heartbeat_stop = asyncio.Event()  # after the singletons: their leases are released
        heartbeat = None
        stopper = asyncio.create_task(self._stop.wait())
        try:
            if self.leases.roles:
                # a failed first try is no failure: the heartbeat tries again
                with contextlib.suppress(*CONNECTION_ERRORS):
                    await self.leases.run_once()
                heartbeat = asyncio.create_task(
                    self.leases.run(heartbeat_stop), name="tickwork-leases"
                )
                started += [
                    asyncio.create_task(s.run(self._stop), name=f"tickwork-{s.name}")
                    for s in self._services
                    if s.after_election
                ]
            await asyncio.wait([stopper, *started], return_when=asyncio.FIRST_COMPLETED)
        finally:
            self.request_stop()
            await self._settle(started)
            failed = [
                (task.get_name(), error)
                for task in started
                if task.done() and not task.cancelled() and (error := task.exception())
            ]
            heartbeat_stop.set()
            if heartbeat is not None:
                await asyncio.gather(heartbeat, return_exceptions=True)
            stopper.cancel()
        for name, error in failed:
            log.error("service failed", extra={"service": name, "error": repr(error)})
        if failed:
            raise failed[0][1]

    async def _settle(self, started: list[asyncio.Task[None]]) -> None:
        """End the services: the executor through its drain (its grace period and settle time
        bound it); the others are cancelled too, so that one in the middle of a pass does not
        hold the stop for it, and are left behind if they still do not end (a pass that
        swallowed its cancellation)."""
        executor = [t for t in started if t.get_name().startswith("tickwork-executor")]
        others = [t for t in started if t not in executor]
        for task in others:
            task.cancel()
        if others:
            _, stuck = await asyncio.wait(others, timeout=SETTLE_TIMEOUT)
            if stuck:
                log.warning(
                    "services did not stop; going on without them",
                    extra={"services": sorted(t.get_name() for t in stuck)},
                )
        if executor:
            await asyncio.wait(executor)
