"""What one job costs the database: rows written, WAL bytes, heap and index bytes, dead rows,
and what retention's delete costs, measured on the real job path.

In a scratch schema (made, marked and dropped as ``tickwork bench``'s is) it enqueues
``--single`` jobs one per transaction (``app.enqueue``) and ``--jobs`` in batches of 1,000
(``enqueue_many``), drains them all with the real worker (``--concurrency``), folds the
rollups, vacuums as retention does, deletes every finished job through the real retention
pass (``Retention.run_once``, window 0, its vacuum off) and vacuums again. For each phase:

- WAL: the records that touch the schema's relations (heap, indexes, TOAST, sequences),
  plus the commit records of the transactions that wrote them, read back with
  ``pg_walinspect``; so other databases' work on a shared server is not counted. A
  temporary physical replication slot, held for the run, keeps the segments until they are
  read. The server-wide LSN difference is printed next to it for reference.
- rows: ``pg_stat_user_tables`` deltas (n_tup_ins/upd/hot_upd/del), read after the phase's
  connections closed (a backend reports its counts when it goes idle or exits);
- dead rows and bytes: ``pgstattuple`` (exact: it reads the tables);
- sizes: heap, indexes, total, per relation;
- time: the phase's wall clock (on a shared machine only indicative).

It needs a superuser: it creates the extensions ``pg_walinspect`` and ``pgstattuple`` in the
database if missing, and the slot:

    .venv/bin/python benchmarks/job_cost.py --url postgresql://127.0.0.1:5432/scaling_costs \
        [--jobs 50000] [--single 2000] [--concurrency 200] [--fillfactor N] [--json]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import time
from dataclasses import asdict, dataclass, field
from typing import Any

import psycopg

from tickwork.app import App
from tickwork.cli.bench import NOOP, make_app, own_schema, reset
from tickwork.config import RetentionSettings
from tickwork.ops.rollups import Rollups
from tickwork.queue.enqueue import JobSpec
from tickwork.queue.retention import Retention
from tickwork.worker.attempt import Outcome

DEFAULT_URL = os.environ.get("BENCH_DATABASE_URL", "postgresql://127.0.0.1:5432/scaling_costs")
TABLES = ("jobs", "executions", "tallies", "tally_totals", "tally_minutes", "audit_events")

WAL_OF_SCHEMA = """
WITH r AS (
    SELECT * FROM pg_get_wal_records_info(%(start)s::pg_lsn, %(stop)s::pg_lsn)
), refs AS (  -- every block a record references: "rel <tablespace>/<database>/<relfilenode>"
    SELECT r.start_lsn, m[1]::oid AS node
    FROM r, regexp_matches(r.block_ref, 'rel \\d+/\\d+/(\\d+)', 'g') AS m
), mine AS (
    SELECT DISTINCT start_lsn FROM refs WHERE node = ANY(%(nodes)s::oid[])
), xids AS (
    SELECT DISTINCT r.xid FROM r JOIN mine USING (start_lsn) WHERE r.xid <> 0
), counted AS (
    SELECT r.* FROM r
    WHERE r.start_lsn IN (SELECT start_lsn FROM mine)
       OR (r.resource_manager = 'Transaction' AND r.xid IN (SELECT xid FROM xids))
)
SELECT resource_manager || ' ' || split_part(record_type, '+', 1) AS kind, count(*) AS records,
       sum(record_length)::bigint AS bytes, sum(fpi_length)::bigint AS fpi_bytes
