"""Run the tests that prove tickwork's reliability and security claims, and turn what they
recorded (tests/figures.py) into the tables of docs/reliability.md and docs/security.md.

    .venv/bin/python benchmarks/figures.py            # the short versions (what CI runs)
    .venv/bin/python benchmarks/figures.py --long     # more kills, more jobs, a one-hour soak
    .venv/bin/python benchmarks/figures.py --write    # also replace the tables in docs/

The tests assert every invariant (0 jobs lost, 0 answers of 500, ...): a failing run prints
its failures and writes nothing. Uses TICKWORK_TEST_DATABASE_URL like the test suite.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
from collections import defaultdict
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
TESTS = [
    "tests/e2e/test_processes.py",
    "tests/e2e/test_stop_now.py",
    "tests/e2e/test_schedule_failover.py",
    "tests/e2e/test_soak.py",
    "tests/e2e/test_outage_drain.py",
    "tests/e2e/test_role_race.py",
    "tests/integration/test_concurrent_figures.py",
    "tests/integration/test_outage.py",
    "tests/integration/test_security_figures.py",
    "tests/integration/test_hung_database.py",
    "tests/e2e/test_hung_database_serve.py",
    # across a network of namespaces (root only; skipped elsewhere)
    "tests/net/test_worker_partition.py",
    "tests/net/test_half_open.py",
    "tests/net/test_leader_partition.py",
    "tests/net/test_latency.py",
    "tests/net/test_api_hosts.py",
]
START = "<!-- figures:start (benchmarks/figures.py --write replaces this part) -->"
END = "<!-- figures:end -->"


def run(long: bool, figures: Path) -> int:
    env = dict(os.environ, TICKWORK_FIGURES=str(figures))
    env["TICKWORK_FIGURES_SCALE"] = "long" if long else "short"
    present = [t for t in TESTS if (ROOT / t).exists()]
    timeout = "7200" if long else "600"
    command = [sys.executable, "-m", "pytest", "-q", "-o", f"timeout={timeout}", *present]
    return subprocess.call(command, cwd=ROOT, env=env)


def value_text(value: Any) -> str:
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return f"{value:,.2f}".rstrip("0").rstrip(".")
    if isinstance(value, int):
        return f"{value:,}"
    return str(value)


def shown(value: Any) -> bool:
    """Lists and mappings stay in the JSON lines: the table shows scalars."""
    return not isinstance(value, list | dict | tuple)


def detail(key: str, value: Any) -> str:
    name = key.replace("_", " ")
    if isinstance(value, bool):
        return name if value else f"not {name}"
    return f"{name} {value_text(value)}"


def tables(lines: list[dict[str, Any]], doc: str) -> str:
    checks: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for line in lines:
        if line["doc"] == doc:
            checks[line["check"]].append(line)
    if not checks:
        return "(no figures recorded)\n"
    first = next(iter(checks.values()))[0]
    out = [
        f"Recorded {first['at'][:10]} on {first['machine']}, {first['scale']} versions, "
        f"PostgreSQL at `TICKWORK_TEST_DATABASE_URL` (or the embedded server).",
        "",
        "| check | figure | value | details |",
        "|---|---|---|---|",
    ]
    for check, figures in checks.items():
        for n, line in enumerate(figures):
            details = ", ".join(detail(k, v) for k, v in line["details"].items() if shown(v))
            out.append(
                f"| {check if n == 0 else ''} | {line['figure']} | {value_text(line['value'])} "
                f"| {details} |"
            )
    return "\n".join(out) + "\n"


def write(doc: Path, body: str) -> None:
    text = doc.read_text(encoding="utf-8")
    if START not in text or END not in text:
        raise SystemExit(f"{doc} has no {START} ... {END} markers")
    head, rest = text.split(START, 1)
    _, tail = rest.split(END, 1)
    doc.write_text(f"{head}{START}\n{body}{END}{tail}", encoding="utf-8")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--long", action="store_true", help="the long versions")
    parser.add_argument("--write", action="store_true", help="replace the tables in docs/")
    options = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        figures = Path(tmp) / "figures.jsonl"
        code = run(options.long, figures)
        lines = (
            [json.loads(x) for x in figures.read_text().splitlines()] if figures.exists() else []
        )
    if code != 0:
        raise SystemExit(f"the tests failed (exit {code}); no figures written")
    for doc in ("reliability", "security"):
        body = tables(lines, doc)
        print(f"\n## {doc} ({platform.node()})\n\n{body}")
        if options.write:
            write(ROOT / "docs" / f"{doc}.md", body)


if __name__ == "__main__":
    main()
