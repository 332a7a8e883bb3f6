"""The ``tickwork`` command line (its commands are in :mod:`tickwork.cli.process`)."""

from __future__ import annotations

from tickwork.cli.process import cli, cli_actor, main

__all__ = ["cli", "cli_actor", "main"]
