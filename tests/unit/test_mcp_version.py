"""The MCP endpoint's ``initialize`` names tickwork and tickwork's own version (the one
``tickwork --version`` prints), not the SDK's."""

from __future__ import annotations

import importlib.metadata

from typer.testing import CliRunner

from tickwork import __version__
from tickwork.cli import cli
from tickwork.config import Settings
from tickwork.mcp.bridge import Bridge
from tickwork.mcp.server import build


async def _nothing(scope: object, receive: object, send: object) -> None:
    raise AssertionError("no API call is made")


def test_initialize_reports_tickworks_version() -> None:
    server = build(Settings(), Bridge(_nothing), lambda: "unused", None)
    options = server._mcp_server.create_initialization_options()
    assert options.server_name == "tickwork"
    assert options.server_version == __version__
    assert f"tickwork {options.server_version}" in CliRunner().invoke(cli, ["--version"]).output
    if __version__ != importlib.metadata.version("mcp"):  # (they could meet by chance)
        assert options.server_version != importlib.metadata.version("mcp")
