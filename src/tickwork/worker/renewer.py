"""The lease renewer: one statement per interval extends the lease of every attempt in flight
and heartbeats the worker's record; its answer tells which attempts were cancelled by an
operator and which leases were lost (the watchdog reclaimed them), and those handlers are
interrupted.

A worker cut off from the database cannot learn that its leases were lost, so it keeps its
own deadline per attempt: ``lease_ttl`` from the moment the claim or the last successful
renewal was *sent* (the database's now(), from which the lease is counted, is no earlier),
less a margin. Past it the handler is interrupted by the worker's own monotonic clock,
before any watchdog could find the lease expired and hand the job to another worker."""

from __future__ import annotations

import asyncio
import logging
import math
import time
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, TypeVar
from uuid import UUID

from tickwork.db.driver_errors import CONNECTION_ERRORS
from tickwork.db.store import AsyncConn, Store
from tickwork.services.periodic import raise_if_cancelled, wait_for_stop
from tickwork.worker.attempt import Attempt

log = logging.getLogger("tickwork.worker")
_T = TypeVar("_T")

EXPIRY_MARGIN = 0.1
"""Part of ``lease_ttl`` (at most :data:`EXPIRY_MARGIN_MAX` seconds) by which an attempt is
interrupted before its lease could expire: time for an async handler to stop at its next
await."""
EXPIRY_MARGIN_MAX = 2.0


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

    def lease_until(self, sent: float) -> float:
        """The monotonic time before which a lease granted by a statement sent at ``sent``
        surely still runs (less the margin)."""
        return sent + self.lease_ttl - min(self.lease_ttl * EXPIRY_MARGIN, EXPIRY_MARGIN_MAX)

    async def run(self, stop: asyncio.Event) -> None:
        """Renew every interval until ``stop`` (the worker sets it once its drain is over:
        attempts finishing in the grace period keep their leases until their outcomes are
        written); meanwhile interrupt the attempts whose own deadline passed (a renewal that
        hangs on a dead link must not keep them running)."""
        expiring = asyncio.create_task(self._expire(stop), name="tickwork-lease-deadline")
        try:
            while not await wait_for_stop(stop, self.interval):
                try:
                    await self.renew_once()
                except CONNECTION_ERRORS as exc:
                    log.error("lease renewal failed", extra={"error": str(exc)})
                raise_if_cancelled()
        finally:
            expiring.cancel()
            await asyncio.gather(expiring, return_exceptions=True)

    async def _expire(self, stop: asyncio.Event) -> None:
        """Interrupt each attempt in its handler once its deadline has passed, waking at the
        next deadline (or sooner, for attempts started since: a quarter of the TTL)."""
        while True:
            now = time.monotonic()
            soonest = math.inf
            for execution_id, running in list(self.inflight.items()):
                if not running.in_handler or running.interrupted_for is not None:
                    continue
                if running.lease_until <= now:
                    log.warning(
                        "lease deadline passed without a renewal; interrupting the attempt",
                        extra={"job_id": running.job.id, "execution_id": execution_id},
                    )
                    running.interrupt("lease_expired")
                else:
                    soonest = min(soonest, running.lease_until)
            if await wait_for_stop(stop, max(0.01, min(soonest - now, self.lease_ttl / 4))):
                return

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
        sent = time.monotonic()
        found = await self._pooled(
            lambda conn: self.store.execution_renew_leases(
                conn, job_ids=job_ids, execution_ids=ids, lease_ttl=self.lease_ttl
            )
        )
        alive = {row["id"]: row["cancel_requested"] for row in found if row["renewed"]}
        busy = {row["id"] for row in found if not row["renewed"]}
        until = self.lease_until(sent)
        for execution_id in alive:
            renewed = self.inflight.get(execution_id)
            if renewed is not None:
                renewed.lease_until = max(renewed.lease_until, until)
        for execution_id in ids:
            running = self.inflight.get(execution_id)
            if running is None or not running.in_handler or execution_id in busy:
                continue  # finished (its outcome write changed the state), or decided later
            if execution_id not in alive:
                running.interrupt("lease_lost")
            elif alive[execution_id]:
                running.interrupt("cancel")
