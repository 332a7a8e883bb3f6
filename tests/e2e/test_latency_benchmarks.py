"""``benchmarks/handler_kinds.py``, ``latency_floor.py`` and ``enqueue_cost.py`` at tiny
sizes: they run against the code as it is and report what they measured, never how fast."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.e2e

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"
HANG_GUARD = 300.0
"""Not a timing assertion: only stops a broken run from hanging the test."""


def run(script: str, *args: str) -> Any:
    proc = subprocess.run(
        [sys.executable, str(BENCHMARKS / script), *args],
        capture_output=True,
        text=True,
        timeout=HANG_GUARD,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout)


def test_handler_kinds_drains_every_kind_with_the_defaults(database_url: str) -> None:
    report = run("handler_kinds.py", "--url", database_url, "--scale", "0.01")
    assert set(report) == {"async-noop", "sync-noop", "async-slow", "sync-slow", "sync-slow-2w"}
    for name, result in report.items():
        assert result["succeeded"] == result["jobs"], name
        assert result["per_second"] > 0, name
        assert (result["concurrency"], result["threads"]) == (100, 10), name


def test_latency_floor_times_the_sql_of_a_pickup(database_url: str) -> None:
    report = run("latency_floor.py", "--url", database_url, "--jobs", "20", "--rate", "200")
    assert set(report) == {"p50_ms", "p99_ms", "p99_over_p50"}
    assert 0 < report["p50_ms"] <= report["p99_ms"]


def test_latency_floor_under_a_background_load_drains_it_with_sql_alone(
    database_url: str,
) -> None:
    report = run(
        "latency_floor.py",
        "--url",
        database_url,
        "--jobs",
        "20",
        "--rate",
        "200",
        "--background-rate",
        "500",
    )
    assert set(report) == {"p50_ms", "p99_ms", "p99_over_p50"}
    assert 0 < report["p50_ms"] <= report["p99_ms"]


def test_enqueue_cost_reports_every_mode(database_url: str) -> None:
    sizes = ["--batches", "2", "--batch", "10", "--single", "5"]
    proc = subprocess.run(
        [sys.executable, str(BENCHMARKS / "enqueue_cost.py"), "--url", database_url, *sizes],
        capture_output=True,
        text=True,
        timeout=HANG_GUARD,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    reported = {line.split()[0] for line in proc.stdout.splitlines() if "client CPU" in line}
    assert reported == {"batch", "batch-async", "single", "single-async"}
