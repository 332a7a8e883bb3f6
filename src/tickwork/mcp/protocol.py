"""Protocol errors as the MCP specification gives them (its 2025-11-25 revision, the newest
the SDK speaks), where the SDK's FastMCP answers otherwise:

- ``tools/call`` of a tool that does not exist: the JSON-RPC error -32602 (Invalid params),
  ``Unknown tool: NAME`` (FastMCP answers a tool result with ``isError``).
- ``resources/read`` of a resource that does not exist (no such URI, or the output of a job
  that does not exist): -32002, ``Resource not found``, the URI in ``data`` (FastMCP: code
  0 and its message twice). Any other failure to read one: -32603 (Internal error). (The
  2026-07-28 revision moves not found to -32602 and asks its clients to take -32002 too.)
- ``prompts/get`` of a prompt that does not exist, or without a required argument: -32602.

A tool's arguments that its schema refuses, and a REST route's refusal, stay tool results
with ``isError``: the specification's tool execution errors, which a model can correct.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from mcp import types
from mcp.server.fastmcp import FastMCP
from mcp.shared.exceptions import McpError

from tickwork.limits import cut

RESOURCE_NOT_FOUND = -32002
SHOWN = 200
"""Characters of a name or URI a client sent that an error repeats."""

Handler = Callable[[Any], Awaitable[types.ServerResult]]


class ResourceMissing(Exception):
    """Raised by a resource template's function: what the URI names does not exist."""


def install(server: FastMCP) -> None:
    """Put the checks in front of ``server``'s handlers of ``tools/call``,
    ``resources/read`` and ``prompts/get`` (after its tools, resources and prompts are
    added; the handlers look them up at each call)."""
    handlers = server._mcp_server.request_handlers
    handlers[types.CallToolRequest] = _call_tool(server, handlers[types.CallToolRequest])
    handlers[types.ReadResourceRequest] = _read(server, handlers[types.ReadResourceRequest])
    handlers[types.GetPromptRequest] = _get_prompt(server, handlers[types.GetPromptRequest])


def _error(code: int, message: str, data: Any = None) -> McpError:
    return McpError(types.ErrorData(code=code, message=message, data=data))


def _call_tool(server: FastMCP, handler: Handler) -> Handler:
    async def call_tool(request: types.CallToolRequest) -> types.ServerResult:
        name = request.params.name
        if server._tool_manager.get_tool(name) is None:
            raise _error(types.INVALID_PARAMS, f"Unknown tool: {cut(name, SHOWN)}")
        return await handler(request)

    return call_tool


def _read(server: FastMCP, handler: Handler) -> Handler:
    async def read_resource(request: types.ReadResourceRequest) -> types.ServerResult:
        uri = str(request.params.uri)
        if not _exists(server, uri):
            raise _not_found(uri)
        try:
            return await handler(request)
        except McpError:
            raise
        except Exception as exc:
            if any(isinstance(e, ResourceMissing) for e in _chain(exc)):
                raise _not_found(uri) from None
            cause = str(_chain(exc)[-1])  # the first raised, not FastMCP's wrappers of it
            data = {"uri": cut(uri, SHOWN)}
            raise _error(types.INTERNAL_ERROR, cut(cause, 1000), data) from None

    return read_resource


def _get_prompt(server: FastMCP, handler: Handler) -> Handler:
    async def get_prompt(request: types.GetPromptRequest) -> types.ServerResult:
        name = request.params.name
        prompt = server._prompt_manager.get_prompt(name)
        if prompt is None:
            raise _error(types.INVALID_PARAMS, f"Unknown prompt: {cut(name, SHOWN)}")
        given = request.params.arguments or {}
        missing = [a.name for a in prompt.arguments or [] if a.required and a.name not in given]
        if missing:
            raise _error(types.INVALID_PARAMS, f"Missing required arguments: {', '.join(missing)}")
        return await handler(request)

    return get_prompt


def _exists(server: FastMCP, uri: str) -> bool:
    resources = server._resource_manager
    return any(str(r.uri) == uri for r in resources.list_resources()) or any(
        t.matches(uri) is not None for t in resources.list_templates()
    )


def _not_found(uri: str) -> McpError:
    return _error(RESOURCE_NOT_FOUND, "Resource not found", {"uri": cut(uri, SHOWN)})


def _chain(exc: BaseException) -> list[BaseException]:
    """``exc`` and the exceptions it was raised while handling, outermost first (FastMCP
    wraps a resource function's error in a ValueError, twice, without ``from``)."""
    found: list[BaseException] = []
    current: BaseException | None = exc
    while current is not None and current not in found:
        found.append(current)
        current = current.__cause__ or current.__context__
    return found
