"""What PostgreSQL cannot take, refused at the API's edge with a problem naming the field.

Without these checks such input reaches the database and comes back as a 500: text with a NUL
character or a lone surrogate (neither ``text`` nor ``jsonb`` can hold one), and ids beyond
``bigint``. Request bodies are checked by :class:`tickwork.api.schemas.Request`; path and query
parameters by :func:`refuse_unstorable_parameters`, a dependency of every route.
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import Path, Query, Request
from fastapi.dependencies.models import Dependant
from fastapi.exceptions import RequestValidationError
from fastapi.routing import APIRoute

from tickwork.limits import text_problem

BIGINT_MAX = 2**63 - 1
"""The largest value of PostgreSQL's ``bigint``: every id column is one."""

IdPath = Annotated[int, Path(ge=1, le=BIGINT_MAX)]
"""A row id in the path (ids start at 1)."""
CursorQuery = Annotated[
    int | None, Query(ge=1, le=BIGINT_MAX, description="next_cursor of the previous page")
]
"""The keyset cursor of a listing: the id the next page starts below."""


async def refuse_unstorable_parameters(request: Request) -> None:
    """Refuse (400, naming the parameter) a path or query parameter PostgreSQL could not
    store, before any route code sees it."""
    parameters: list[tuple[str, str, Any]] = [
        ("path", name, value) for name, value in request.path_params.items()
    ]
    declared = _query_names(request.scope.get("route"))  # the route never sees the others
    parameters += [
        ("query", name, value)
        for name, value in request.query_params.multi_items()
        if name in declared
    ]
    for where, name, value in parameters:
        reason = text_problem(str(value))
        if reason is not None:
            raise RequestValidationError(
                [{"type": "unstorable", "loc": (where, name), "msg": reason, "input": value}]
            )


def _query_names(route: object) -> set[str]:
    """The query parameters ``route`` takes (by the names a client sends)."""
    return _aliases(route.dependant) if isinstance(route, APIRoute) else set()


def _aliases(dependant: Dependant) -> set[str]:
    names = {field.alias for field in dependant.query_params}
    for sub in dependant.dependencies:
        names |= _aliases(sub)
    return names
