"""The MCP SDK's log lines go through tickwork's log, cut: a client that sends a megabyte the
SDK quotes in an error cannot fill the log with it."""

from __future__ import annotations

import logging

import pytest

from tickwork.mcp.server import MAX_SDK_LOG, _route_sdk_logs


def test_sdk_log_lines_are_tickworks_and_cut(caplog: pytest.LogCaptureFixture) -> None:
    _route_sdk_logs()
    caplog.set_level(logging.WARNING, logger="tickwork.mcp")
    logging.getLogger("mcp.server.lowlevel.server").error("unknown request: %s", "x" * 1_000_000)
    logging.getLogger("mcp.server.lowlevel.server").info("chatter")  # below WARNING: dropped
    [record] = [r for r in caplog.records if r.name == "tickwork.mcp"]
    assert record.getMessage() == "mcp sdk" and record.levelno == logging.ERROR
    detail: str = record.__dict__["detail"]
    assert detail.startswith("unknown request: xxx") and len(detail) < MAX_SDK_LOG + 100
    assert record.__dict__["sdk_logger"] == "mcp.server.lowlevel.server"
