"""Prometheus metrics (prometheus-client): what this process did (counters and histograms,
recorded at the seams - enqueue and attempt completion) and what the database holds (jobs
by queue and state, lease holders; read at scrape time)."""

from __future__ import annotations

from collections.abc import Iterator
from functools import cache
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.exposition import CONTENT_TYPE_LATEST
from prometheus_client.registry import Collector
from psycopg_pool import AsyncConnectionPool

from tickwork.db.database import Row, fetch_async
from tickwork.db.statements import Statements

REGISTRY = CollectorRegistry(auto_describe=True)
"""tickwork's own registry (kept apart from the default one, which the host app may use)."""

ENQUEUED = Counter(
    "tickwork_jobs_enqueued", "Jobs enqueued by this process", ["task"], registry=REGISTRY
)
FINISHED = Counter(
    "tickwork_attempts_finished",
    "Attempts this process ran to an outcome",
    ["task", "outcome"],
    registry=REGISTRY,
)
DEAD_LETTERED = Counter(
    "tickwork_jobs_dead_lettered", "Jobs whose last attempt ran here", ["task"], registry=REGISTRY
)
DURATION = Histogram(
    "tickwork_execution_duration_seconds",
    "Handler run time per attempt",
    ["task"],
    registry=REGISTRY,
    buckets=(0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1, 5, 10, 60, 300, 1800),
)
PICKUP = Histogram(
    "tickwork_pickup_latency_seconds",
    "From a job being due (run_at) to its claim, database clock",
    ["queue"],
    registry=REGISTRY,
    buckets=(0.001, 0.002, 0.005, 0.01, 0.025, 0.05, 0.1, 0.5, 1, 5, 30, 300),
)


SIGNALS_EMITTED = Counter(
    "tickwork_signals_emitted", "Signals emitted (new rows)", ["signal_type"], registry=REGISTRY
)
SIGNALS_SQUASHED = Counter(
    "tickwork_signals_squashed",
    "Emits absorbed by a pending signal of the same type and key",
    ["signal_type"],
    registry=REGISTRY,
)
SIGNALS_PROCESSED = Counter(
    "tickwork_signals_processed",
    "Signals the processor settled, by outcome",
    ["signal_type", "status"],
    registry=REGISTRY,
)
SIGNAL_DELIVERIES_FAILED = Counter(
    "tickwork_signal_reactor_failures",
    "Reactor failures handling a signal",
    ["signal_type", "reactor"],
    registry=REGISTRY,
)
SWEEP_DURATION = Histogram(
    "tickwork_sweep_duration_seconds",
    "Sweep run time per reactor",
    ["reactor", "outcome"],
    registry=REGISTRY,
    buckets=(0.01, 0.05, 0.1, 0.5, 1, 5, 10, 60, 300, 1800),
)


@cache
def _enqueued(task: str) -> Any:
    return ENQUEUED.labels(task)


@cache
def _finished(task: str, outcome: str) -> Any:
    return FINISHED.labels(task, outcome)


@cache
def _duration(task: str) -> Any:
    return DURATION.labels(task)


@cache
def _pickup(queue: str) -> Any:
    return PICKUP.labels(queue)


def enqueued(task: str, count: int = 1) -> None:
    """Count jobs this process enqueued."""
    _enqueued(task).inc(count)


def attempt_finished(task: str, outcome: str, seconds: float, dead_lettered: bool) -> None:
    """Count one attempt's outcome (SUCCEEDED, FAILED, ...) and observe its duration."""
    _finished(task, outcome).inc()
    _duration(task).observe(seconds)
    if dead_lettered:
        DEAD_LETTERED.labels(task).inc()


def picked_up(queue: str, seconds: float) -> None:
    """Observe how long a job waited after it was due."""
    _pickup(queue).observe(max(seconds, 0.0))


def signal_emitted(signal_type: str, squashed: bool) -> None:
    """Count one emit (a new signal, or a squash into a pending one)."""
    (SIGNALS_SQUASHED if squashed else SIGNALS_EMITTED).labels(signal_type).inc()


def signal_settled(signal_type: str, status: str) -> None:
    """Count a signal the processor settled (COMPLETED, PROCESSING awaiting a retry, DEAD)."""
    SIGNALS_PROCESSED.labels(signal_type, status).inc()


def reactor_failed(signal_type: str, reactor: str) -> None:
    """Count a reactor's failure on a signal."""
    SIGNAL_DELIVERIES_FAILED.labels(signal_type, reactor).inc()


def sweep_ran(reactor: str, outcome: str, seconds: float) -> None:
    """Observe one sweep run."""
    SWEEP_DURATION.labels(reactor, outcome).observe(seconds)


class _Snapshot(Collector):
    """The database's view, read once per scrape."""

    def __init__(self, jobs: list[Row], leases: list[Row]) -> None:
        self.jobs = jobs
        self.leases = leases

    def collect(self) -> Iterator[Metric]:
        by_state = GaugeMetricFamily(
            "tickwork_jobs", "Jobs in the database by queue and state", labels=["queue", "state"]
        )
        for row in self.jobs:
            by_state.add_metric([row["queue"], row["state"]], row["n"])
        yield by_state
        holders = GaugeMetricFamily(
            "tickwork_lease_held",
            "1 while the holder's lease is live",
            labels=["lease", "holder"],
        )
        for row in self.leases:
            holders.add_metric([row["name"], row["holder"]], 1.0 if row["live"] else 0.0)
        yield holders


async def render(pool: AsyncConnectionPool[Any], statements: Statements) -> tuple[bytes, str]:
    """The exposition text of this process's metrics and the database snapshot."""
    async with pool.connection() as conn:
        jobs = await fetch_async(conn, statements["job_count_by_queue_state"], {})
        leases = await fetch_async(conn, statements["lease_list"], {})
    snapshot = CollectorRegistry(auto_describe=False)
    snapshot.register(_Snapshot(jobs, leases))
    return generate_latest(REGISTRY) + generate_latest(snapshot), CONTENT_TYPE_LATEST
