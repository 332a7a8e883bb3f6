"""What PostgreSQL cannot take, refused at the API's edge with a problem naming the field.

Without these checks such input reaches the database and comes back as a 500: text with a NUL
character or a lone surrogate (neither ``text`` nor ``jsonb`` can hold one), and ids beyond
``bigint``. Request bodies are checked by :class:`tickwork.api.schemas.Request`; path and query
parameters by :func:`refuse_unstorable_parameters`, a dependency of every route.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Any

from fastapi import Path, Query, Request
from fastapi.dependencies.models import Dependant
from fastapi.exceptions import RequestValidationError
from fastapi.routing import APIRoute

BIGINT_MAX = 2**63 - 1
"""The largest value of PostgreSQL's ``bigint``: every id column is one."""

IdPath = Annotated[int, Path(ge=1, le=BIGINT_MAX)]
"""A row id in the path (ids start at 1)."""
CursorQuery = Annotated[
    int | None, Query(ge=1, le=BIGINT_MAX, description="next_cursor of the previous page")
]
"""The keyset cursor of a listing: the id the next page starts below."""


def text_problem(text: str) -> str | None:
    """Why PostgreSQL could not store ``text``; None when it can."""
    if "\x00" in text:
        return "must not contain NUL (\\x00) characters"
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return "must be valid Unicode (no lone surrogates)"
    return None


def unstorable(value: object, where: str) -> tuple[str, str] | None:
    """The first string in ``value`` (nested in mappings, their keys, and lists) PostgreSQL
    could not store, as (where it is, why); None when there is none."""
    if isinstance(value, str):
        reason = text_problem(value)
        return None if reason is None else (where, reason)
    if isinstance(value, Mapping):
        for key, item in value.items():
            found = unstorable(key, f"a key of {where}") or unstorable(item, f"{where}.{key}")
            if found:
                return found
    elif isinstance(value, list | tuple):
        for index, item in enumerate(value):
            found = unstorable(item, f"{where}[{index}]")
            if found:
                return found
    return None


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
