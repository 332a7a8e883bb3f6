"""The REST API called in process, as the person whose token the assistant holds.

Every MCP tool is a call of one REST route through this bridge: the route's own role check,
input checks, audit trail and problem details answer it, so an assistant has exactly the
powers (and gets exactly the answers) its person would get from the API, and nothing the
API does not offer. The calls carry the ``tickwork.channel`` scope key (a client cannot
set one), which makes the audit trail name the actor ``mcp:<who>``. The token goes to this
process's own API only, never over a network or to anything else.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import httpx
from mcp.server.fastmcp.exceptions import ToolError
from starlette.types import ASGIApp, Receive, Scope, Send

from tickwork.api.security import CHANNEL_KEY

INTERNAL_BASE = "http://tickwork.mcp"
"""The base URL of the in-process calls (never resolved: no request leaves the process)."""


class ApiProblem(ToolError):
    """The API refused a call: its problem detail as the tool's error text, and its status."""

    def __init__(self, answer: httpx.Response) -> None:
        super().__init__(problem_text(answer))
        self.status = answer.status_code


class _FromMcp:
    """The API, with each request marked as made through the MCP endpoint."""

    def __init__(self, api: ASGIApp) -> None:
        self.api = api

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        await self.api({**scope, CHANNEL_KEY: "mcp"}, receive, send)


class Bridge:
    """Calls of the REST API in this process."""

    def __init__(self, api: ASGIApp) -> None:
        transport = httpx.ASGITransport(app=_FromMcp(api), client=("127.0.0.1", 0))
        self._client = httpx.AsyncClient(transport=transport, base_url=INTERNAL_BASE)

    async def call(
        self,
        token: str,
        method: str,
        path: str,
        *,
        params: Mapping[str, Any] | None = None,
        body: Any = None,
    ) -> Any:
        """The route's JSON answer (None for 204); an :class:`ApiProblem` holding the API's
        problem detail for a 4xx or 5xx (the tool's error, not a protocol failure)."""
        query = {k: v for k, v in (params or {}).items() if v is not None}
        try:
            answer = await self._client.request(
                method,
                path,
                params=query,
                json=body,
                headers={"Authorization": f"Bearer {token}"},
            )
        except httpx.InvalidURL as exc:  # a value too long (or unfit) for an address
            problem = {"status": 400, "title": "Bad Request", "detail": f"an argument {exc}"}
            raise ToolError(json.dumps(problem)) from None
        if answer.status_code >= 400:
            raise ApiProblem(answer)
        if answer.status_code == 204 or not answer.content:
            return None
        return answer.json()

    async def aclose(self) -> None:
        await self._client.aclose()


def problem_text(answer: httpx.Response) -> str:
    """The API's problem detail as the tool's error text (JSON: status, title, detail and
    the field it names, when it names one)."""
    try:
        problem = answer.json()
    except ValueError:
        problem = {"status": answer.status_code, "title": answer.reason_phrase}
    if not isinstance(problem, dict):
        problem = {"status": answer.status_code, "detail": problem}
    return json.dumps(problem, separators=(", ", ": "))
