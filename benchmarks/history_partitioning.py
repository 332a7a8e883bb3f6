"""Would finished work in time-partitioned history tables matter? A steady run of rounds
against two schemas side by side, each holding the same retention window of finished jobs:

- ``delete`` (tickwork as it is): the window's ``--held`` finished jobs and their executions
  stay in the hot ``jobs``/``executions`` tables; each round enqueues ``--round-jobs`` jobs,
  drains them with the real worker, then runs the real retention pass
  (``Retention.run_once``, its window set so that the round's number of the oldest jobs
  is past it) and the real vacuum (``job_tables_vacuum``), each timed and its WAL measured.
- ``move`` (the plan): the window's jobs live in ``jobs_history``/``executions_history``,
  range-partitioned by ``finished_at``, a partition per day, made by this script in its
  scratch schema (tickwork's own schema and migrations are not changed). Each round drains
  the same way, then moves the round's finished jobs out of the hot tables (one statement
  per 5,000 jobs: DELETE ... RETURNING into INSERT, executions with them) and runs the same
  vacuum. At the end, one day partition of each history table is dropped (timed, WAL
  measured): what replaces retention's delete.

The two alternate round by round, so the machine's load falls on both alike. WAL is counted
as ``job_cost.py`` counts it (the schema's records and their commits, ``pg_walinspect``), so
a superuser is needed:

    .venv/bin/python benchmarks/history_partitioning.py \
        --url postgresql://127.0.0.1:5432/scaling_costs [--held 1000000] [--rounds 5] \
        [--round-jobs 20000] [--concurrency 200] [--json]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import time
from contextlib import ExitStack
from typing import Any

import psycopg
from job_cost import DEFAULT_URL, WalMeter, _drain

from tickwork.app import App
from tickwork.cli.bench import NOOP, make_app, own_schema, reset
from tickwork.config import RetentionSettings
from tickwork.queue.enqueue import JobSpec
from tickwork.queue.retention import Retention

HELD_JOBS = """
INSERT INTO {s}.{jobs} (id, queue, task, args, state, attempts, max_attempts, run_at,
                        created_at, created_by, finished_at)
OVERRIDING SYSTEM VALUE
SELECT g, 'bench', 'bench.noop', '{{"n": 1}}', 'SUCCEEDED', 1, 3, t, t, 'bench',
       t + interval '10 milliseconds'
FROM generate_series(1, {held}) AS g,
     LATERAL (SELECT now() - interval '1 hour'
                     - ((({held} - g)::float8 / {held}) * interval '1 day') AS t) AS x
"""

HELD_EXECUTIONS = """
INSERT INTO {s}.{executions} (id, job_id, attempt, worker_id, state, started_at,
                              lease_expires_at, finished_at)
OVERRIDING SYSTEM VALUE
SELECT g, g, 1, '00000000-0000-0000-0000-000000000001', 'SUCCEEDED', t, t + interval '60 s',
       t + interval '10 milliseconds'
FROM generate_series(1, {held}) AS g,
     LATERAL (SELECT now() - interval '1 hour'
                     - ((({held} - g)::float8 / {held}) * interval '1 day') AS t) AS x
"""

HISTORY = """
CREATE TABLE {s}.jobs_history (LIKE {s}.jobs INCLUDING DEFAULTS)
    PARTITION BY RANGE (finished_at);
CREATE INDEX ON {s}.jobs_history (id);
CREATE TABLE {s}.executions_history (LIKE {s}.executions INCLUDING DEFAULTS)
    PARTITION BY RANGE (finished_at);
CREATE INDEX ON {s}.executions_history (job_id, id)
"""

PARTITION = """
CREATE TABLE {s}.{table}_{day:%Y%m%d} PARTITION OF {s}.{table}
    FOR VALUES FROM ('{day:%Y-%m-%d}') TO ('{next:%Y-%m-%d}')
"""

# The move: a batch of finished jobs, oldest first, out of the hot tables and into history,
# with their executions, in one statement (the lock order and SKIP LOCKED as retention's).
MOVE = """
WITH doomed AS (
    SELECT id FROM {s}.jobs
    WHERE finished_at IS NOT NULL AND state IN ('SUCCEEDED', 'CANCELLED', 'DEAD_LETTER')
    ORDER BY finished_at
    LIMIT %(limit)s
    FOR UPDATE SKIP LOCKED
), executions_gone AS (
    DELETE FROM {s}.executions WHERE job_id = ANY(ARRAY(SELECT id FROM doomed))
    RETURNING *
), executions_kept AS (
    INSERT INTO {s}.executions_history SELECT * FROM executions_gone
), gone AS (
    DELETE FROM {s}.jobs WHERE id = ANY(ARRAY(SELECT id FROM doomed))
    RETURNING *
), kept AS (
    INSERT INTO {s}.jobs_history SELECT * FROM gone
)
SELECT count(*) FROM gone
"""

OLDEST_AGE = """
SELECT extract(epoch FROM now() - finished_at)::float8 FROM {s}.jobs
WHERE finished_at IS NOT NULL
ORDER BY finished_at
OFFSET %(n)s LIMIT 1
"""

SIZES = """
SELECT c.relname, pg_total_relation_size(c.oid), a.dead_tuple_count
FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace,
     LATERAL pgstattuple_approx(c.oid) AS a  -- exact for the pages not all-visible
