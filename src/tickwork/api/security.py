"""Who may call what: the one table of every route's minimum role, and the dependency that
enforces it on every request.

The access token's ``roles`` claim (or an API token's role, capped by its owner's) is the
single source of truth. A route missing from the table fails the API's start-up, so no route
can be left unguarded by accident.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Collection
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from fastapi import Depends, FastAPI, Request
from fastapi.routing import APIRoute
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from starlette.routing import Route

from tickwork.api.paths import route_path
from tickwork.api.throttle import Limiter
from tickwork.auth import Principal, Role
from tickwork.errors import AuthError, PermissionDenied

if TYPE_CHECKING:
    from psycopg_pool import AsyncConnectionPool

    from tickwork.app import App
    from tickwork.auth import AuthService
    from tickwork.db.store import Store
    from tickwork.signals.runtime import SignalRuntime

WEBHOOK_MISSES = 30
"""Wrong webhook tokens a client address may send a minute before it is refused (429)
without a lookup."""
PUBLIC = None
"""No authentication: login, refresh, logout, accepting an invite, health, metrics and the
API docs."""
VIEWER, OPERATOR, ADMIN = Role.VIEWER, Role.OPERATOR, Role.ADMIN

ROUTE_ROLES: dict[tuple[str, str], Role | None] = {
    # authentication
    ("POST", "/api/auth/login"): PUBLIC,
    ("POST", "/api/auth/refresh"): PUBLIC,
    ("POST", "/api/auth/logout"): PUBLIC,
    ("POST", "/api/invites/accept"): PUBLIC,
    # the caller
    ("GET", "/api/me"): VIEWER,
    ("POST", "/api/me/password"): VIEWER,
    ("GET", "/api/me/tokens"): VIEWER,
    ("POST", "/api/me/tokens"): VIEWER,
    ("DELETE", "/api/me/tokens/{token_id}"): VIEWER,
    # jobs: VIEWER reads; OPERATOR enqueues registered tasks, retries, cancels and deletes
    ("GET", "/api/jobs"): VIEWER,
    ("POST", "/api/jobs"): OPERATOR,
    ("GET", "/api/jobs/{job_id}"): VIEWER,
    ("DELETE", "/api/jobs/{job_id}"): OPERATOR,
    ("GET", "/api/jobs/{job_id}/timeline"): VIEWER,
    ("POST", "/api/jobs/{job_id}/retry"): OPERATOR,
    ("POST", "/api/jobs/{job_id}/cancel"): OPERATOR,
    ("POST", "/api/jobs/bulk/retry"): OPERATOR,
    ("POST", "/api/jobs/bulk/cancel"): OPERATOR,
    # queues
    ("GET", "/api/queues"): VIEWER,
    ("GET", "/api/queues/throughput"): VIEWER,
    ("POST", "/api/queues/{name}/pause"): OPERATOR,
    ("POST", "/api/queues/{name}/resume"): OPERATOR,
    # schedules: what a schedule runs is ADMIN's; pausing and triggering is OPERATOR's
    ("GET", "/api/schedules"): VIEWER,
    ("POST", "/api/schedules"): ADMIN,
    ("GET", "/api/schedules/{name}"): VIEWER,
    ("PATCH", "/api/schedules/{name}"): ADMIN,
    ("DELETE", "/api/schedules/{name}"): ADMIN,
    ("POST", "/api/schedules/{name}/pause"): OPERATOR,
    ("POST", "/api/schedules/{name}/resume"): OPERATOR,
    ("POST", "/api/schedules/{name}/trigger"): OPERATOR,
    # definitions: what runs (a URL with secrets, a script on the workers) is ADMIN's;
    # running, pausing and resuming is OPERATOR's
    ("GET", "/api/definitions"): VIEWER,
    ("POST", "/api/definitions"): ADMIN,
    ("GET", "/api/definitions/{id}"): VIEWER,
    ("PATCH", "/api/definitions/{id}"): ADMIN,
    ("DELETE", "/api/definitions/{id}"): ADMIN,
    ("POST", "/api/definitions/{id}/pause"): OPERATOR,
    ("POST", "/api/definitions/{id}/resume"): OPERATOR,
    ("POST", "/api/definitions/{id}/run"): OPERATOR,
    ("GET", "/api/definitions/{id}/activity"): VIEWER,
    ("POST", "/api/definitions/{id}/webhook"): ADMIN,
    ("DELETE", "/api/definitions/{id}/webhook"): ADMIN,
    ("POST", "/api/webhooks/{id}/{token}"): PUBLIC,  # the token in the path is the credential
    # the cluster
    ("GET", "/api/workers"): VIEWER,
    ("GET", "/api/workers/metrics"): VIEWER,
    ("GET", "/api/leaders"): VIEWER,
    ("GET", "/api/health"): OPERATOR,  # names the database's sessions (xmin holders)
    ("GET", "/api/routes"): VIEWER,
    ("GET", "/api/events"): VIEWER,
    ("GET", "/api/audit"): OPERATOR,
    # administration
    ("GET", "/api/users"): ADMIN,
    ("PATCH", "/api/users/{user_id}"): ADMIN,
    ("GET", "/api/invites"): ADMIN,
    ("POST", "/api/invites"): ADMIN,
    ("DELETE", "/api/invites/{invite_id}"): ADMIN,
    ("GET", "/api/settings"): ADMIN,
    ("PUT", "/api/settings/{key}"): ADMIN,
    ("GET", "/api/variables"): VIEWER,
    ("PUT", "/api/variables/{name}"): ADMIN,
    ("DELETE", "/api/variables/{name}"): ADMIN,
    # signals and sweeps: ADMIN only (the seed's admin API)
    ("GET", "/api/admin/signals"): ADMIN,
    ("GET", "/api/admin/signals/stats"): ADMIN,
    ("GET", "/api/admin/signals/stuck"): ADMIN,
    ("GET", "/api/admin/signals/reactors"): ADMIN,
    ("PUT", "/api/admin/signals/reactors/{name}/enabled"): ADMIN,
    ("PUT", "/api/admin/signals/reactors/{name}/dry-run"): ADMIN,
    ("PUT", "/api/admin/signals/reactors/{name}/organisations"): ADMIN,
    ("POST", "/api/admin/signals/reactors/{name}/sweep"): ADMIN,
    ("PUT", "/api/admin/signals/processor/enabled"): ADMIN,
    ("PUT", "/api/admin/signals/sweeps/enabled"): ADMIN,
    ("GET", "/api/admin/signals/status"): ADMIN,
    ("GET", "/api/admin/signals/leaders"): ADMIN,
    ("GET", "/api/admin/signals/{signal_id}"): ADMIN,
    ("POST", "/api/admin/signals/{signal_id}/retry"): ADMIN,
    ("POST", "/api/admin/signals/{signal_id}/reactors/{name}/retry"): ADMIN,
    ("POST", "/api/admin/signals/{signal_id}/cancel"): ADMIN,
    # operations
    ("GET", "/healthz"): PUBLIC,
    ("GET", "/readyz"): PUBLIC,
    ("GET", "/metrics"): PUBLIC,
    # the API's description (not in its OpenAPI document), and / which leads a browser to it
    ("GET", "/api/openapi.json"): PUBLIC,
    ("GET", "/api/docs"): PUBLIC,
    ("GET", "/api/docs/assets/{name}"): PUBLIC,
    ("GET", "/"): PUBLIC,
    ("GET", "/assets/{name}"): PUBLIC,
    ("GET", "/{path:path}"): PUBLIC,
}


@dataclass
class Services:
    """What the routes work with (one per API instance, on ``api.state.services``)."""

    app: App
    auth: AuthService
    pool: AsyncConnectionPool[Any]
    signals: SignalRuntime | None = None
    """This process's signal runtime (None when it does not run the signals role)."""
    webhook_limiter: Limiter = field(default_factory=lambda: Limiter(60))
    """Calls of each definition's webhook this process accepts a minute."""
    webhook_misses: Limiter = field(default_factory=lambda: Limiter(WEBHOOK_MISSES))
    """Wrong webhook tokens (or ids) each client address may send a minute."""
    reported_statements: frozenset[str] | None = None
    """The statements whose times ``/metrics`` reports (``None``: every one)."""
    event_hub: Any = None
    """The process's event streams (:class:`tickwork.api.events.EventHub`), made by the
    first stream opened."""

    @property
    def store(self) -> Store:
        """Every statement of the schema, as a typed method."""
        return self.app.db.store


