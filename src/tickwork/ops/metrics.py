"""Prometheus metrics (prometheus-client): what this process did (counters and histograms,
recorded at the seams - enqueue and attempt completion) and what the database holds (jobs
by queue and state, lease holders; read at scrape time)."""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Iterator
from functools import cache
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest
from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    InfoMetricFamily,
    Metric,
)
from prometheus_client.exposition import CONTENT_TYPE_LATEST
from prometheus_client.registry import Collector
from prometheus_client.utils import floatToGoString
from psycopg_pool import AsyncConnectionPool

from tickwork.config import MetricsSettings
from tickwork.db.statements import statement_names
from tickwork.db.store import Row, Store
from tickwork.db.store.runner import JOB_PATH_STATEMENTS, STATEMENT_BUCKETS, TIMES
from tickwork.errors import ConfigError
from tickwork.types import JobState, Leader

REGISTRY = CollectorRegistry(auto_describe=True)
"""tickwork's own registry (kept apart from the default one, which the host app may use)."""

ENQUEUED = Counter(
    "tickwork_jobs_enqueued", "Jobs enqueued by this process", ["task"], registry=REGISTRY
)
DURATION_BUCKETS = (0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1, 5, 10, 60, 300, 1800)
PICKUP_BUCKETS = (0.001, 0.002, 0.005, 0.01, 0.025, 0.05, 0.1, 0.5, 1, 5, 30, 300)


@cache
def _bounds(buckets: tuple[float, ...]) -> tuple[str, ...]:
    """Bucket bounds as exposition writes them (``le`` labels), +Inf last."""
    return tuple(floatToGoString(b) for b in (*buckets, float("inf")))  # type: ignore[no-untyped-call]


class _Tally:
    """Counters and histograms of the attempt path, aggregated without locks.

    Recorded from the worker's event loop only (one thread), per attempt, so they must cost
    next to nothing: a dict lookup, a bisect and two additions, where prometheus-client's own
    Histogram takes a lock per bucket. Exposed (by prometheus-client) through
    :meth:`collect` at scrape time; a scrape may read a count one attempt behind.
    """

    def __init__(self) -> None:
        self.finished: dict[tuple[str, str], int] = {}
        self.dead_lettered: dict[str, int] = {}
        self.duration: dict[str, list[float]] = {}
        self.pickup: dict[str, list[float]] = {}

    @staticmethod
    def _observe(
        into: dict[str, list[float]], label: str, buckets: tuple[float, ...], value: float
    ) -> None:
        row = into.get(label)
        if row is None:
            row = into[label] = [0.0] * (len(buckets) + 2)  # buckets, +Inf, sum
        row[bisect_left(buckets, value)] += 1
        row[-1] += value

    @staticmethod
    def _histogram(
        name: str, doc: str, label: str, buckets: tuple[float, ...], data: dict[str, list[float]]
    ) -> HistogramMetricFamily:
        family = HistogramMetricFamily(name, doc, labels=[label])
        for value, row in sorted(data.items()):
            cumulative, total = [], 0.0
            for bound, count in zip(_bounds(buckets), row[:-1], strict=True):
                total += count
                cumulative.append((bound, total))
            family.add_metric([value], cumulative, row[-1])
        return family

    def collect(self) -> Iterator[Metric]:
        finished = CounterMetricFamily(
            "tickwork_attempts_finished",
            "Attempts this process ran to an outcome",
            labels=["task", "outcome"],
        )
        for (task, outcome), count in sorted(self.finished.items()):
            finished.add_metric([task, outcome], count)
        yield finished
        dead = CounterMetricFamily(
            "tickwork_jobs_dead_lettered",
            "Jobs whose last attempt ran in this process",
            labels=["task"],
        )
        for task, count in sorted(self.dead_lettered.items()):
            dead.add_metric([task], count)
        yield dead
        yield self._histogram(
            "tickwork_execution_duration_seconds",
            "Handler run time per attempt",
            "task",
            DURATION_BUCKETS,
            self.duration,
        )
        yield self._histogram(
            "tickwork_pickup_latency_seconds",
            "From a job being due (run_at) to its claim, database clock",
            "queue",
            PICKUP_BUCKETS,
            self.pickup,
        )


