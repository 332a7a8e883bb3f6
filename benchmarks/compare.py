"""tickwork next to PgQueuer and Procrastinate: the same four workloads, one table.

Run with tickwork's virtualenv after ``bash benchmarks/setup_peers.sh``::

    .venv/bin/python benchmarks/compare.py            # --jobs 20000, 3 runs each, medians
    .venv/bin/python benchmarks/compare.py --quick    # smoke test: small N, one run
    .venv/bin/python benchmarks/compare.py --json     # machine-readable

It creates the database (``bench_compare`` by default) when missing, then runs, one system
at a time and never two at once, ``tickwork bench --json`` (at its default drain
concurrency and at each of ``--tickwork-concurrency``) and ``benchmarks/peers.py`` (in
``benchmarks/.venv-peers``) for PgQueuer and for Procrastinate, ``--repeats`` times, and
reports the median of each measurement.

With ``--ceiling`` each round also runs ``benchmarks/ceiling/run.py`` (tickwork's own
statements under pgbench: what the database allows them) and the table shows each
workload's figure as a fraction of its ceiling.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psycopg
from psycopg import sql
from psycopg.conninfo import conninfo_to_dict, make_conninfo

from tickwork.config import DEFAULT_CONCURRENCY
from tickwork.worker.worker import CLAIMS_IN_FLIGHT

HERE = Path(__file__).resolve().parent
PEERS_SCRIPT = HERE / "peers.py"
PEERS_PYTHON = HERE / ".venv-peers" / "bin" / "python"
CEILING_SCRIPT = HERE / "ceiling" / "run.py"
DEFAULT_URL = "postgresql://127.0.0.1:5432/bench_compare"
SYSTEMS = ("tickwork", "pgqueuer", "procrastinate")
LABELS = {"tickwork": "tickwork", "pgqueuer": "PgQueuer", "procrastinate": "Procrastinate"}
TICKWORK_DEFAULT_CONCURRENCY = DEFAULT_CONCURRENCY  # the worker's, with no options given
TICKWORK_CONCURRENCY = "200,500,1000,2000"
CEILING_SINGLE_CLIENTS = 1  # enqueue-single and enqueue-batch: one caller, one at a time
PG_SETTINGS = (
    "synchronous_commit",
    "fsync",
    "wal_level",
    "full_page_writes",
    "shared_buffers",
    "work_mem",
    "max_connections",
    "max_wal_size",
    "checkpoint_timeout",
    "autovacuum",
)
SUBPROCESS_TIMEOUT = 3600.0


def log(message: str) -> None:
    print(f"[compare] {message}", file=sys.stderr, flush=True)


# -- the database and the machine --------------------------------------------------------


def ensure_database(url: str) -> bool:
    """Create the URL's database if it does not exist; True if it was created."""
    params = conninfo_to_dict(url)
    name = str(params.get("dbname") or "")
    if not name:
        raise SystemExit(f"--url {url!r} names no database")
    maintenance = make_conninfo(url, dbname="postgres")
    with psycopg.connect(maintenance, autocommit=True) as conn:
        if conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", (name,)).fetchone():
            return False
        conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    log(f"created database {name}")
    return True


def postgres_environment(url: str) -> dict[str, Any]:
    with psycopg.connect(url, autocommit=True) as conn:
        row = conn.execute("SELECT version()").fetchone()
        settings = {}
        for name in PG_SETTINGS:
            value = conn.execute(sql.SQL("SHOW {}").format(sql.Identifier(name))).fetchone()
            settings[name] = str(value[0]) if value else "?"
    return {"version": str(row[0]) if row else "?", "settings": settings}


def cpu_busy(interval: float = 1.0) -> float:
    """Fraction of all CPUs busy over ``interval`` seconds (from /proc/stat)."""

    def sample() -> tuple[int, int]:
        with open("/proc/stat") as f:
            fields = [int(x) for x in f.readline().split()[1:]]
        idle = fields[3] + (fields[4] if len(fields) > 4 else 0)
        return idle, sum(fields)

    idle0, total0 = sample()
    time.sleep(interval)
    idle1, total1 = sample()
    total = total1 - total0
    return 0.0 if total <= 0 else 1.0 - (idle1 - idle0) / total


