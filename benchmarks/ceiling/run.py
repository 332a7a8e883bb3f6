"""The database's ceiling for tickwork's job path: tickwork's own statements run by pgbench.

    .venv/bin/python benchmarks/ceiling/run.py                      # 10 s or 100,000 jobs a run
    .venv/bin/python benchmarks/ceiling/run.py --clients 1,2 --json
    .venv/bin/python benchmarks/ceiling/run.py --workloads cycle --batches 500

Each run is one pgbench script (``scripts.py``) at 1, 2, 4 and 8 clients (one thread each),
``-M prepared``, in a scratch schema that tickwork makes, migrates (so the tables and indexes
are the real ones), empties before every run and drops at the end:

- insert-single: ``job_insert`` (with its pg_notify), one job per transaction, ``--seconds``;
- insert-batch: ``--insert-batch`` (1,000) jobs in the statement ``enqueue_many`` sends for
  them (``job_insert_many_keyless``: the bench's jobs have no unique key), ``--seconds``;
- claim-N: ``job_claim`` of N jobs per transaction from a table filled beforehand;
- complete-N: ``job_complete_many`` of N outcomes of RUNNING attempts claimed beforehand;
- cycle-N: the claim of N and the write of their outcomes, the drain without the worker.

The last three use up jobs, so they run a fixed number of transactions per client, enough
for about ``--rows`` jobs, from a table holding more than that (never dry). Every figure is
jobs per second: the jobs the run moved, counted in the tables afterwards, per second of
pgbench's run (transactions / tps).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import secrets
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import psycopg
from psycopg import sql
from psycopg.conninfo import conninfo_to_dict, make_conninfo
from scripts import Script, Scripts, claim_batch

from tickwork.cli import bench
from tickwork.db.scratch import scratch_schema
from tickwork.queue import rows as decode
from tickwork.queue.enqueue import JobSpec

DEFAULT_URL = "postgresql://127.0.0.1:5432/bench_ceiling"
SCHEMA_PREFIX = "tickwork_ceiling_"
WORKLOADS = ("insert-single", "insert-batch", "claim", "complete", "cycle")
CONSUMING = ("claim", "complete", "cycle")
CONCURRENCIES = (200, 1000, 2000)
"""Worker concurrencies whose claim batches are measured by default (``tickwork bench``'s
default, and the best settings compare.py finds)."""
FILL_BATCH = 5000
BATCHES_TABLE = "ceiling_batches"
"""complete-N's outcome batches, one row per client and transaction (in the scratch schema)."""
PG_SETTINGS = ("synchronous_commit", "fsync", "shared_buffers", "max_wal_size", "autovacuum")
PGBENCH_TIMEOUT = 3600.0


def log(message: str) -> None:
    print(f"[ceiling] {message}", file=sys.stderr, flush=True)


@dataclass
class Run:
    """One script at one number of clients: what pgbench and the tables said."""

    workload: str
    """``ceiling:`` and the script's name, e.g. ``ceiling:cycle-500``."""
    jobs: int
    """Jobs the run inserted, claimed or completed, counted in the tables."""
    seconds: float
    per_second: float
    """Jobs per second."""
    details: dict[str, Any] = field(default_factory=dict)


# -- pgbench -----------------------------------------------------------------------------


def pgbench_binary() -> str:
    found = os.environ.get("PGBENCH") or shutil.which("pgbench")
    if not found:
        raise SystemExit("pgbench not found (set $PGBENCH or put it on PATH)")
    return found


def parse(output: str) -> dict[str, Any]:
    """pgbench's summary: transactions, failed, tps, average latency (ms), and the average
    latency of each statement of the script (ms, with ``-r``)."""

    def number(pattern: str) -> float | None:
        match = re.search(pattern, output, re.MULTILINE)
        return float(match.group(1)) if match else None

    transactions = number(r"^number of transactions actually processed: (\d+)")
    tps = number(r"^tps = ([\d.]+) \(without initial connection time\)")
    if transactions is None or tps is None:
        raise RuntimeError("pgbench printed no summary:\n" + output[-3000:])
    statements = []
    report = output.split("statement latencies in milliseconds", 1)
    if len(report) == 2:
        for line in report[1].splitlines()[1:]:
            match = re.match(r"\s+([\d.]+)\s+(\d+)\s+(?:\d+\s+)?(\S.*)", line)
            if match:
                statements.append(
                    {
                        "ms": float(match.group(1)),
                        "failed": int(match.group(2)),
                        "statement": match.group(3)[:60],
                    }
                )
    return {
        "transactions": int(transactions),
        "failed": int(number(r"^number of failed transactions: (\d+)") or 0),
        "tps": tps,
        "latency_ms": number(r"^latency average = ([\d.]+) ms"),
        "statements": statements,
    }