def client_address(request: Request) -> str:
    """The caller's address (a trusted proxy's X-Forwarded-For, else the peer's), which login
    throttling and the webhooks' wrong-token limit count by."""
    return request.client.host if request.client else "unknown"


def services(request: Request) -> Services:
    found: Services = request.app.state.services
    return found


bearer = HTTPBearer(auto_error=False, description="An access token or a personal API token")


CHANNEL_KEY = "tickwork.channel"
"""The ASGI scope key the MCP endpoint's in-process calls carry (a client cannot set a scope
key: only the server's own code can)."""


async def authorize(
    request: Request,
    credentials: HTTPAuthorizationCredentials | None = Depends(bearer),  # noqa: B008
) -> None:
    """Look the route up in :data:`ROUTE_ROLES` and check the caller's role against it."""
    route = request.scope.get("route")
    path = route.path if isinstance(route, APIRoute) else route_path(request.scope)
    needed = ROUTE_ROLES[(request.method, path)]
    if needed is None:
        return
    if credentials is None or credentials.scheme.lower() != "bearer":
        raise AuthError("a bearer token is required")
    principal = await services(request).auth.authenticate(credentials.credentials)
    if principal.role < needed:
        raise PermissionDenied(needed.name, principal.role.name)
    if request.scope.get(CHANNEL_KEY) == "mcp":  # set in process by the MCP endpoint only
        principal = dataclasses.replace(principal, channel="mcp")
    request.state.principal = principal


def caller(request: Request) -> Principal:
    """The authenticated caller of a non-public route."""
    found: Principal = request.state.principal
    return found


def api_routes(api: FastAPI) -> set[tuple[str, str]]:
    """Every (method, path template) the API serves: the operations of its OpenAPI document,
    and the routes on the app itself that the document leaves out (the docs, the document
    itself). HEAD, which a plain route answers beside GET, counts as the GET."""
    documented = {
        (method.upper(), path)
        for path, operations in api.openapi()["paths"].items()
        for method in operations
    }
    direct = {
        (method, route.path)
        for route in api.routes
        if isinstance(route, Route)  # an APIRoute is one too
        for method in route.methods or ()
        if method != "HEAD"
    }
    return documented | direct


def check_table(api: FastAPI, expected: Collection[tuple[str, str]] | None = None) -> None:
    """Every route is in the table and every table entry (or each of ``expected``: an API
    that serves only some) is a route (fail closed)."""
    routes = api_routes(api)
    missing = routes - ROUTE_ROLES.keys()
    if missing:
        raise RuntimeError(f"routes without a role in ROUTE_ROLES: {sorted(missing)}")
    stale = set(ROUTE_ROLES.keys() if expected is None else expected) - routes
    if stale:
        raise RuntimeError(f"ROUTE_ROLES names routes that do not exist: {sorted(stale)}")