def wait_until_quiet(max_wait: float, threshold: float = 0.25) -> float | None:
    """Wait (up to ``max_wait`` s) for two quiet seconds in a row, as the machine is shared.

    Returns the busy fraction seen last when the machine never got quiet, else None.
    """
    if max_wait <= 0 or not os.path.exists("/proc/stat"):
        return None
    deadline = time.monotonic() + max_wait
    quiet = 0
    busy = 0.0
    warned = False
    while time.monotonic() < deadline:
        busy = cpu_busy()
        quiet = quiet + 1 if busy < threshold else 0
        if quiet >= 2:
            return None
        if not warned and busy >= threshold:
            log(
                f"machine busy ({busy:.0%} CPU) before a measurement;"
                f" waiting up to {max_wait:.0f} s"
            )
            warned = True
    log(f"machine still busy ({busy:.0%} CPU); measuring anyway")
    return busy


# -- running the systems -----------------------------------------------------------------


@dataclass
class Samples:
    """Every run's numbers, by system and measurement key."""

    values: dict[str, dict[str, list[float]]] = field(default_factory=dict)
    drain_settings: dict[str, dict[str, dict[str, Any]]] = field(default_factory=dict)
    environments: dict[str, dict[str, Any]] = field(default_factory=dict)
    busy_warnings: list[dict[str, Any]] = field(default_factory=list)
    runs: list[dict[str, Any]] = field(default_factory=list)

    def add(self, system: str, key: str, value: float) -> None:
        self.values.setdefault(system, {}).setdefault(key, []).append(value)

    def absorb_ceiling(self, output: dict[str, Any]) -> None:
        """benchmarks/ceiling/run.py's jobs/s, by script and number of clients."""
        self.environments.setdefault("ceiling", output.get("environment", {}))
        for result in output.get("results", []):
            clients = int(result["details"]["clients"])
            self.add("ceiling", ceiling_key(result["workload"], clients), result["per_second"])

    def absorb(self, system: str, output: dict[str, Any]) -> None:
        self.environments.setdefault(system, output.get("environment", {}))
        for result in output.get("results", []):
            workload = result["workload"]
            details = result.get("details", {})
            if workload in ("latency", "latency-loaded"):
                self.add(system, f"{workload}-p50", float(details["p50_ms"]))
                self.add(system, f"{workload}-p99", float(details["p99_ms"]))
            elif workload == "memory":
                self.add(system, "memory", float(details["mb_per_1000"]))
            elif workload == "drain":
                if system == "tickwork":
                    conc = int(details["concurrency"])
                    name = "default" if details.get("defaults") else f"concurrency={conc}"
                    if int(details.get("processes", 1)) > 1:
                        name += f", {details['processes']} processes"
                    settings = {"concurrency": conc, "processes": details.get("processes", 1)}
                    if "threads" in details:
                        settings["threads"] = details["threads"]
                else:
                    name = str(details.get("config", "default"))
                    settings = {
                        k: v for k, v in details.items() if k not in ("config", "handlers_done_s")
                    }
                # Every system's drain on the same clock: wall time from the worker's start
                # until the last completion is written (tickwork's own headline figure is
                # on the database clock, first claim to last outcome; kept as db_clock).
                rate = float(result["per_second"])
                if system == "tickwork" and details.get("wall_seconds"):
                    self.add(system, f"db_clock:{name}", rate)
                    rate = int(result["jobs"]) / float(details["wall_seconds"])
                self.add(system, f"drain:{name}", rate)
                self.drain_settings.setdefault(system, {})[name] = settings
            else:
                self.add(system, workload, float(result["per_second"]))


