"""The methods the API's routes take at a path: the ``Allow`` of a ``405`` and of an
``OPTIONS`` answer (RFC 9110 sections 9.3.7 and 15.5.6), read from the same list of routes
the role table is checked against (:func:`tickwork.api.security.api_routes`)."""

from __future__ import annotations

import re
from typing import Any

from starlette.types import Scope

from tickwork.api.paths import CATCH_ALL, route_path
from tickwork.api.security import api_routes
from tickwork.web.pages import is_page

_PATH_PARAMETER = re.compile(r"\\\{[a-z_]+:path\\\}")
_PARAMETER = re.compile(r"\\\{[a-z_]+\\\}")


def _pattern(template: str) -> re.Pattern[str]:
    escaped = _PATH_PARAMETER.sub(".*", re.escape(template))
    return re.compile("^" + _PARAMETER.sub("[^/]+", escaped) + "$")


def _table(api: Any) -> list[tuple[re.Pattern[str], str, set[str]]]:
    """(pattern, template, methods) of every route path, made once per API."""
    table: list[tuple[re.Pattern[str], str, set[str]]] | None = getattr(
        api.state, "allowed_methods", None
    )
    if table is None:
        by_path: dict[str, set[str]] = {}
        for method, path in api_routes(api):
            by_path.setdefault(path, set()).add(method)
        table = [(_pattern(path), path, methods) for path, methods in by_path.items()]
        api.state.allowed_methods = table
    return table


def allowed_methods(api: Any, scope: Scope) -> list[str]:
    """The methods some route of ``api`` takes at the request's path (``HEAD`` wherever
    ``GET`` is, ``OPTIONS`` everywhere), sorted; empty when no route takes it. The
    dashboard's catch-all counts only for a page's path that no other route takes."""
    path = route_path(scope)
    methods: set[str] = set()
    catch_all: set[str] = set()
    for pattern, template, taken in _table(api):
        if not pattern.match(path):
            continue
        if template != CATCH_ALL:
            methods |= taken
        elif is_page(path):
            catch_all |= taken
    methods = methods or catch_all
    if not methods:
        return []
    if "GET" in methods:
        methods.add("HEAD")
    return sorted(methods | {"OPTIONS"})
