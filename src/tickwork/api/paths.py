"""Where the API is mounted: the ASGI ``root_path`` of a request (``""`` at a server's root;
``/tickwork`` when a host application mounts the control plane there, or a proxy serves it
under that path), which every URL the API hands out for a browser to follow starts with."""

from __future__ import annotations

from urllib.parse import quote

from starlette._utils import get_route_path
from starlette.types import Scope


def mounted_at(scope: Scope) -> str:
    """The path the API is mounted under, without a trailing slash (usually empty),
    percent-encoded: it goes into URLs, a cookie's Path and a page's script, where a quote or
    a semicolon of a mount path with a parameter (``/{tenant}``) must stay a path."""
    return quote(str(scope.get("root_path", "")).rstrip("/"), safe="/")


def route_path(scope: Scope) -> str:
    """The request's path below the mount path: the one the API's routes are matched against
    (Starlette's own function, as FastAPI uses, so a check here sees what routing will)."""
    return get_route_path(scope)


CATCH_ALL = "/{path:path}"
"""The dashboard's last route: any other ``GET`` path, answered with the app's page."""