def run_json(command: list[str], env: dict[str, str], what: str) -> dict[str, Any]:
    start = time.perf_counter()
    proc = subprocess.run(
        command,
        env=env,
        capture_output=True,
        text=True,
        timeout=SUBPROCESS_TIMEOUT,
        check=False,
    )
    if proc.returncode != 0:
        sys.stderr.write(proc.stderr[-5000:])
        raise SystemExit(f"{what} failed (exit {proc.returncode}): {' '.join(command)}")
    log(f"  {what}: {time.perf_counter() - start:.1f} s")
    parsed: dict[str, Any] = json.loads(proc.stdout)
    return parsed


def run_tickwork(
    args: argparse.Namespace, workloads: list[str], concurrency: int | None, processes: int = 1
) -> dict[str, Any]:
    """``tickwork bench`` of ``workloads``; ``concurrency`` None: the worker's defaults."""
    env = dict(os.environ)
    env["TICKWORK_DATABASE_URL"] = args.url
    env.pop("TICKWORK_SCHEMA", None)
    command = [
        sys.executable,
        "-m",
        "tickwork",
        "bench",
        "--json",
        "--workload",
        ",".join(workloads),
        "--jobs",
        str(args.jobs),
        *(["--concurrency", str(concurrency)] if concurrency is not None else []),
        "--processes",
        str(processes),
        "--batch",
        str(args.batch),
        "--rate",
        str(args.rate),
        "--latency-jobs",
        str(args.latency_jobs),
    ]
    setting = "defaults" if concurrency is None else f"concurrency {concurrency}"
    if processes > 1:
        setting += f", {processes} processes"
    return run_json(command, env, f"tickwork {','.join(workloads)} ({setting})")


def ceiling_key(script: str, clients: int) -> str:
    """A ceiling sample's key: its script (``ceiling:cycle-100``) at a number of clients."""
    return f"{script}@{clients}"


def drain_clients() -> int:
    """pgbench clients matching one worker process's drain: its claims in flight, each on a
    connection of its own (the outcome writer's statements take turns with them)."""
    return CLAIMS_IN_FLIGHT


