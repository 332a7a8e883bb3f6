"""``tickwork monitoring``: print the Prometheus alerting rules, their unit tests and the
Grafana dashboard that ship in the package (:mod:`tickwork.ops.monitoring`), to save into
the monitoring system's configuration."""

from __future__ import annotations

from enum import StrEnum
from importlib import resources
from typing import Annotated

import typer

from tickwork.cli.common import Group

__all__ = ["monitoring_cli"]

monitoring_cli = typer.Typer(
    help="Print the shipped Prometheus alert rules and Grafana dashboard.",
    no_args_is_help=True,
    cls=Group,
)


class Shipped(StrEnum):
    """A file of :mod:`tickwork.ops.monitoring`, by what it is."""

    ALERTS = "alerts"
    ALERTS_TEST = "alerts-test"
    GRAFANA = "grafana"

    @property
    def filename(self) -> str:
        return {
            Shipped.ALERTS: "alerts.yml",
            Shipped.ALERTS_TEST: "alerts.test.yml",
            Shipped.GRAFANA: "grafana-dashboard.json",
        }[self]


def shipped(what: Shipped) -> str:
    """The text of a shipped monitoring file."""
    return (
        resources.files("tickwork.ops")
        .joinpath("monitoring", what.filename)
        .read_text(encoding="utf-8")
    )


@monitoring_cli.command("print")
def monitoring_print(
    what: Annotated[
        Shipped,
        typer.Argument(
            help="alerts: Prometheus rules (alerts.yml); alerts-test: their promtool unit tests"
            " (alerts.test.yml, which reads alerts.yml beside it); grafana: the dashboard JSON.",
        ),
    ],
) -> None:
    """Print one of the shipped files: `tickwork monitoring print alerts > tickwork.rules.yml`."""
    typer.echo(shipped(what), nl=False)
