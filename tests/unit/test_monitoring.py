"""The shipped Prometheus rules pass ``promtool check rules`` and their own unit tests
(``promtool test rules``), as a user's CI would run them; the Grafana dashboard is one
Prometheus query per panel; ``tickwork monitoring print`` prints the files as shipped."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from typer.testing import CliRunner

from tickwork.cli import cli
from tickwork.cli.monitoring import Shipped, shipped

from ..e2e.support import required_tool

REQUIRE = "TICKWORK_REQUIRE_PROMETHEUS"


def test_promtool_checks_the_rules_and_runs_their_unit_tests(tmp_path: Path) -> None:
    tool = required_tool("promtool", REQUIRE, "Debian's prometheus; .ci/run installs it")
    (tmp_path / "alerts.yml").write_text(shipped(Shipped.ALERTS))
    (tmp_path / "alerts.test.yml").write_text(shipped(Shipped.ALERTS_TEST))
    for command in (["check", "rules", "alerts.yml"], ["test", "rules", "alerts.test.yml"]):
        done = subprocess.run(
            [tool, *command], cwd=tmp_path, capture_output=True, text=True, check=False
        )
        assert done.returncode == 0, done.stdout + done.stderr
        assert "SUCCESS" in done.stdout + done.stderr


def test_every_alert_has_a_unit_test_and_a_line_in_the_docs() -> None:
    docs = (Path(__file__).parents[2] / "docs" / "monitoring.md").read_text()
    tests = shipped(Shipped.ALERTS_TEST)
    for line in shipped(Shipped.ALERTS).splitlines():
        if line.strip().startswith("- alert:"):
            name = line.split(":", 1)[1].strip()
            assert f"alertname: {name}" in tests, name
            assert f"`{name}`" in docs, name


def test_the_grafana_dashboard_is_a_query_per_panel() -> None:
    dashboard = json.loads(shipped(Shipped.GRAFANA))
    assert dashboard["uid"] == "tickwork" and dashboard["panels"]
    assert len({p["id"] for p in dashboard["panels"]}) == len(dashboard["panels"])
    for panel in dashboard["panels"]:
        [target] = panel["targets"]
        assert "tickwork_" in target["expr"], panel["title"]


def test_the_cli_prints_each_shipped_file() -> None:
    for what in Shipped:
        printed = CliRunner().invoke(cli, ["monitoring", "print", what.value])
        assert printed.exit_code == 0 and printed.output == shipped(what)
    wrong = CliRunner().invoke(cli, ["monitoring", "print", "nagios"])
    assert wrong.exit_code == 2 and "nagios" in wrong.output