TALLY = _Tally()
REGISTRY.register(TALLY)


class _StatementTimes(Collector):
    """The store's statement times (:data:`tickwork.db.store.runner.TIMES`) as a histogram,
    for the statements ``metrics.statement_times`` names (``None``: every one)."""

    def __init__(self, reported: frozenset[str] | None) -> None:
        self.reported = reported

    def collect(self) -> Iterator[Metric]:
        times = TIMES.snapshot()
        if self.reported is not None:
            times = {name: row for name, row in times.items() if name in self.reported}
        yield _Tally._histogram(
            "tickwork_statement_seconds",
            "Time of each named statement this process ran, by statement",
            "statement",
            STATEMENT_BUCKETS,
            times,
        )


def reported_statements(settings: MetricsSettings) -> frozenset[str] | None:
    """The statements ``tickwork_statement_seconds`` reports (``None``: all); unknown names
    in ``metrics.statement_times`` are a :class:`ConfigError` (checked when the API is made)."""
    chosen = settings.statement_times
    if chosen == "all":
        return None
    reported = {"none": frozenset(), "job_path": JOB_PATH_STATEMENTS}.get(
        chosen if isinstance(chosen, str) else "", frozenset(chosen)
    )
    unknown = sorted((reported or frozenset()) - statement_names())
    if unknown:
        raise ConfigError(
            f"metrics.statement_times names statements that do not exist ({', '.join(unknown)});"
            ' give statement names, "job_path", "all" or "none"'
        )
    return reported


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

DEFINITION_RUNS = Counter(
    "tickwork_definition_runs",
    "Attempts of definitions' runs that ended, by kind (http, script), language and outcome",
    ["kind", "language", "outcome"],
    registry=REGISTRY,
)
DEFINITION_RUN_DURATION = Histogram(
    "tickwork_definition_run_duration_seconds",
    "Run time of one attempt of a definition's run",
    ["kind", "language"],
    registry=REGISTRY,
    buckets=DURATION_BUCKETS,
)
SCRIPT_OUTPUT_BYTES = Counter(
    "tickwork_script_output_bytes",
    "Bytes scripts wrote to stdout and stderr (all of it, kept or not)",
    ["language", "stream"],
    registry=REGISTRY,
)


def definition_run(kind: str, language: str, succeeded: bool, seconds: float) -> None:
    """Count one ended attempt of a definition's run (``language``: ``-`` for HTTP)."""
    DEFINITION_RUNS.labels(kind, language, "succeeded" if succeeded else "failed").inc()
    DEFINITION_RUN_DURATION.labels(kind, language).observe(seconds)


def script_output(language: str, stdout: int, stderr: int) -> None:
    """Count what a script wrote."""
    SCRIPT_OUTPUT_BYTES.labels(language, "stdout").inc(stdout)
    SCRIPT_OUTPUT_BYTES.labels(language, "stderr").inc(stderr)


@cache
def _enqueued(task: str) -> Any:
    return ENQUEUED.labels(task)


def enqueued(task: str, count: int = 1) -> None:
    """Count jobs this process enqueued."""
    _enqueued(task).inc(count)


def attempt_finished(task: str, outcome: str, seconds: float, dead_lettered: bool) -> None:
    """Count one attempt's outcome (SUCCEEDED, FAILED, ...) and observe its duration."""
    key = (task, outcome)
    TALLY.finished[key] = TALLY.finished.get(key, 0) + 1
    TALLY._observe(TALLY.duration, task, DURATION_BUCKETS, seconds)
    if dead_lettered:
        TALLY.dead_lettered[task] = TALLY.dead_lettered.get(task, 0) + 1