def pgbench(
    url: str, script: Script, workdir: Path, clients: int, *, seconds: float, transactions: int
) -> dict[str, Any]:
    """Run ``script`` at ``clients``: for ``seconds``, or ``transactions`` per client."""
    path = workdir / f"{script.name}.sql"
    path.write_text(script.text)
    command = [pgbench_binary(), "-n", "-M", "prepared", "-r", "-c", str(clients)]
    command += ["-j", str(clients), "-f", str(path)]
    if transactions > 0:
        command += ["-t", str(transactions)]
    else:
        command += ["-T", str(max(1, round(seconds)))]
    for name, value in script.variables.items():
        command += ["-D", f"{name}={value}"]
    command.append(url)
    env = dict(os.environ)
    given = " ".join(f"-c {name}={value}" for name, value in script.settings.items())
    env["PGOPTIONS"] = f"{env.get('PGOPTIONS', '')} {given}".strip()
    env.setdefault("PGAPPNAME", "tickwork-ceiling")
    proc = subprocess.run(
        command, env=env, capture_output=True, text=True, timeout=PGBENCH_TIMEOUT, check=False
    )
    if proc.returncode != 0:
        raise RuntimeError(
            f"pgbench {script.name} at {clients} client(s) failed (exit {proc.returncode}):\n"
            + (proc.stderr + proc.stdout)[-3000:]
        )
    result = parse(proc.stdout)
    result["aborted"] = "aborted" in proc.stdout + proc.stderr
    return result


# -- the tables --------------------------------------------------------------------------


def counts(conn: psycopg.Connection[Any], schema: str) -> dict[str, dict[str, int]]:
    """Jobs and executions by state."""
    out: dict[str, dict[str, int]] = {}
    for table in ("jobs", "executions"):
        rows = conn.execute(
            sql.SQL("SELECT state, count(*) FROM {}.{} GROUP BY state ORDER BY state").format(
                sql.Identifier(schema), sql.Identifier(table)
            )
        ).fetchall()
        out[table] = {str(state): int(n) for state, n in rows}
    return out


def fill(app: Any, jobs: int) -> None:
    """``jobs`` PENDING jobs through tickwork's enqueue (``enqueue_many``), then vacuumed and
    analysed, as ``tickwork bench`` fills a drain."""
    bench.reset(app)
    for offset in range(0, jobs, FILL_BATCH):
        size = min(FILL_BATCH, jobs - offset)
        app.enqueue_many([JobSpec(bench.NOOP, {"n": offset + i}) for i in range(size)])
    vacuum(app)


def vacuum(app: Any) -> None:
    with app.db.pool().connection() as conn:
        conn.execute(app.db.statements["job_tables_vacuum"])


def claim_all(app: Any, scripts: Scripts, size: int, batches: int) -> list[str]:
    """Claim ``batches`` batches of ``size`` with the worker's claim; each batch's outcomes
    (SUCCEEDED) as the completer would send them."""
    out = []
    claim = app.db.statements["job_claim"]
    with app.db.pool().connection() as conn:
        for _ in range(batches):
            rows = conn.execute(claim, scripts.claim_params(size)).fetchall()
            if len(rows) != size:
                raise RuntimeError(f"claimed {len(rows)} jobs, not {size}: the fill is short")
            claimed, _ = decode.claimed(rows)  # the worker's reading of the claim's answer
            out.append(scripts.outcomes([(job.id, execution) for job, execution, _ in claimed]))
    return out