WHERE n.nspname = %(s)s AND c.relkind = 'r' AND c.relname IN ('jobs', 'executions')
"""

XACT_WAL = """
SELECT coalesce(sum(record_length), 0)::bigint
FROM pg_get_wal_records_info(%(start)s::pg_lsn, pg_current_wal_flush_lsn())
WHERE xid = %(xid)s::text::xid
"""


def fill(url: str, app: App, held: int, mode: str) -> float:
    """The window's finished jobs: in the hot tables (delete) or in history (move)."""
    s = app.settings.schema_name
    started = time.perf_counter()
    with psycopg.connect(url, autocommit=True) as conn:
        if mode == "delete":
            names = {"jobs": "jobs", "executions": "executions"}
        else:
            for statement in HISTORY.format(s=s).split(";\n"):
                conn.execute(statement)
            today = conn.execute("SELECT current_date").fetchone()[0]  # type: ignore[index]
            from datetime import timedelta

            for table in ("jobs_history", "executions_history"):
                for offset in range(-3, 3):
                    day = today + timedelta(days=offset)
                    conn.execute(
                        PARTITION.format(s=s, table=table, day=day, next=day + timedelta(1))
                    )
            names = {"jobs": "jobs_history", "executions": "executions_history"}
        conn.execute(HELD_JOBS.format(s=s, held=held, jobs=names["jobs"]))
        conn.execute(HELD_EXECUTIONS.format(s=s, held=held, executions=names["executions"]))
        if mode == "delete":  # the hot tables' ids continue after the held ones
            conn.execute(f"ALTER TABLE {s}.jobs ALTER COLUMN id RESTART WITH {held + 1}")
            conn.execute(f"ALTER TABLE {s}.executions ALTER COLUMN id RESTART WITH {held + 1}")
        conn.execute(f"VACUUM ANALYZE {s}.jobs, {s}.executions")
        if mode == "move":
            conn.execute(f"VACUUM ANALYZE {s}.jobs_history, {s}.executions_history")
    return time.perf_counter() - started


def sizes(conn: psycopg.Connection[Any], schema: str) -> dict[str, Any]:
    conn.execute("SELECT pg_stat_clear_snapshot()")
    return {
        str(name): {"bytes": int(size), "dead": int(dead or 0)}
        for name, size, dead in conn.execute(SIZES, {"s": schema}).fetchall()
    }


async def _round(
    app: App, meter: WalMeter, mode: str, jobs: int, concurrency: int
) -> dict[str, Any]:
    s = app.settings.schema_name
    for offset in range(0, jobs, 1000):
        await app.enqueue_many_async(
            [JobSpec(NOOP, {"n": offset + i}) for i in range(min(1000, jobs - offset))]
        )
    started = time.perf_counter()
    await _drain(app, jobs, concurrency)
    drain_seconds = time.perf_counter() - started
    pool = await app.db.async_pool()
    meter.start()
    started = time.perf_counter()
    if mode == "delete":
        async with pool.connection() as conn:
            cur = await conn.execute(OLDEST_AGE.format(s=s), {"n": jobs - 1})
            row = await cur.fetchone()
        window = float(row[0]) if row else 1.0
        settings = RetentionSettings(
            finished_after=window, dead_letter_after=window, vacuum="never"
        )
        retired = (await Retention(pool, app.db.store, settings).run_once()).deleted
    else:
        retired = 0
        while True:
            async with pool.connection() as conn, conn.transaction():
                cur = await conn.execute(MOVE.format(s=s), {"limit": 5000})
                row = await cur.fetchone()
            moved = int(row[0]) if row else 0
            retired += moved
            if moved < 5000:
                break
    retire_seconds = time.perf_counter() - started
    retire_wal = meter.stop()
    await asyncio.sleep(1.5)  # counters reported by idle backends
    before_vacuum = sizes(meter.conn, s)
    meter.start()
    started = time.perf_counter()
    async with pool.connection() as conn:
        await app.db.store.job_tables_vacuum(conn)
    vacuum_seconds = time.perf_counter() - started
    vacuum_wal = meter.stop()
    return {
        "mode": mode,
        "drain_jobs_per_s": round(jobs / drain_seconds),
        "retired": retired,
        "retire_seconds": round(retire_seconds, 3),
        "retire_wal_bytes": retire_wal.bytes,
        "retire_fpi_bytes": retire_wal.fpi_bytes,
        "vacuum_seconds": round(vacuum_seconds, 3),
        "vacuum_wal_bytes": vacuum_wal.bytes,
        "dead_before_vacuum": {k: v["dead"] for k, v in before_vacuum.items()},
        "hot_bytes": {k: v["bytes"] for k, v in sizes(meter.conn, s).items()},
    }


