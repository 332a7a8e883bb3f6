"""A real Prometheus (Debian's ``prometheus``) scraping a real ``tickwork serve``, with the
shipped alert rules loaded: an idle queue's RUNNING jobs read 0 (not a missing series), the
rules load and evaluate, every query of the shipped Grafana dashboard runs, and every metric
the rules and the dashboard name is one serve exposes. The rules' own unit tests
(``promtool test rules``) are in tests/unit/test_monitoring.py."""

from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path
from typing import Any

import httpx
import pytest

from tickwork import App
from tickwork.cli.monitoring import Shipped, shipped

from .support import HANG_GUARD, free_port, required_tool, serving, wait_for

pytestmark = pytest.mark.e2e

E2E_DIR = Path(__file__).parent
REQUIRE = "TICKWORK_REQUIRE_PROMETHEUS"
"""Set to 1 (``.ci/run`` does, having installed Debian's prometheus): a missing prometheus
fails the run instead of skipping it."""


def query(base: str, promql: str) -> list[dict[str, Any]]:
    answer = httpx.get(f"{base}/api/v1/query", params={"query": promql}, timeout=10)
    body = answer.json()
    assert answer.status_code == 200 and body["status"] == "success", (promql, body)
    result: list[dict[str, Any]] = body["data"]["result"]
    return result


def test_prometheus_scrapes_serve_and_the_shipped_rules_and_dashboard_work(
    app: App, db_env: dict[str, str], tmp_path: Path
) -> None:
    binary = required_tool("prometheus", REQUIRE, "Debian's prometheus; .ci/run installs it")

    @app.task(name="e2e.greet", queue="default")
    def greet(name: str) -> str:
        raise AssertionError("runs in the serve process")

    # a queue whose last PENDING job was cancelled: known, and idle
    app.cancel(app.enqueue("e2e.greet", {"name": "idle"}, queue="idle").id)
    env = dict(db_env, PYTHONPATH=os.pathsep.join([str(E2E_DIR), db_env.get("PYTHONPATH", "")]))
    with serving(env, tmp_path, "--app", "serve_app:app", "--log-level", "ERROR") as (_, url, _):
        done = app.wait(app.enqueue("e2e.greet", {"name": "ada"}), timeout=HANG_GUARD)
        assert done.result == "hello ada"  # ran in serve: its histograms have a sample
        exposed = httpx.get(f"{url}/metrics", timeout=10).text
        rules = tmp_path / "tickwork.rules.yml"
        rules.write_text(shipped(Shipped.ALERTS))
        port = free_port()
        target = url.removeprefix("http://")
        (tmp_path / "prometheus.yml").write_text(
            json.dumps(  # JSON is YAML
                {
                    "global": {"scrape_interval": "1s", "evaluation_interval": "1s"},
                    "rule_files": [str(rules)],
                    "scrape_configs": [
                        {"job_name": "tickwork", "static_configs": [{"targets": [target]}]}
                    ],
                }
            )
        )
        log = (tmp_path / "prometheus.log").open("wb")
        server = subprocess.Popen(
            [
                binary,
                f"--config.file={tmp_path / 'prometheus.yml'}",
                f"--storage.tsdb.path={tmp_path / 'data'}",
                f"--web.listen-address=127.0.0.1:{port}",
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        base = f"http://127.0.0.1:{port}"
        try:
            # the idle queue's RUNNING jobs read 0: a series with the value, not no series
            running = wait_for(
                lambda: _ready(base) and query(base, 'tickwork_jobs{queue="idle",state="RUNNING"}'),
                "Prometheus to scrape tickwork_jobs",
            )
            assert [r["value"][1] for r in running] == ["0"]
            assert query(base, 'tickwork_jobs{state="RUNNING"} == 0')  # an alert on == 0 fires
            groups = httpx.get(f"{base}/api/v1/rules", timeout=10).json()["data"]["groups"]
            loaded = {r["name"]: r for g in groups for r in g["rules"]}
            assert set(loaded) == set(_alert_names()), loaded
            wait_for(
                lambda: (
                    all(
                        r["health"] == "ok"
                        for g in httpx.get(f"{base}/api/v1/rules", timeout=10).json()["data"][
                            "groups"
                        ]
                        for r in g["rules"]
                        if r["lastEvaluation"] != "0001-01-01T00:00:00Z"
                    )
                    and _evaluated(base)
                ),
                "every rule evaluated without error",
            )
            dashboard = json.loads(shipped(Shipped.GRAFANA))
            for panel in dashboard["panels"]:
                for target_query in panel["targets"]:
                    query(base, target_query["expr"].replace("$queue", ".*"))
        finally:
            server.terminate()
            server.wait(HANG_GUARD)
            log.close()
    named = set(
        re.findall(r"\btickwork_[a-z_]*[a-z]\b", shipped(Shipped.ALERTS) + shipped(Shipped.GRAFANA))
    )
    families = {m.group(1) for m in re.finditer(r"^# TYPE (\S+) ", exposed, re.MULTILINE)}
    series = {
        re.split(r"[{ ]", line, maxsplit=1)[0] for line in exposed.splitlines() if line[:1] != "#"
    }
    missing = {name for name in named if name not in families | series}
    assert missing == set(), f"the shipped rules or dashboard name metrics serve lacks: {missing}"


def _ready(base: str) -> bool:
    try:
        return httpx.get(f"{base}/-/ready", timeout=5).status_code == 200
    except httpx.HTTPError:
        return False


def _evaluated(base: str) -> bool:
    groups = httpx.get(f"{base}/api/v1/rules", timeout=10).json()["data"]["groups"]
    return all(r["lastEvaluation"] != "0001-01-01T00:00:00Z" for g in groups for r in g["rules"])


def _alert_names() -> list[str]:
    return re.findall(r"^\s+- alert: (\w+)$", shipped(Shipped.ALERTS), re.MULTILINE)
