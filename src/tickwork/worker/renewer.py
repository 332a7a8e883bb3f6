"""The lease renewer: one statement per interval extends the lease of every attempt in flight
and heartbeats the worker's record; its answer tells which attempts were cancelled by an
operator and which leases were lost (the watchdog reclaimed them), and those handlers are
interrupted."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, TypeVar
from uuid import UUID

from tickwork.db.driver_errors import CONNECTION_ERRORS
from tickwork.db.store import AsyncConn, Store
from tickwork.services.periodic import raise_if_cancelled, wait_for_stop
from tickwork.worker.attempt import Attempt

log = logging.getLogger("tickwork.worker")
_T = TypeVar("_T")


class Renewer:
    """Renews the leases of ``inflight`` (attempts by execution id) every ``interval``."""

    def __init__(
        self,
        pooled: Callable[[Callable[[AsyncConn], Awaitable[Any]]], Awaitable[Any]],
        store: Store,
        inflight: Mapping[int, Attempt],
        *,
        worker_id: UUID,
        record: Callable[[], tuple[list[str], str]],
        lease_ttl: float,
        interval: float,
    ) -> None:
        """``pooled(call)`` runs a store call on a pooled connection; ``record()`` gives the
        worker's tasks and their options (JSON) for its heartbeat."""
        self._pooled = pooled
        self.store = store
        self.inflight = inflight
        self.worker_id = worker_id
        self._record = record
        self.lease_ttl = lease_ttl
        self.interval = interval

    async def run(self, stop: asyncio.Event) -> None:
        """Renew every interval until ``stop`` (the worker sets it once its drain is over:
        attempts finishing in the grace period keep their leases until their outcomes are
        written)."""
        while not await wait_for_stop(stop, self.interval):
            try:
                await self.renew_once()
            except CONNECTION_ERRORS as exc:
                log.error("lease renewal failed", extra={"error": str(exc)})
            raise_if_cancelled()

    async def renew_once(self) -> None:
        """Heartbeat; extend the leases of every attempt in flight; interrupt the attempts an
        operator cancelled and those whose leases were lost."""
        tasks, options = self._record()
        await self._pooled(
            lambda conn: self.store.worker_heartbeat(
                conn, worker_id=self.worker_id, tasks=tasks, task_options=options
            )
        )
        ids = list(self.inflight)
        if not ids:
            return
        job_ids = [self.inflight[i].job.id for i in ids if i in self.inflight]
        found = await self._pooled(
            lambda conn: self.store.execution_renew_leases(
                conn, job_ids=job_ids, execution_ids=ids, lease_ttl=self.lease_ttl
            )
        )
        alive = {row["id"]: row["cancel_requested"] for row in found if row["renewed"]}
        busy = {row["id"] for row in found if not row["renewed"]}
        for execution_id in ids:
            running = self.inflight.get(execution_id)
            if running is None or not running.in_handler or execution_id in busy:
                continue  # finished (its outcome write changed the state), or decided later
            if execution_id not in alive:
                running.interrupt("lease_lost")
            elif alive[execution_id]:
                running.interrupt("cancel")
