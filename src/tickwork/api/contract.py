"""What each operation answers: the OpenAPI document declares, per operation, exactly the
status codes it can return, each with its body's schema and its headers.

The API's structure gives most codes, the same for every operation of a kind:

- 400: an operation with parameters or a body (a malformed one; FastAPI's 422, renamed);
- 401: one that takes a token (:data:`~tickwork.api.security.ROUTE_ROLES`); 403: one that
  needs more than VIEWER;
- 413: a method with a body (the gate reads every POST/PUT/PATCH/DELETE body, and refuses
  one past the limit before routing); 408 for the same, from ``serve``'s HTTP server, when
  the body does not arrive in time (:mod:`tickwork.http_bounds`); 415 for an operation that
  takes a JSON body, sent one of another ``Content-Type``;
- 503: one that asks the database (all but :data:`WITHOUT_DATABASE`).

A route declares the rest on its decorator with :func:`answer`: 404 for an unknown id or
name, 409 for a state that forbids the operation, 429, and the codes above where it knows a
better description or body (a 401 of a wrong password, a 503 with no lease holder).
``tests/integration/test_openapi_contract.py`` provokes every declared code of every
operation, and fails on a code returned but not declared.

The rest of the document is made as strict as the server for the clients generated from it:
operation ids a generator turns into readable method names (:func:`operation_id`), optional
query parameters typed as what they are, not as nullable (:func:`plain_parameters`: a
missing parameter is not null), and the servers, licence and contact Redocly asks for
(:data:`INFO`).
"""

from __future__ import annotations

from typing import Any

from fastapi.routing import APIRoute
from pydantic import BaseModel

from tickwork.api.gate import BODY_METHODS
from tickwork.api.problems import MEDIA_TYPE
from tickwork.api.schemas import Problem
from tickwork.auth import Role

Responses = dict[int | str, dict[str, Any]]

WITHOUT_DATABASE = frozenset({("GET", "/healthz")})
"""Operations that never ask the database (so never answer 503)."""

STRUCTURAL: dict[int, str] = {
    400: "Invalid input: a malformed parameter or body (the problem names the field)",
    401: "Not authenticated: no bearer token, or one that is invalid, expired or revoked",
    403: "Forbidden: the caller's role is below the one this operation needs",
    408: "Request Timeout: the body did not arrive within api.body_timeout (the connection is"
    " closed)",
    413: "Request body too large",
    415: "Unsupported media type: the body must be JSON (Content-Type: application/json)",
    503: "Database unavailable, or the request deadline passed (retry after Retry-After seconds)",
}

HEADERS: dict[int, dict[str, Any]] = {
    415: {
        "Accept": {
            "description": "the media type the body must have",
            "required": True,
            "schema": {"type": "string", "enum": ["application/json"]},
        }
    },
    401: {
        "WWW-Authenticate": {
            "description": "Bearer",
            "required": True,
            "schema": {"type": "string"},
        }
    },
    429: {
        "Retry-After": {
            "description": "seconds until a login is accepted again",
            "required": True,
            "schema": {"type": "integer", "minimum": 1},
        }
    },
    503: {
        "Retry-After": {
            "description": "seconds to wait before retrying",
            "required": True,
            "schema": {"type": "integer", "minimum": 1},
        }
    },
}


INFO: dict[str, Any] = {
    "servers": [{"url": "/", "description": "the server that serves this document"}],
    "license_info": {"name": "Apache-2.0", "identifier": "Apache-2.0"},
    "contact": {"name": "tickwork", "url": "https://github.com/tickwork/tickwork/issues"},
}
"""The document's ``servers`` (relative: the API is where the document is), licence and
contact, as FastAPI's arguments."""


def operation_id(route: APIRoute) -> str:
    """An operation's id: its route function's name in camelCase (``list_jobs``:
    ``listJobs``), the method name a generated client gives it. Unique, since the route
    functions are named for what they do (:func:`check_operation_ids` refuses a repeat)."""
    first, *rest = route.name.split("_")
    return first + "".join(word.capitalize() for word in rest)


def check_operation_ids(schema: dict[str, Any]) -> None:
    """Refuse two operations with one id (FastAPI only warns)."""
    seen: dict[str, str] = {}
    for path, operations in schema["paths"].items():
        for method, operation in operations.items():
            where = f"{method.upper()} {path}"
            other = seen.setdefault(operation["operationId"], where)
            if other != where:
                raise RuntimeError(
                    f"operation id {operation['operationId']} is both {other} and {where}:"
                    " rename one route function"
                )


def plain_parameters(schema: dict[str, Any]) -> None:
    """Type each optional parameter as its value (``string``), not as ``anyOf [string,
    null]``: an absent parameter is left out, there is no null to send in a query. The
    server reads them as before (absent: None); only the document changes."""
    for operations in schema["paths"].values():
        for operation in operations.values():
            for parameter in operation.get("parameters", []):
                found = parameter["schema"]
                variants = found.get("anyOf", [])
                if {"type": "null"} not in variants:
                    continue
                values = [v for v in variants if v != {"type": "null"}]
                if found.get("default", ...) is None:
                    found.pop("default")
                if len(values) > 1:
                    found["anyOf"] = values
                else:
                    found.pop("anyOf")
                    parameter["schema"] = values[0] | found


def answer(status: int, description: str, model: type[BaseModel] = Problem) -> Responses:
    """A route's declaration of a code it answers besides the structural ones (an error's
    body is a problem), for ``responses=``; combine several with ``|``."""
    return {status: {"model": model, "description": description}}


def declare(schema: dict[str, Any], roles: dict[tuple[str, str], Role | None]) -> None:
    """Complete every operation of ``schema`` with the codes its kind can return (see the
    module's docs), keeping what the route declared itself."""
    problem = {"schema": {"$ref": "#/components/schemas/Problem"}}
    for path, operations in schema["paths"].items():
        for method, operation in operations.items():
            key = (method.upper(), path)
            role = roles[key]
            responses: dict[str, Any] = operation.setdefault("responses", {})
            codes: set[int] = set()
            if responses.pop("422", None) is not None:
                codes.add(400)
            if role is not None:
                codes.add(401)
                if role > Role.VIEWER:
                    codes.add(403)
            else:
                operation["security"] = []  # the bearer scheme is on every route but these
            if key[0] in BODY_METHODS:
                codes |= {408, 413}
            if "requestBody" in operation:
                codes.add(415)
            if key not in WITHOUT_DATABASE:
                codes.add(503)
            for code in codes:
                responses.setdefault(str(code), {"description": STRUCTURAL[code]})
            for status, response in responses.items():
                if int(status) < 400:
                    continue
                content = response.setdefault("content", {})
                content[MEDIA_TYPE] = content.pop("application/json", None) or problem
                if int(status) in HEADERS:
                    response["headers"] = HEADERS[int(status)]
    for name in ("HTTPValidationError", "ValidationError"):
        schema["components"]["schemas"].pop(name, None)