def drop_partition(url: str, meter: WalMeter, schema: str) -> dict[str, Any]:
    """Drop yesterday's partitions of both history tables: retention for a whole day."""
    with psycopg.connect(url, autocommit=True) as conn:
        day = conn.execute("SELECT to_char(current_date - 1, 'YYYYMMDD')").fetchone()[0]  # type: ignore[index]
        rows = conn.execute(f"SELECT count(*) FROM {schema}.jobs_history_{day}").fetchone()[0]  # type: ignore[index]
        size = conn.execute(
            f"SELECT pg_total_relation_size('{schema}.jobs_history_{day}')"
            f" + pg_total_relation_size('{schema}.executions_history_{day}')"
        ).fetchone()[0]  # type: ignore[index]
        # A DROP writes catalog rows and a commit naming the files to unlink, none of it in
        # the schema's relations: its WAL is counted by its transaction id instead.
        start = conn.execute("SELECT pg_current_wal_insert_lsn()::text").fetchone()[0]  # type: ignore[index]
        started = time.perf_counter()
        with conn.transaction():
            xid = conn.execute("SELECT pg_current_xact_id()::text").fetchone()[0]  # type: ignore[index]
            conn.execute(f"DROP TABLE {schema}.jobs_history_{day}")
            conn.execute(f"DROP TABLE {schema}.executions_history_{day}")
        seconds = time.perf_counter() - started
        wal = meter.conn.execute(XACT_WAL, {"start": start, "xid": xid}).fetchone()[0]  # type: ignore[index]
    return {"jobs": int(rows), "bytes": int(size), "seconds": round(seconds, 3), "wal": int(wal)}


def run(url: str, held: int, rounds: int, jobs: int, concurrency: int) -> dict[str, Any]:
    apps = {mode: make_app(database_url=url) for mode in ("delete", "move")}
    result: dict[str, Any] = {
        "held": held,
        "round_jobs": jobs,
        "concurrency": concurrency,
        "schemas": {mode: app.settings.schema_name for mode, app in apps.items()},
    }
    with ExitStack() as stack:
        for app in apps.values():
            stack.enter_context(own_schema(app))
            reset(app)
        result["fill_seconds"] = {
            mode: round(fill(url, app, held, mode), 1) for mode, app in apps.items()
        }
        meters = {m: WalMeter(url, a.settings.schema_name) for m, a in apps.items()}
        stack.callback(lambda: [m.close() for m in meters.values()])
        result["rounds"] = []
        for n in range(rounds):
            for mode in ("delete", "move") if n % 2 == 0 else ("move", "delete"):
                app = make_app(database_url=url, schema=apps[mode].settings.schema_name)
                try:
                    outcome = asyncio.run(_round(app, meters[mode], mode, jobs, concurrency))
                finally:
                    app.close()
                outcome["round"] = n
                result["rounds"].append(outcome)
                print(json.dumps(outcome), file=sys.stderr, flush=True)
        result["drop"] = drop_partition(url, meters["move"], apps["move"].settings.schema_name)
    return result


def summary(result: dict[str, Any]) -> str:
    lines = [
        f"held (the retention window): {result['held']:,} finished jobs;"
        f" rounds of {result['round_jobs']:,} jobs; medians over the rounds",
        "",
        f"{'mode':8} {'drain/s':>8} {'retire s/1k':>12} {'retire WAL/job':>15}"
        f" {'vacuum s':>9} {'vacuum WAL/job':>15} {'jobs MB':>8} {'executions MB':>14}",
    ]
    for mode in ("delete", "move"):
        rs = [r for r in result["rounds"] if r["mode"] == mode]

        def med(key: str, rows: list[dict[str, Any]] = rs) -> float:
            return statistics.median(float(r[key]) for r in rows)

        retired = statistics.median(r["retired"] for r in rs) or 1
        lines.append(
            f"{mode:8} {med('drain_jobs_per_s'):>8.0f}"
            f" {med('retire_seconds') / retired * 1000:>12.3f}"
            f" {med('retire_wal_bytes') / retired:>15.0f} {med('vacuum_seconds'):>9.3f}"
            f" {med('vacuum_wal_bytes') / retired:>15.0f}"
            f" {rs[-1]['hot_bytes']['jobs'] / 2**20:>8.1f}"
            f" {rs[-1]['hot_bytes']['executions'] / 2**20:>14.1f}"
        )
    drop = result["drop"]
    lines.append("")
    lines.append(
        f"drop of one day's partitions: {drop['jobs']:,} jobs, {drop['bytes'] / 2**20:.0f} MB,"
        f" {drop['seconds']:.3f} s, {drop['wal']:,} bytes of WAL"
    )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--url", default=DEFAULT_URL)
    parser.add_argument("--held", type=int, default=1_000_000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--round-jobs", type=int, default=20_000)
    parser.add_argument("--concurrency", type=int, default=200)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    result = run(args.url, args.held, args.rounds, args.round_jobs, args.concurrency)
    print(json.dumps(result, indent=2) if args.json else summary(result))


if __name__ == "__main__":
    main()