def picked_up(queue: str, seconds: float) -> None:
    """Observe how long a job waited after it was due."""
    TALLY._observe(TALLY.pickup, queue, PICKUP_BUCKETS, max(seconds, 0.0))


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

    def __init__(
        self, queues: list[Row], leases: list[Leader], tables: list[Row], xmin: list[Row]
    ) -> None:
        self.queues = queues
        self.leases = leases
        self.tables = tables
        self.xmin = xmin

    def collect(self) -> Iterator[Metric]:
        yield from self._queues()
        yield from self._leases()
        yield from self._vacuum()

    def _queues(self) -> Iterator[Metric]:
        by_state = GaugeMetricFamily(
            "tickwork_jobs",
            "Jobs in the database by queue and state (every state of every known queue, 0 too)",
            labels=["queue", "state"],
        )
        oldest = GaugeMetricFamily(
            "tickwork_queue_oldest_pending_seconds",
            "Age of the queue's oldest job that is due and not running (0: none)",
            labels=["queue"],
        )
        paused = GaugeMetricFamily("tickwork_queue_paused", "1 while paused", labels=["queue"])
        for row in self.queues:
            for state in JobState:
                by_state.add_metric([row["name"], state.value], row[state.value.lower()] or 0)
            oldest.add_metric([row["name"]], max(row["oldest_pending_seconds"] or 0.0, 0.0))
            paused.add_metric([row["name"]], 1.0 if row["paused"] else 0.0)
        yield by_state
        yield oldest
        yield paused

    def _leases(self) -> Iterator[Metric]:
        held = GaugeMetricFamily(
            "tickwork_lease_held", "1 while the lease has a live holder", labels=["lease"]
        )
        holders = InfoMetricFamily(
            "tickwork_lease_holder",
            "Who holds each lease (the holder's identity changes at every restart)",
            labels=["lease"],
        )
        for lease in self.leases:
            held.add_metric([lease.name], 1.0 if lease.live else 0.0)
            holders.add_metric([lease.name], {"holder": lease.holder})
        yield held
        yield holders

    def _vacuum(self) -> Iterator[Metric]:
        horizon = GaugeMetricFamily(
            "tickwork_xmin_horizon_age_seconds",
            "How long the cluster's oldest snapshot has held back vacuum (0: none)",
        )
        oldest = self.xmin[0] if self.xmin else None
        horizon.add_metric([], (oldest["age_seconds"] or 0.0) if oldest else 0.0)
        yield horizon
        live = GaugeMetricFamily(
            "tickwork_table_live_tuples", "Live rows of each table (estimate)", labels=["table"]
        )
        dead = GaugeMetricFamily(
            "tickwork_table_dead_tuples",
            "Dead rows of each table that vacuum has not removed yet (estimate)",
            labels=["table"],
        )
        vacuumed = GaugeMetricFamily(
            "tickwork_table_last_vacuum_timestamp_seconds",
            "When the table was last vacuumed, by autovacuum or by hand (0: never)",
            labels=["table"],
        )
        for table in self.tables:
            name = [table["table_name"]]
            live.add_metric(name, table["live_tuples"] or 0)
            dead.add_metric(name, table["dead_tuples"] or 0)
            last = table["last_vacuum"]
            vacuumed.add_metric(name, last.timestamp() if last is not None else 0.0)
        yield live
        yield dead
        yield vacuumed


class _WithoutCreated(Collector):
    """``registry``'s metrics without the ``_created`` series prometheus-client adds to some
    counters and histograms only: none of tickwork's series has one, so all read alike."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self.registry = registry

    def collect(self) -> Iterator[Metric]:
        for metric in self.registry.collect():
            metric.samples = [s for s in metric.samples if not s.name.endswith("_created")]
            yield metric


async def render(
    pool: AsyncConnectionPool[Any], store: Store, statements: frozenset[str] | None
) -> tuple[bytes, str]:
    """The exposition text of this process's metrics (with the ``statements`` times, see
    :func:`reported_statements`) and the database snapshot."""
    async with pool.connection() as conn:
        queues = await store.queue_stats(conn, window=60.0)  # live work + rollups: cheap
        leases = await store.lease_list(conn)
        tables = await store.health_tables(conn)  # the statistics views: no table is read
        xmin = await store.health_xmin_horizon(conn, limit=1)
    scrape = CollectorRegistry(auto_describe=False)
    scrape.register(_WithoutCreated(REGISTRY))
    scrape.register(_StatementTimes(statements))
    scrape.register(_Snapshot(queues, leases, tables, xmin))
    return generate_latest(scrape), CONTENT_TYPE_LATEST