FROM counted
GROUP BY 1
ORDER BY bytes DESC
"""

NODES = """
SELECT c.relfilenode FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE n.nspname = %(schema)s AND c.relfilenode <> 0
UNION ALL  -- the TOAST tables of the schema's tables, and their indexes
SELECT t.relfilenode FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
JOIN pg_class t ON t.oid = c.reltoastrelid WHERE n.nspname = %(schema)s
UNION ALL
SELECT i.relfilenode FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
JOIN pg_index x ON x.indrelid = c.reltoastrelid JOIN pg_class i ON i.oid = x.indexrelid
WHERE n.nspname = %(schema)s
"""


@dataclass
class Wal:
    """WAL written for the schema in a span, by resource manager and record type."""

    records: int = 0
    bytes: int = 0
    fpi_bytes: int = 0
    server_bytes: int = 0
    """The server-wide LSN difference (every database's work on the server)."""
    by_kind: dict[str, dict[str, int]] = field(default_factory=dict)
    checkpoints: int = 0


class WalMeter:
    """Measures the WAL a schema's relations get, on a connection held for the run."""

    def __init__(self, url: str, schema: str) -> None:
        self.conn = psycopg.connect(url, autocommit=True)
        for extension in ("pg_walinspect", "pgstattuple"):  # contrib, shipped with the server
            self.conn.execute(f"CREATE EXTENSION IF NOT EXISTS {extension}")
        self.schema = schema
        slot = f"tickwork_wal_meter_{os.getpid()}_{id(self)}"
        # temporary (dropped with this session), reserving WAL from now on
        self.conn.execute("SELECT pg_create_physical_replication_slot(%s, true, true)", [slot])
        self._start = ""
        self._nodes: set[int] = set()
        self._checkpoints = 0

    def nodes(self) -> set[int]:
        return {int(r[0]) for r in self.conn.execute(NODES, {"schema": self.schema})}

    def checkpoints(self) -> int:
        # PostgreSQL 17 moved the counts from pg_stat_bgwriter to pg_stat_checkpointer
        query = (
            "SELECT num_timed + num_requested FROM pg_stat_checkpointer"
            if self.conn.info.server_version >= 170000
            else "SELECT checkpoints_timed + checkpoints_req FROM pg_stat_bgwriter"
        )
        row = self.conn.execute(query).fetchone()
        return int(row[0]) if row else 0

    def start(self) -> None:
        self.conn.execute("SELECT pg_stat_clear_snapshot()")
        self._checkpoints = self.checkpoints()
        self._nodes = self.nodes()  # before: a relation dropped in the span is counted
        row = self.conn.execute("SELECT pg_current_wal_insert_lsn()::text").fetchone()
        self._start = str(row[0]) if row else ""

    def stop(self) -> Wal:
        row = self.conn.execute(
            "SELECT pg_current_wal_flush_lsn()::text,"
            " pg_wal_lsn_diff(pg_current_wal_insert_lsn(), %s::pg_lsn)::bigint",
            [self._start],
        ).fetchone()
        assert row is not None
        stop, server = str(row[0]), int(row[1])
        nodes = sorted(self._nodes | self.nodes())
        wal = Wal(server_bytes=server)
        self.conn.execute("SELECT pg_stat_clear_snapshot()")
        wal.checkpoints = self.checkpoints() - self._checkpoints
        rows = self.conn.execute(
            WAL_OF_SCHEMA, {"start": self._start, "stop": stop, "nodes": nodes}
        ).fetchall()
        for rmgr, records, nbytes, fpi in rows:
            wal.by_kind[str(rmgr)] = {"records": records, "bytes": nbytes, "fpi_bytes": fpi}
            wal.records += records
            wal.bytes += nbytes
            wal.fpi_bytes += fpi
        return wal

    def close(self) -> None:
        self.conn.close()


def table_stats(conn: psycopg.Connection[Any], schema: str) -> dict[str, dict[str, int]]:
    """Per table: row counters, sizes and exact dead rows."""
    conn.execute("SELECT pg_stat_clear_snapshot()")
    out: dict[str, dict[str, int]] = {}
    for table in TABLES:
        name = f"{schema}.{table}"
        row = conn.execute(
            "SELECT s.n_tup_ins, s.n_tup_upd, s.n_tup_hot_upd, s.n_tup_del,"
            " pg_relation_size(%(t)s::regclass), pg_indexes_size(%(t)s::regclass),"
            " pg_total_relation_size(%(t)s::regclass),"
            " t.tuple_count, t.tuple_len, t.dead_tuple_count, t.dead_tuple_len, t.free_space"
            " FROM pg_stat_user_tables s, pgstattuple(%(t)s::regclass) t"
            " WHERE s.relid = %(t)s::regclass",
            {"t": name},
        ).fetchone()
        assert row is not None
        keys = [
            "ins",
            "upd",
            "hot_upd",
            "del",
            "heap_bytes",
            "index_bytes",
            "total_bytes",
            "live_rows",
            "live_bytes",
            "dead_rows",
            "dead_bytes",
            "free_bytes",
        ]
        out[table] = dict(zip(keys, (int(v) for v in row), strict=True))
    return out


def index_sizes(conn: psycopg.Connection[Any], schema: str) -> dict[str, int]:
    rows = conn.execute(
        "SELECT c.relname, pg_relation_size(c.oid) FROM pg_index x"
        " JOIN pg_class c ON c.oid = x.indexrelid JOIN pg_class t ON t.oid = x.indrelid"
        " JOIN pg_namespace n ON n.oid = t.relnamespace"
        " WHERE n.nspname = %s AND t.relname IN ('jobs', 'executions') ORDER BY 1",
        [schema],
    ).fetchall()
    return {str(name): int(size) for name, size in rows}


@dataclass
class Phase:
    """One phase's measurement."""

    name: str
    jobs: int
    seconds: float
    wal: Wal
    rows: dict[str, dict[str, int]]
    """Per table: the counters' change over the phase, and the sizes and dead rows after."""
    extra: dict[str, Any] = field(default_factory=dict)


def _delta(
    before: dict[str, dict[str, int]], after: dict[str, dict[str, int]]
) -> dict[str, dict[str, int]]:
    out = {}
    for table, values in after.items():
        row = dict(values)
        for key in ("ins", "upd", "hot_upd", "del"):
            row[key] = values[key] - before[table][key]
        out[table] = row
    return out


class Meter:
    """Runs phases: WAL span, the counters before and after, the wall clock."""

    def __init__(self, url: str, schema: str) -> None:
        self.url = url
        self.schema = schema
        self.wal = WalMeter(url, schema)
        self.phases: list[Phase] = []

    def settled(self, deadline: float = 30.0) -> dict[str, dict[str, int]]:
        """The counters once the phase's backends have reported them: a backend reports when
        it exits (the phase closed its pools) or within a second of going idle, so read
        until two reads half a second apart agree, a second after the phase at the earliest."""
        time.sleep(1.0)
        last = table_stats(self.wal.conn, self.schema)
        give_up = time.monotonic() + deadline
        while time.monotonic() < give_up:
            time.sleep(0.5)
            now = table_stats(self.wal.conn, self.schema)
            if now == last:
                break
            last = now
        return last

    def run(self, name: str, jobs: int, body: Any) -> Phase:
        before = table_stats(self.wal.conn, self.schema)
        self.wal.start()
        started = time.perf_counter()
        extra = body() or {}
        seconds = time.perf_counter() - started
        wal = self.wal.stop()
        after = self.settled()
        phase = Phase(name, jobs, seconds, wal, _delta(before, after), extra)
        self.phases.append(phase)
        return phase


def phase_app(url: str, schema: str, **settings: Any) -> App:
    return make_app(database_url=url, schema=schema, **settings)


async def _drain(app: App, jobs: int, concurrency: int) -> None:
    done = 0
    finished = asyncio.Event()

    def on_finished(outcome: Outcome) -> None:
        nonlocal done
        done += 1
        if done >= jobs:
            finished.set()

    worker = app.worker(
        queues=["bench"], concurrency=concurrency, on_finished=on_finished, poll_interval=0.5
    )
    running = asyncio.create_task(worker.run())
    await asyncio.wait_for(finished.wait(), 3600)
    worker.request_stop()
    await running


async def _with_pool(app: App, what: str, settings: RetentionSettings | None = None) -> Any:
    pool = await app.db.async_pool()
    store = app.db.store
    if what == "fold":
        return await Rollups(pool, store).run_once()
    if what == "vacuum":
        async with pool.connection() as conn:
            await store.job_tables_vacuum(conn)
        return None
    assert settings is not None
    return (await Retention(pool, store, settings).run_once()).deleted


def measure(
    url: str, jobs: int, single: int, concurrency: int, fillfactor: int | None = None
) -> dict[str, Any]:
    owner = make_app(database_url=url)
    schema = owner.settings.schema_name
    with own_schema(owner):
        reset(owner)
        meter = Meter(url, schema)
        if fillfactor is not None:  # an experiment on the scratch schema only
            meter.wal.conn.execute(f"ALTER TABLE {schema}.jobs SET (fillfactor = {fillfactor})")
        try:

            def in_app(fn: Any, **settings: Any) -> Any:
                app = phase_app(url, schema, **settings)
                try:
                    return fn(app)
                finally:
                    app.close()  # its backends exit, reporting their counters

            def enqueue_single(app: App) -> None:
                for n in range(single):
                    app.enqueue(NOOP, {"n": n})

            def enqueue_batch(app: App) -> None:
                for offset in range(0, jobs, 1000):
                    size = min(1000, jobs - offset)
                    app.enqueue_many([JobSpec(NOOP, {"n": offset + i}) for i in range(size)])

            total = single + jobs
            meter.run("enqueue-single", single, lambda: in_app(enqueue_single))
            meter.run("enqueue-batch", jobs, lambda: in_app(enqueue_batch))
            meter.wal.conn.execute(f"ANALYZE {schema}.jobs")  # no VACUUM: as in production
            sizes_enqueued = index_sizes(meter.wal.conn, schema)
            meter.run(
                "drain",
                total,
                lambda: in_app(lambda a: asyncio.run(_drain(a, total, concurrency))),
            )
            sizes_drained = index_sizes(meter.wal.conn, schema)
            meter.run(
                "rollup fold",
                total,
                lambda: {"folded": in_app(lambda a: asyncio.run(_with_pool(a, "fold")))},
            )
            meter.run(
                "vacuum after drain",
                total,
                lambda: in_app(lambda a: asyncio.run(_with_pool(a, "vacuum"))),
            )
            settings = RetentionSettings(
                finished_after=0.001, dead_letter_after=0.001, vacuum="never"
            )
            meter.run(
                "retention delete",
                total,
                lambda: {
                    "deleted": in_app(lambda a: asyncio.run(_with_pool(a, "retention", settings)))
                },
            )
            meter.run(
                "vacuum after delete",
                total,
                lambda: in_app(lambda a: asyncio.run(_with_pool(a, "vacuum"))),
            )
            server = meter.wal.conn.execute(
                "SELECT version(), current_setting('synchronous_commit'),"
                " current_setting('autovacuum'), current_setting('shared_buffers'),"
                " current_setting('full_page_writes'), current_setting('max_wal_size'),"
                " current_setting('checkpoint_timeout')"
            ).fetchone()
        finally:
            meter.wal.close()
    assert server is not None
    return {
        "environment": {
            "postgres": server[0],
            "synchronous_commit": server[1],
            "autovacuum": server[2],
            "shared_buffers": server[3],
            "full_page_writes": server[4],
            "max_wal_size": server[5],
            "checkpoint_timeout": server[6],
            "cpus": os.cpu_count(),
            "python": platform.python_version(),
        },
        "schema": schema,
        "jobs": total,
        "concurrency": concurrency,
        "jobs_fillfactor": fillfactor,
        "index_bytes_enqueued": sizes_enqueued,
        "index_bytes_drained": sizes_drained,
        "phases": [asdict(p) for p in meter.phases],
    }


def report(result: dict[str, Any]) -> str:
    lines = [
        f"{result['environment']['postgres']}",
        f"jobs: {result['jobs']}, drain concurrency {result['concurrency']},"
        f" jobs fillfactor {result.get('jobs_fillfactor') or 'default'}",
        "",
        f"{'phase':22} {'jobs':>7} {'s':>7} {'WAL B/job':>10} {'FPI B/job':>10}"
        f" {'recs/job':>9} {'server WAL B/job':>17} {'ckpt':>5}",
    ]
    for p in result["phases"]:
        n = p["jobs"]
        w = p["wal"]
        lines.append(
            f"{p['name']:22} {n:>7} {p['seconds']:>7.2f} {w['bytes'] / n:>10.1f}"
            f" {w['fpi_bytes'] / n:>10.1f} {w['records'] / n:>9.2f}"
            f" {w['server_bytes'] / n:>17.1f} {w['checkpoints']:>5}"
        )
    lines.append("")
    lines.append(
        f"{'phase':22} {'table':13} {'ins':>8} {'upd':>8} {'hot':>6} {'del':>8} {'heap kB':>9}"
        f" {'idx kB':>9} {'live':>8} {'live B':>10} {'dead':>8} {'dead B':>10}"
    )
    for p in result["phases"]:
        for table, r in p["rows"].items():
            if not any(r[k] for k in ("ins", "upd", "del")) and table not in ("jobs", "executions"):
                continue
            lines.append(
                f"{p['name']:22} {table:13} {r['ins']:>8} {r['upd']:>8} {r['hot_upd']:>6}"
                f" {r['del']:>8} {r['heap_bytes'] // 1024:>9} {r['index_bytes'] // 1024:>9}"
                f" {r['live_rows']:>8} {r['live_bytes']:>10} {r['dead_rows']:>8}"
                f" {r['dead_bytes']:>10}"
            )
    lines.append("")
    lines.append("index bytes, enqueued → drained:")
    for name, size in result["index_bytes_drained"].items():
        lines.append(f"  {name:32} {result['index_bytes_enqueued'].get(name, 0):>12} {size:>12}")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--url", default=DEFAULT_URL)
    parser.add_argument("--jobs", type=int, default=50_000, help="enqueued in batches of 1,000")
    parser.add_argument("--single", type=int, default=2_000, help="enqueued one at a time")
    parser.add_argument("--concurrency", type=int, default=200)
    parser.add_argument(
        "--fillfactor", type=int, help="set on the scratch schema's jobs table (an experiment)"
    )
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    result = measure(args.url, args.jobs, args.single, args.concurrency, args.fillfactor)
    print(json.dumps(result, indent=2, default=str) if args.json else report(result))


if __name__ == "__main__":
    main()
