"""The REST API: FastAPI routers per resource, the route-to-role table, problem details.

``create_api(app, auth, pool)`` builds the ASGI application; ``tickwork serve`` runs it.
OpenAPI is at ``/api/openapi.json``, interactive docs at ``/api/docs`` (served with their
assets by :mod:`tickwork.api.docs`, no CDN); the dashboard at ``/`` (:mod:`tickwork.web`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from fastapi import APIRouter, Depends, FastAPI
from starlette.middleware.cors import CORSMiddleware

from tickwork import __version__, web
from tickwork.api import definitions, docs, events, identity, jobs, schedules, system, webhooks
from tickwork.api import signals as signal_routes
from tickwork.api.compression import Compress
from tickwork.api.contract import (
    INFO,
    check_operation_ids,
    declare,
    operation_id,
    plain_parameters,
)
from tickwork.api.deadline import Deadline
from tickwork.api.gate import BODY_BUDGET_BYTES, Gate
from tickwork.api.inputs import refuse_unstorable_parameters
from tickwork.api.problems import install
from tickwork.api.protocol import Protocol
from tickwork.api.schemas import Problem
from tickwork.api.security import PUBLIC, ROUTE_ROLES, Services, authorize, check_table
from tickwork.api.throttle import Limiter
from tickwork.ops.metrics import reported_statements

if TYPE_CHECKING:
    from psycopg_pool import AsyncConnectionPool

    from tickwork.app import App
    from tickwork.auth import AuthService
    from tickwork.signals.runtime import SignalRuntime

__all__ = ["WEBHOOK_ROUTES", "create_api", "create_webhook_api"]

CORS_MAX_AGE = 600
"""Seconds a browser may keep a preflight's answer (``api.cors_origins``)."""

WEBHOOK_ROUTES = (
    ("POST", "/api/webhooks/{id}/{token}"),
    ("GET", "/healthz"),
    ("GET", "/readyz"),
)
"""What ``serve --roles webhook`` serves: the definitions' webhooks and the probes."""


def create_api(
    app: App,
    auth: AuthService,
    pool: AsyncConnectionPool[Any],
    signals: SignalRuntime | None = None,
) -> FastAPI:
    """The API of ``app``: every route authorised by the route table, errors as problems."""
    api = _api(
        app,
        auth,
        pool,
        signals,
        routers=[m.router for m in (identity, jobs, schedules, definitions, webhooks, system)]
        + [signal_routes.router, system.probes],
        only=None,
        title="tickwork",
        summary="PostgreSQL-native background work: jobs, schedules and their control plane.",
        openapi_url=docs.OPENAPI_PATH,
    )
    schema = api.openapi()
    schema["components"]["schemas"]["Problem"] = Problem.model_json_schema(
        ref_template="#/components/schemas/{model}"
    )
    declare(schema, ROUTE_ROLES)  # each operation: exactly the codes it can return
    plain_parameters(schema)
    check_operation_ids(schema)
    return api


def create_webhook_api(app: App, auth: AuthService, pool: AsyncConnectionPool[Any]) -> FastAPI:
    """Only the definitions' webhooks and the probes (:data:`WEBHOOK_ROUTES`), for a
    process that faces the internet and should offer nothing else (no docs, no document,
    no route that takes a token)."""
    return _api(
        app,
        auth,
        pool,
        None,
        routers=[webhooks.router, system.probes],
        only=WEBHOOK_ROUTES,
        title="tickwork webhooks",
        summary="",
        openapi_url=None,
    )


def _api(
    app: App,
    auth: AuthService,
    pool: AsyncConnectionPool[Any],
    signals: SignalRuntime | None,
    *,
    routers: list[APIRouter],
    only: tuple[tuple[str, str], ...] | None,
    title: str,
    summary: str,
    openapi_url: str | None,
) -> FastAPI:
    """An API of ``routers``: every route of the route table, or ``only`` these (all public),
    each authorised by the table, errors as problems, bodies through the gate."""
    api = FastAPI(
        title=title,
        redirect_slashes=False,  # a redirect would name the Host header the client sent
        version=__version__,
        summary=summary,
        openapi_url=openapi_url,
        docs_url=None,  # tickwork.api.docs serves it, with Swagger UI's files
        redoc_url=None,
        generate_unique_id_function=operation_id,
        **INFO,
        dependencies=[Depends(authorize), Depends(refuse_unstorable_parameters)],
    )
    api.state.services = Services(
        app,
        auth,
        pool,
        signals,
        webhook_limiter=Limiter(app.settings.api.webhook_rate),
        reported_statements=reported_statements(app.settings.metrics),
    )
    for router in routers:
        api.include_router(router)
    if openapi_url is not None:
        docs.install(api)
        events.install(api)
        web.install(api)  # last: its catch-all answers the GETs no other route takes
    install(api)
    check_table(api, only)
    # inside the gate: the deadline runs from the body read (which the server bounds) on
    api.add_middleware(
        Deadline, seconds=app.settings.api.request_deadline, exempt=[events.EVENTS_PATH]
    )
    api.add_middleware(
        Gate,
        max_body_bytes=app.settings.api.max_body_bytes,
        public=[route for route in only or ROUTE_ROLES if ROUTE_ROLES[route] is PUBLIC],
        check_token=auth.check_bearer,
        budget=max(BODY_BUDGET_BYTES, app.settings.api.max_body_bytes),  # one body fits
    )
    # large answers compressed for clients that ask (never an event stream, never a small
    # one), then HEAD, OPTIONS and Cache-Control (tickwork.api.protocol), then CORS when set
    api.add_middleware(Compress)
    api.add_middleware(Protocol, api=api)
    if app.settings.api.cors_origins:
        api.add_middleware(
            CORSMiddleware,
            allow_origins=app.settings.api.cors_origins,
            allow_methods=["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE"],
            allow_headers=["Authorization", "Content-Type"],
            expose_headers=["Retry-After", "Location"],
            max_age=CORS_MAX_AGE,
        )
    return api