def store_batches(app: Any, batches: list[str], clients: int) -> None:
    """complete-N's batches as rows (client, k) -> outcomes; client c's transaction k (from 1)
    writes batch (k - 1) * clients + c, so the clients take the batches in claim order."""
    schema = app.settings.schema_name
    table = sql.Identifier(schema, BATCHES_TABLE)
    with app.db.pool().connection() as conn:
        conn.execute(
            sql.SQL(
                "CREATE TABLE {} (client int, k int, outcomes text, PRIMARY KEY (client, k))"
            ).format(table)
        )
        with conn.cursor() as cur:
            cur.executemany(
                sql.SQL("INSERT INTO {} VALUES (%s, %s, %s)").format(table),
                [(n % clients, n // clients + 1, text) for n, text in enumerate(batches)],
            )
        conn.execute(sql.SQL("ANALYZE {}").format(table))


def drop_batches(app: Any) -> None:
    with app.db.pool().connection() as conn:
        conn.execute(
            sql.SQL("DROP TABLE IF EXISTS {}").format(
                sql.Identifier(app.settings.schema_name, BATCHES_TABLE)
            )
        )


# -- the runs ----------------------------------------------------------------------------


def measure(
    app: Any,
    scripts: Scripts,
    workload: str,
    size: int,
    clients: int,
    args: argparse.Namespace,
    workdir: Path,
) -> Run:
    schema = app.settings.schema_name
    transactions = 0
    if workload in CONSUMING:
        transactions = max(args.min_transactions, args.rows // (clients * size))
    needed = transactions * clients * size
    if workload == "insert-single":
        bench.reset(app)
        script = scripts.insert_single()
    elif workload == "insert-batch":
        bench.reset(app)
        script = scripts.insert_batch(size)
    elif workload == "claim":
        fill(app, needed + clients * size)  # a claim racing the last ones may come up short
        script = scripts.claim(size)
    elif workload == "cycle":
        fill(app, needed + clients * size)
        script = scripts.cycle(size)
    else:  # complete
        fill(app, needed)
        store_batches(app, claim_all(app, scripts, size, transactions * clients), clients)
        vacuum(app)
        script = scripts.complete(size, BATCHES_TABLE)
    log(f"{script.name} at {clients} client(s)")
    with app.db.pool().connection() as conn:
        before = counts(conn, schema)
    result = pgbench(
        args.url, script, workdir, clients, seconds=args.seconds, transactions=transactions
    )
    with app.db.pool().connection() as conn:
        after = counts(conn, schema)
    if workload == "complete":
        drop_batches(app)
    moved = {
        "insert-single": sum(after["jobs"].values()),
        "insert-batch": sum(after["jobs"].values()),
        "claim": sum(after["executions"].values()),
        "complete": after["executions"].get("SUCCEEDED", 0),
        "cycle": after["jobs"].get("SUCCEEDED", 0),
    }[workload]
    elapsed = result["transactions"] / result["tps"] if result["tps"] else 0.0
    details = {
        "clients": clients,
        "batch": size,
        "rows_per_transaction": round(moved / result["transactions"], 3)
        if result["transactions"]
        else 0,
        "tps": round(result["tps"], 1),
        "transactions": result["transactions"],
        "failed": result["failed"],
        "aborted": result["aborted"],
        "latency_ms": result["latency_ms"],
        "statements": result["statements"],
        "settings": script.settings,
        "before": before,
        "after": after,
    }
    return Run(
        f"ceiling:{script.name}",
        moved,
        round(elapsed, 3),
        round(moved / elapsed, 1) if elapsed else 0.0,
        details,
    )


def environment(url: str) -> dict[str, Any]:
    with psycopg.connect(url, autocommit=True) as conn:
        version = conn.execute("SHOW server_version").fetchone()
        settings = {
            n: str(row[0])
            for n in PG_SETTINGS
            if (row := conn.execute(sql.SQL("SHOW {}").format(sql.Identifier(n))).fetchone())
        }
    pgbench_version = subprocess.run(
        [pgbench_binary(), "--version"], capture_output=True, text=True, check=False
    ).stdout.strip()
    return {
        "postgres": str(version[0]) if version else "?",
        "settings": settings,
        "pgbench": pgbench_version,
        "python": platform.python_version(),
        "cpus": os.cpu_count() or 0,
        "machine": platform.machine(),
    }


def ensure_database(url: str) -> None:
    """Create the URL's database if it does not exist."""
    name = str(conninfo_to_dict(url).get("dbname") or "")
    if not name:
        raise SystemExit(f"--url {url!r} names no database")
    with psycopg.connect(make_conninfo(url, dbname="postgres"), autocommit=True) as conn:
        if not conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", (name,)).fetchone():
            conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
            log(f"created database {name}")


def run(args: argparse.Namespace) -> dict[str, Any]:
    schema = SCHEMA_PREFIX + secrets.token_hex(4)
    app = bench.make_app(database_url=args.url, schema=schema)
    scripts = Scripts(app)
    runs: list[Run] = []
    started = time.perf_counter()
    with scratch_schema(app.db, "bench", close=app.close), tempfile.TemporaryDirectory() as tmp:
        app.migrate()
        env = environment(args.url)
        for workload in args.workloads:
            sizes = {"insert-single": [1], "insert-batch": [args.insert_batch]}.get(
                workload, args.batches
            )
            for size in sizes:
                for clients in args.clients:
                    runs.append(measure(app, scripts, workload, size, clients, args, Path(tmp)))
    env["schema"] = schema
    env["seconds"] = round(time.perf_counter() - started, 1)
    return {"environment": env, "results": [asdict(r) for r in runs]}


# -- the report --------------------------------------------------------------------------


def table(report: dict[str, Any]) -> str:
    results = report["results"]
    clients = sorted({r["details"]["clients"] for r in results})
    names = list(dict.fromkeys(r["workload"].removeprefix("ceiling:") for r in results))
    by = {(r["workload"].removeprefix("ceiling:"), r["details"]["clients"]): r for r in results}
    header = ["script", "jobs/tx"] + [f"{c} client{'s' if c > 1 else ''}" for c in clients]
    lines = [header]
    for name in names:
        first = next(r for r in results if r["workload"] == f"ceiling:{name}")
        line = [name, f"{first['details']['batch']:,}"]
        for c in clients:
            r = by.get((name, c))
            if r is None:
                line.append("-")
                continue
            mark = " !" if r["details"]["failed"] or r["details"]["aborted"] else ""
            line.append(f"{r['per_second']:,.0f} ({r['details']['latency_ms']:.1f} ms){mark}")
        lines.append(line)
    widths = [max(len(line[i]) for line in lines) for i in range(len(header))]
    out = []
    for n, line in enumerate(lines):
        cells = [c.ljust(widths[i]) if i == 0 else c.rjust(widths[i]) for i, c in enumerate(line)]
        out.append("  ".join(cells))
        if n == 0:
            out.append("  ".join("-" * w for w in widths))
    env = report["environment"]
    out += [
        "",
        "jobs/s (average latency of one transaction); ! marks a run with failed transactions",
        f"PostgreSQL {env['postgres']}: "
        + ", ".join(f"{k}={v}" for k, v in env["settings"].items()),
        f"{env['pgbench']}, -M prepared; {env['cpus']} CPUs; {env['seconds']:.0f} s",
    ]
    return "\n".join(out)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument(
        "--url",
        default=os.environ.get("BENCH_DATABASE_URL", DEFAULT_URL),
        help=f"database (created if missing; default $BENCH_DATABASE_URL or {DEFAULT_URL})",
    )
    parser.add_argument("--seconds", type=float, default=10.0, help="length of an insert run")
    parser.add_argument(
        "--rows", type=int, default=100_000, help="jobs a claim, complete or cycle run uses up"
    )
    parser.add_argument(
        "--min-transactions",
        type=int,
        default=5,
        help="fewest transactions per client in a claim, complete or cycle run",
    )
    parser.add_argument("--clients", default="1,2,4,8", help="numbers of clients (-c, -j)")
    parser.add_argument(
        "--batches",
        default=None,
        help="claim, complete and cycle batch sizes (default: the claim batches of a worker"
        f" at concurrency {', '.join(map(str, CONCURRENCIES))})",
    )
    parser.add_argument("--insert-batch", type=int, default=1000, help="jobs per insert-batch")
    parser.add_argument(
        "--workloads", default=",".join(WORKLOADS), help="comma-separated: " + ", ".join(WORKLOADS)
    )
    parser.add_argument("--json", action="store_true", help="print JSON instead of a table")
    args = parser.parse_args(argv)
    args.clients = [int(c) for c in args.clients.split(",") if c.strip()]
    batches = args.batches or ",".join(str(claim_batch(c)) for c in CONCURRENCIES)
    args.batches = [int(b) for b in batches.split(",") if b.strip()]
    args.workloads = [w.strip() for w in args.workloads.split(",") if w.strip()]
    for workload in args.workloads:
        if workload not in WORKLOADS:
            parser.error(f"--workloads: {workload!r} is not one of {', '.join(WORKLOADS)}")
    return args


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    pgbench_binary()
    ensure_database(args.url)
    report = run(args)
    print(json.dumps(report, indent=2) if args.json else table(report))


if __name__ == "__main__":
    main()