def claim_batch(concurrency: int) -> int:
    """The jobs one claim of a worker at ``concurrency`` asks for (see worker.py)."""
    return max(1, -(-concurrency // CLAIMS_IN_FLIGHT))


def run_ceiling(args: argparse.Namespace) -> dict[str, Any]:
    concurrencies = {TICKWORK_DEFAULT_CONCURRENCY, *args.tickwork_concurrency}
    batches = sorted({claim_batch(c) for c in concurrencies})
    clients = sorted({CEILING_SINGLE_CLIENTS, drain_clients()})
    command = [
        sys.executable,
        str(CEILING_SCRIPT),
        "--json",
        "--url",
        args.url,
        "--workloads",
        "insert-single,insert-batch,cycle",
        "--clients",
        ",".join(map(str, clients)),
        "--batches",
        ",".join(map(str, batches)),
        "--insert-batch",
        str(args.batch),
        "--seconds",
        str(args.ceiling_seconds),
        "--rows",
        str(args.ceiling_rows),
    ]
    return run_json(command, dict(os.environ), "ceiling")


def run_peer(args: argparse.Namespace, system: str) -> dict[str, Any]:
    command = [
        str(args.peers_python),
        str(PEERS_SCRIPT),
        system,
        "--url",
        args.url,
        "--jobs",
        str(args.jobs),
        "--batch",
        str(args.batch),
        "--rate",
        str(args.rate),
        "--latency-jobs",
        str(args.latency_jobs),
    ]
    for config in args.peer_drain_configs:
        command += ["--drain-config", config]
    env = dict(os.environ)
    env.pop("PYTHONPATH", None)
    return run_json(command, env, system)


def measure(args: argparse.Namespace) -> Samples:
    samples = Samples()
    extra = [c for c in args.tickwork_concurrency if c != TICKWORK_DEFAULT_CONCURRENCY]
    for run in range(1, args.repeats + 1):
        for system in args.systems:
            log(f"run {run}/{args.repeats}: {LABELS[system]}")
            outputs: list[dict[str, Any]] = []
            steps: list[tuple[list[str], int | None, int]] = (
                [(["enqueue-single", "enqueue-batch", "drain", "latency"], None, 1)]
                + [(["drain"], c, 1) for c in extra]
                + [(["drain"], None, 2), (["latency-loaded", "memory"], None, 1)]
                if system == "tickwork"
                else [([], 0, 1)]
            )
            for workloads, concurrency, processes in steps:
                busy = wait_until_quiet(args.quiet_wait)
                if busy is not None:
                    samples.busy_warnings.append({"run": run, "system": system, "busy": busy})
                if system == "tickwork":
                    outputs.append(run_tickwork(args, workloads, concurrency, processes))
                else:
                    outputs.append(run_peer(args, system))
            for output in outputs:
                samples.absorb(system, output)
                samples.runs.append({"run": run, "system": system, **output})
        if args.ceiling:
            log(f"run {run}/{args.repeats}: the database's ceiling (pgbench)")
            busy = wait_until_quiet(args.quiet_wait)
            if busy is not None:
                samples.busy_warnings.append({"run": run, "system": "ceiling", "busy": busy})
            output = run_ceiling(args)
            samples.absorb_ceiling(output)
            samples.runs.append({"run": run, "system": "ceiling", **output})
    return samples


# -- the report --------------------------------------------------------------------------


def median(values: list[float] | None) -> float | None:
    return statistics.median(values) if values else None


@dataclass
class Row:
    workload: str
    unit: str
    higher_is_better: bool
    medians: dict[str, float | None]
    settings: dict[str, str] = field(default_factory=dict)
    spreads: dict[str, tuple[float, float] | None] = field(default_factory=dict)
    ceiling: float | None = None
    """The median jobs/s of the matching ceiling script (``--ceiling``)."""
    ceiling_script: str = ""
    ceiling_spread: tuple[float, float] | None = None

    def ratio(self, peer: str) -> float | None:
        ours, theirs = self.medians.get("tickwork"), self.medians.get(peer)
        if ours is None or not theirs:
            return None
        return ours / theirs

    def of_ceiling(self, system: str) -> float | None:
        figure = self.medians.get(system)
        if figure is None or not self.ceiling:
            return None
        return figure / self.ceiling


def describe(settings: dict[str, Any]) -> str:
    return ", ".join(f"{k}={v}" for k, v in settings.items()) or "library defaults"


def build_rows(samples: Samples, args: argparse.Namespace) -> list[Row]:
    rows: list[Row] = []
    single = min(args.jobs, 5000)

    def simple(key: str, label: str, unit: str, higher: bool) -> Row:
        medians = {s: median(samples.values.get(s, {}).get(key)) for s in args.systems}
        spreads = {
            s: (min(v), max(v)) if (v := samples.values.get(s, {}).get(key)) else None
            for s in args.systems
        }
        return Row(label, unit, higher, medians, spreads=spreads)

    rows.append(simple("enqueue-single", f"enqueue-single ({single:,} jobs)", "jobs/s", True))
    rows.append(
        simple(
            "enqueue-batch", f"enqueue-batch ({args.jobs:,}, batch {args.batch})", "jobs/s", True
        )
    )
    default = Row(f"drain ({args.jobs:,}), default settings", "jobs/s", True, {})
    best = Row(f"drain ({args.jobs:,}), best setting", "jobs/s", True, {})
    best_names: dict[str, str] = {}
    for system in args.systems:
        drains = {
            key.split(":", 1)[1]: values
            for key, values in samples.values.get(system, {}).items()
            if key.startswith("drain:")
        }
        settings = samples.drain_settings.get(system, {})
        if "default" in drains:
            default.medians[system] = median(drains["default"])
            default.spreads[system] = (min(drains["default"]), max(drains["default"]))
            default.settings[system] = describe(settings.get("default", {}))
        if drains:
            name, values = max(drains.items(), key=lambda item: statistics.median(item[1]))
            best_names[system] = name
            best.medians[system] = median(values)
            best.spreads[system] = (min(values), max(values))
            best.settings[system] = describe(settings.get(name, {})) + (
                " (its default)" if name == "default" else ""
            )
    rows += [default, best]
    rows.append(simple("latency-p50", f"latency p50 ({args.rate:g} jobs/s)", "ms", False))
    rows.append(simple("latency-p99", f"latency p99 ({args.rate:g} jobs/s)", "ms", False))
    two = "drain:default, 2 processes"  # worker processes: timed on the database clock
    if any(two in samples.values.get(s, {}) for s in args.systems):
        label = f"drain ({args.jobs:,}), default settings, database clock"
        rows.append(simple("db_clock:default", f"{label}, 1 process", "jobs/s", True))
        rows.append(simple(two, f"{label}, 2 processes", "jobs/s", True))
    loaded = "under 5,000 jobs/s of other jobs"
    if any("latency-loaded-p50" in samples.values.get(s, {}) for s in args.systems):
        rows.append(simple("latency-loaded-p50", f"latency p50, {loaded}", "ms", False))
        rows.append(simple("latency-loaded-p99", f"latency p99, {loaded}", "ms", False))
    if any("memory" in samples.values.get(s, {}) for s in args.systems):
        rows.append(simple("memory", "worker RSS per 1,000 jobs in flight", "MB", False))
    if args.ceiling:
        best_setting = samples.drain_settings.get("tickwork", {}).get(
            best_names.get("tickwork", "default"), {}
        )
        best_concurrency = int(best_setting.get("concurrency", TICKWORK_DEFAULT_CONCURRENCY))
        matches = [
            (rows[0], "ceiling:insert-single", CEILING_SINGLE_CLIENTS),
            (rows[1], f"ceiling:insert-batch-{args.batch}", CEILING_SINGLE_CLIENTS),
            (
                default,
                f"ceiling:cycle-{claim_batch(TICKWORK_DEFAULT_CONCURRENCY)}",
                drain_clients(),
            ),
            (best, f"ceiling:cycle-{claim_batch(best_concurrency)}", drain_clients()),
        ]
        for row, script, clients in matches:
            values = samples.values.get("ceiling", {}).get(ceiling_key(script, clients))
            row.ceiling = median(values)
            row.ceiling_spread = (min(values), max(values)) if values else None
            row.ceiling_script = f"{script.removeprefix('ceiling:')}, {clients} client(s)"
    return rows


def fmt(value: float | None, unit: str) -> str:
    if value is None:
        return "-"
    if unit in ("ms", "MB"):
        return f"{value:.2f}"
    return f"{value:,.0f}"


def table(rows: list[Row], systems: list[str], *, ceiling: bool = False) -> str:
    peers = [s for s in systems if s != "tickwork"]
    header = ["workload", "unit"] + [LABELS[s] for s in systems]
    if "tickwork" in systems:
        header += [f"tickwork/{LABELS[p]}" for p in peers]
    if ceiling:
        header += ["ceiling"] + [f"{LABELS[s]}/ceiling" for s in systems]
    lines = [header]
    for row in rows:
        line = [row.workload, row.unit] + [fmt(row.medians.get(s), row.unit) for s in systems]
        if "tickwork" in systems:
            for peer in peers:
                ratio = row.ratio(peer)
                line.append("-" if ratio is None else f"{ratio:.2f}x")
        if ceiling:
            line.append(fmt(row.ceiling, row.unit))
            for system in systems:
                share = row.of_ceiling(system)
                line.append("-" if share is None else f"{share:.2f}")
        lines.append(line)
    widths = [max(len(line[i]) for line in lines) for i in range(len(header))]
    out = []
    for n, line in enumerate(lines):
        cells = [
            cell.ljust(widths[i]) if i < 2 else cell.rjust(widths[i]) for i, cell in enumerate(line)
        ]
        out.append("  ".join(cells).rstrip())
        if n == 0:
            out.append("  ".join("-" * w for w in widths))
    return "\n".join(out)


def versions(samples: Samples) -> dict[str, str]:
    found = {"tickwork": importlib.metadata.version("tickwork")}
    for system in ("pgqueuer", "procrastinate"):
        env = samples.environments.get(system, {})
        for package, version in env.get("versions", {}).items():
            found[package] = version
    return found


def report_text(
    rows: list[Row], samples: Samples, args: argparse.Namespace, pg: dict[str, Any], took: float
) -> str:
    out = [
        f"tickwork vs PgQueuer vs Procrastinate — median of {args.repeats} run(s) each",
        "",
        table(rows, args.systems, ceiling=args.ceiling),
        "",
        "Ratios are tickwork/peer: above 1 means tickwork is faster for jobs/s rows, and"
        " slower for ms rows (latency: lower is better).",
        "",
        "drain settings:",
    ]
    for row in rows:
        if row.settings:
            out.append(f"  {row.workload}:")
            for system in args.systems:
                if system in row.settings:
                    out.append(f"    {LABELS[system]}: {row.settings[system]}")
    if args.ceiling:
        out.append("")
        out.append(
            "ceiling: tickwork's own statements under pgbench (benchmarks/ceiling/run.py);"
            " X/ceiling is each system's figure over it. Matched scripts:"
        )
        for row in rows:
            if row.ceiling_script:
                spread = row.ceiling_spread
                span = f"; spread {fmt(spread[0], 'u')}-{fmt(spread[1], 'u')}" if spread else ""
                out.append(f"  {row.workload}: {row.ceiling_script}{span}")
    out.append("")
    out.append("spread (min-max over runs):")
    for row in rows:
        parts = [
            f"{LABELS[s]} {fmt(lo, row.unit)}-{fmt(hi, row.unit)}"
            for s in args.systems
            if (spread := row.spreads.get(s)) is not None
            for lo, hi in [spread]
        ]
        out.append(f"  {row.workload}: " + "; ".join(parts))
    out.append("")
    out.append(f"PostgreSQL: {pg['version']}")
    out.append("  " + ", ".join(f"{k}={v}" for k, v in pg["settings"].items()))
    loops = {
        LABELS[s]: samples.environments.get(s, {}).get("event_loop", "asyncio")
        for s in args.systems
    }
    out.append(
        f"Python {platform.python_version()}, {os.cpu_count()} CPUs, {platform.machine()};"
        " event loops: " + ", ".join(f"{k} {v}" for k, v in loops.items())
    )
    out.append("versions: " + ", ".join(f"{k} {v}" for k, v in versions(samples).items()))
    if samples.busy_warnings:
        out.append(
            f"WARNING: {len(samples.busy_warnings)} measurement(s) started while the machine"
            " was busy with other work; their numbers may be low."
        )
    out.append(f"total time: {took:.0f} s")
    return "\n".join(out)


def report_json(
    rows: list[Row], samples: Samples, args: argparse.Namespace, pg: dict[str, Any], took: float
) -> dict[str, Any]:
    return {
        "postgres": pg,
        "python": platform.python_version(),
        "cpus": os.cpu_count(),
        "versions": versions(samples),
        "config": {
            "jobs": args.jobs,
            "batch": args.batch,
            "rate": args.rate,
            "latency_jobs": args.latency_jobs,
            "repeats": args.repeats,
            "tickwork_concurrency": args.tickwork_concurrency,
            "peer_drain_configs": args.peer_drain_configs or "all presets",
            **(
                {"ceiling_seconds": args.ceiling_seconds, "ceiling_rows": args.ceiling_rows}
                if args.ceiling
                else {}
            ),
        },
        "rows": [
            {
                "workload": r.workload,
                "unit": r.unit,
                "median": r.medians,
                "spread": r.spreads,
                "settings": r.settings,
                "ratio_tickwork_over": {p: r.ratio(p) for p in args.systems if p != "tickwork"},
                **(
                    {
                        "ceiling": r.ceiling,
                        "ceiling_script": r.ceiling_script,
                        "ceiling_spread": r.ceiling_spread,
                        "ratio_over_ceiling": {s: r.of_ceiling(s) for s in args.systems},
                    }
                    if args.ceiling
                    else {}
                ),
            }
            for r in rows
        ],
        "samples": samples.values,
        "drain_settings": samples.drain_settings,
        "environments": samples.environments,
        "busy_warnings": samples.busy_warnings,
        "seconds": round(took, 1),
        "runs": samples.runs,
    }


# -- main --------------------------------------------------------------------------------


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--jobs", type=int, default=None, help="jobs per throughput workload")
    parser.add_argument("--quick", action="store_true", help="smoke test: small N, one run")
    parser.add_argument("--json", action="store_true", help="print JSON instead of a table")
    parser.add_argument(
        "--save", type=Path, default=None, help="also write the JSON report to this file"
    )
    parser.add_argument("--repeats", type=int, default=None, help="runs per measurement")
    parser.add_argument(
        "--url",
        default=os.environ.get("BENCH_DATABASE_URL", DEFAULT_URL),
        help=f"database (created if missing; default $BENCH_DATABASE_URL or {DEFAULT_URL})",
    )
    parser.add_argument("--batch", type=int, default=1000, help="batch size (enqueue-batch)")
    parser.add_argument("--rate", type=float, default=50.0, help="jobs per second (latency)")
    parser.add_argument("--latency-jobs", type=int, default=None, help="jobs measured (latency)")
    parser.add_argument(
        "--tickwork-concurrency",
        default=None,
        help=f"tickwork drain concurrencies to try (default {TICKWORK_CONCURRENCY}; "
        f"{TICKWORK_DEFAULT_CONCURRENCY} is its default)",
    )
    parser.add_argument(
        "--systems", default=",".join(SYSTEMS), help="comma-separated: " + ", ".join(SYSTEMS)
    )
    parser.add_argument(
        "--peers-python", type=Path, default=PEERS_PYTHON, help="python of the peers' venv"
    )
    parser.add_argument(
        "--quiet-wait",
        type=float,
        default=120.0,
        help="before each measurement wait up to this many seconds for the machine to be"
        " idle (0: don't wait)",
    )
    parser.add_argument(
        "--ceiling",
        action="store_true",
        help="each round, also run benchmarks/ceiling/run.py (pgbench) and show every figure"
        " as a fraction of its ceiling",
    )
    parser.add_argument(
        "--ceiling-seconds", type=float, default=None, help="length of a ceiling insert run (10)"
    )
    parser.add_argument(
        "--ceiling-rows",
        type=int,
        default=None,
        help="jobs a ceiling cycle run uses up (default --jobs: the drains' queue depth)",
    )
    args = parser.parse_args(argv)
    args.ceiling_seconds = args.ceiling_seconds or (2.0 if args.quick else 10.0)
    args.jobs = args.jobs or (2000 if args.quick else 20_000)
    args.ceiling_rows = args.ceiling_rows or args.jobs
    args.repeats = args.repeats or (1 if args.quick else 3)
    args.latency_jobs = args.latency_jobs or (50 if args.quick else 500)
    concurrency = args.tickwork_concurrency or ("200,1000" if args.quick else TICKWORK_CONCURRENCY)
    args.tickwork_concurrency = [int(c) for c in concurrency.split(",") if c.strip()]
    # peers.py runs all of its drain presets unless told; --quick keeps default and tuned
    args.peer_drain_configs = ["default", "tuned"] if args.quick else []
    args.systems = [s.strip() for s in args.systems.split(",") if s.strip()]
    for system in args.systems:
        if system not in SYSTEMS:
            parser.error(f"--systems: {system!r} is not one of {', '.join(SYSTEMS)}")
    if any(s != "tickwork" for s in args.systems) and not args.peers_python.exists():
        parser.error(f"{args.peers_python} not found: run `bash benchmarks/setup_peers.sh` first")
    return args


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    start = time.perf_counter()
    ensure_database(args.url)
    pg = postgres_environment(args.url)
    samples = measure(args)
    took = time.perf_counter() - start
    rows = build_rows(samples, args)
    report = report_json(rows, samples, args, pg, took)
    if args.save:
        args.save.write_text(json.dumps(report, indent=2) + "\n")
    if args.json:
        print(json.dumps(report, indent=2))
    else:
        print(report_text(rows, samples, args, pg, took))


if __name__ == "__main__":
    main()
