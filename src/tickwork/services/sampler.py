"""The sampler: every ``worker.metrics_interval`` seconds a process stores its CPU and
memory (and its children's: the scripts it runs) as a row of ``worker_metrics``, for
``GET /api/workers/metrics``. psutil reads them."""

from __future__ import annotations

import asyncio
import logging
import os
import socket
from typing import Any
from uuid import UUID

import psutil
from psycopg_pool import AsyncConnectionPool

from tickwork.db.store import Store
from tickwork.db.store.workers import WorkerSample
from tickwork.services.periodic import run_periodically

log = logging.getLogger("tickwork.sampler")


class Sampler:
    """Samples this process for the worker ``worker_id`` (what it runs: ``roles``)."""

    def __init__(
        self,
        pool: AsyncConnectionPool[Any],
        store: Store,
        *,
        worker_id: UUID,
        roles: str,
        interval: float,
    ) -> None:
        self.pool = pool
        self.store = store
        self.worker_id = worker_id
        self.roles = roles
        self.interval = interval
        self.process = psutil.Process(os.getpid())
        self.process.cpu_percent(None)  # the first reading starts the measurement
        self.host = socket.gethostname()

    def sample(self) -> WorkerSample:
        """This process's CPU (of one core, since the last sample) and memory, now."""
        children = 0
        for child in self.process.children(recursive=True):
            try:
                children += child.memory_info().rss
            except psutil.Error:  # it ended meanwhile, or is not ours to read
                continue
        return WorkerSample(
            worker_id=self.worker_id,
            host=self.host,
            pid=self.process.pid,
            roles=self.roles,
            cpu_percent=self.process.cpu_percent(None),
            rss_bytes=self.process.memory_info().rss,
            children_rss_bytes=children,
        )

    async def run_once(self) -> WorkerSample:
        """Take a sample and store it."""
        taken = await asyncio.to_thread(self.sample)
        async with self.pool.connection() as conn:
            await self.store.worker_metrics_record(conn, sample=taken)
        return taken

    async def run(self, stop: asyncio.Event) -> None:
        await run_periodically(
            self.run_once, interval=self.interval, stop=stop, log=log, name="metrics sample"
        )
