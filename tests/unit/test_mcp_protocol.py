"""The MCP server's protocol errors are the specification's (2025-11-25): an unknown tool or
prompt, or a prompt without its required argument, is -32602; a resource that does not
exist is -32002 with its URI and one message; a resource that cannot be read for another
reason is -32603. A refused tool call stays a tool result. And every tool's hints say what
it does. Served in memory, over the SDK's own client, against a stand-in for the API."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import pytest
from mcp import ClientSession
from mcp.shared.exceptions import McpError
from mcp.shared.memory import create_connected_server_and_client_session
from mcp.types import ErrorData
from pydantic import AnyUrl
from starlette.responses import JSONResponse
from starlette.types import Receive, Scope, Send

from tickwork.config import Settings
from tickwork.mcp.bridge import Bridge
from tickwork.mcp.server import build

ANSWERS = {  # path -> (status, body) the stand-in API answers
    "/api/jobs/5": (404, {"status": 404, "title": "Not found", "detail": "job 5 does not exist"}),
    "/api/jobs/7": (503, {"status": 503, "title": "Database unavailable", "detail": "retry"}),
    "/api/jobs/8": (200, {"id": 8, "state": "SUCCEEDED", "result": "done"}),
}


async def _api(scope: Scope, receive: Receive, send: Send) -> None:
    status, body = ANSWERS.get(scope["path"], (404, {"status": 404, "detail": "no route"}))
    await JSONResponse(body, status_code=status)(scope, receive, send)


@asynccontextmanager
async def connected() -> AsyncIterator[ClientSession]:
    server = build(Settings(), Bridge(_api), lambda: "a token", None)
    async with create_connected_server_and_client_session(server._mcp_server) as session:
        yield session


async def refused(call: Any) -> ErrorData:
    with pytest.raises(McpError) as raised:
        await call
    return raised.value.error


async def test_an_unknown_tool_is_a_protocol_error_not_a_tool_result() -> None:
    async with connected() as session:
        error = await refused(session.call_tool("no_such_tool", {}))
        assert (error.code, error.message) == (-32602, "Unknown tool: no_such_tool")
        long = await refused(session.call_tool("x" * 5000, {}))
        assert long.code == -32602 and len(long.message) < 300  # a name is not echoed whole
        # arguments a tool's schema refuses stay a tool result: the model can correct them
        wrong = await session.call_tool("get_job", {"job_id": "x"})
        assert wrong.isError and "job_id" in wrong.content[0].text  # type: ignore[union-attr]
        # and so does the API's refusal, with its problem detail
        gone = await session.call_tool("get_job", {"job_id": 5})
        assert gone.isError and '"status": 404' in gone.content[0].text  # type: ignore[union-attr]


async def test_a_resource_that_does_not_exist_is_32002_with_its_uri() -> None:
    async with connected() as session:
        for uri in (
            "tickwork://nothing",
            "tickwork://docs/no-such-page",
            "tickwork://jobs/5/output",  # the API says 404
            "tickwork://jobs/x/output",
            "tickwork://jobs/%D9%A3/output",  # an Arabic-Indic digit is no job's number
        ):
            error = await refused(session.read_resource(AnyUrl(uri)))
            assert error.code == -32002, (uri, error)
            assert error.message == "Resource not found", (uri, error)  # once, not twice
            assert error.data == {"uri": uri}
        # another failure is an internal error, saying what failed (once)
        outage = await refused(session.read_resource(AnyUrl("tickwork://jobs/7/output")))
        assert outage.code == -32603 and outage.data == {"uri": "tickwork://jobs/7/output"}
        assert json.loads(outage.message)["status"] == 503
        found = await session.read_resource(AnyUrl("tickwork://jobs/8/output"))
        assert found.contents[0].text == '"done"'  # type: ignore[union-attr]


async def test_an_unknown_prompt_or_a_missing_argument_is_invalid_params() -> None:
    async with connected() as session:
        unknown = await refused(session.get_prompt("no_such_prompt", {}))
        assert (unknown.code, unknown.message) == (-32602, "Unknown prompt: no_such_prompt")
        missing = await refused(session.get_prompt("queue_backing_up", {}))
        assert (missing.code, missing.message) == (-32602, "Missing required arguments: queue")
        asked = await session.get_prompt("queue_backing_up", {"queue": "imports"})
        assert "'imports'" in asked.messages[0].content.text  # type: ignore[union-attr]


HINTS = {  # tool -> (read only, destructive, idempotent, open world)
    "list_jobs": (True, False, True, False),
    "get_job": (True, False, True, False),
    "queue_stats": (True, False, True, False),
    "list_schedules": (True, False, True, False),
    "list_definitions": (True, False, True, False),
    "signal_stats": (True, False, True, False),
    "stuck_signals": (True, False, True, False),
    "health": (True, False, True, False),
    "leaders": (True, False, True, False),
    "workers": (True, False, True, False),
    # makes work run (a task's code, an HTTP call or a script, reactors): the open world
    "run_definition": (False, False, False, True),
    "enqueue_job": (False, False, False, True),
    "retry_job": (False, False, False, True),
    "trigger_schedule": (False, False, False, True),
    "retry_signal": (False, False, False, True),
    "retry_delivery": (False, False, False, True),
    # a state set again is the same state; resume undoes pause
    "pause_queue": (False, False, True, False),
    "resume_queue": (False, False, True, False),
    # for good: a cancelled job is not retried, a deleted one is gone
    "cancel_job": (False, True, True, False),
    "delete_job": (False, True, True, False),
}


async def test_every_tool_says_what_it_does_in_its_hints() -> None:
    async with connected() as session:
        tools = (await session.list_tools()).tools
    assert {t.name for t in tools} == set(HINTS)
    for tool in tools:
        hints = tool.annotations
        assert hints is not None, tool.name
        stated = (hints.readOnlyHint, hints.destructiveHint, hints.idempotentHint)
        assert (*stated, hints.openWorldHint) == HINTS[tool.name], tool.name
