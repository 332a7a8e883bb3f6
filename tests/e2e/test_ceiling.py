"""``benchmarks/ceiling/run.py``: tickwork's own statements under pgbench, in a scratch schema
it drops. Tiny settings: this checks that every script runs and moves the jobs it should,
never how fast."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import psycopg
import pytest

pytestmark = pytest.mark.e2e

RUN = Path(__file__).resolve().parents[2] / "benchmarks" / "ceiling" / "run.py"
HANG_GUARD = 300.0
"""Not a timing assertion: only stops a broken run from hanging the test."""
BATCH = 10
INSERT_BATCH = 50
CLIENTS = (1, 2)


def ceiling(database_url: str) -> dict[str, Any]:
    proc = subprocess.run(
        [
            sys.executable,
            str(RUN),
            "--json",
            "--url",
            database_url,
            "--seconds",
            "1",
            "--rows",
            "100",
            "--min-transactions",
            "2",
            "--clients",
            ",".join(map(str, CLIENTS)),
            "--batches",
            str(BATCH),
            "--insert-batch",
            str(INSERT_BATCH),
        ],
        capture_output=True,
        text=True,
        timeout=HANG_GUARD,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    report: dict[str, Any] = json.loads(proc.stdout)
    return report


@pytest.mark.skipif(
    shutil.which("pgbench") is None,
    reason="pgbench is not installed: the ceiling runs tickwork's statements under it",
)
def test_the_ceiling_runs_every_script_moves_the_jobs_and_drops_its_schema(
    database_url: str,
) -> None:
    report = ceiling(database_url)
    runs = {(r["workload"], r["details"]["clients"]): r for r in report["results"]}
    sizes = {
        "insert-single": 1,
        f"insert-batch-{INSERT_BATCH}": INSERT_BATCH,
        f"claim-{BATCH}": BATCH,
        f"complete-{BATCH}": BATCH,
        f"cycle-{BATCH}": BATCH,
    }
    assert set(runs) == {(f"ceiling:{name}", c) for name in sizes for c in CLIENTS}
    for (workload, clients), run in runs.items():
        details = run["details"]
        assert details["failed"] == 0, (workload, clients, details)
        assert not details["aborted"], (workload, clients)
        assert details["transactions"] > 0, (workload, clients)
        # every transaction moved a whole batch: a claim never found the table short
        size = sizes[workload.removeprefix("ceiling:")]
        assert run["jobs"] == details["transactions"] * size, (workload, clients, run["jobs"])
        after = details["after"]
        if workload.startswith("ceiling:claim"):
            assert after["jobs"]["RUNNING"] == run["jobs"]
            assert after["executions"] == {"RUNNING": run["jobs"]}
        elif workload.startswith(("ceiling:complete", "ceiling:cycle")):
            # claimed, then completed: the attempts and their jobs SUCCEEDED, none left running
            assert after["jobs"]["SUCCEEDED"] == run["jobs"]
            assert "RUNNING" not in after["jobs"]
            assert after["executions"] == {"SUCCEEDED": run["jobs"]}
        else:
            assert after["jobs"] == {"PENDING": run["jobs"]}
    with psycopg.connect(database_url, autocommit=True) as conn:
        left = conn.execute(
            "SELECT 1 FROM pg_namespace WHERE nspname = %s", [report["environment"]["schema"]]
        ).fetchall()
    assert left == []
