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
    assert record.getMessage() == "library log" and record.levelno == logging.ERROR
    detail: str = record.__dict__["detail"]
    assert detail.startswith("unknown request: xxx") and len(detail) < MAX_SDK_LOG + 100
    assert record.__dict__["logger"] == "mcp.server.lowlevel.server"


def test_the_root_loggers_warnings_are_cut_too(caplog: pytest.LogCaptureFixture) -> None:
    """The SDK also logs what a client sent on the root logger (``logging.warning``)."""
    _route_sdk_logs()
    caplog.set_level(logging.WARNING, logger="tickwork.mcp")
    logging.warning("Message was: %s", "A" * 1_000_000)
    cut = [r for r in caplog.records if r.name == "tickwork.mcp"]
    assert cut and len(cut[-1].__dict__["detail"]) < MAX_SDK_LOG + 100
