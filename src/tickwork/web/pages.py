"""Which paths are the dashboard's pages: the routes of its client-side router
(``ui/src/main.tsx``, mirrored here and compared with it by a test), so the server answers
200 with the app's page at those paths only, and 404 at every other.

An unknown path is a 404 for every client: an MCP or OAuth client probing
``/.well-known/oauth-protected-resource`` or ``/register`` learns there is nothing there
(a 200 page would send it into an OAuth dance tickwork does not do). A browser asking for a
page (``Accept: text/html``) gets the app's page with the 404, which shows its "No such
page" with links back; anything else gets a problem detail. Paths in :data:`NEVER_PAGES`
are problems for every client.
"""

from __future__ import annotations

PAGES = (
    "/",
    "/login",
    "/invite",
    "/jobs",
    "/jobs/:id",
    "/queues",
    "/schedules",
    "/definitions",
    "/definitions/new",
    "/definitions/:id",
    "/workers",
    "/signals",
    "/signals/:id",
    "/audit",
    "/users",
    "/settings",
    "/account",
)
"""The router's paths (``:id``: any one segment, as the router matches it)."""

NEVER_PAGES = ("api", "assets", "mcp", ".well-known")
"""First segments of paths that are never a page, whoever asks: the API's, the built
files', the MCP endpoint's, and RFC 8615's well-known locations."""
OAUTH_NAMES = ("register", "authorize", "token")
OAUTH_PREFIXES = (".well-known/oauth", ".well-known/openid")
"""Where an OAuth client looks for an authorization server (RFC 8414 and 9728 metadata,
OpenID Connect Discovery, and the endpoints the MCP SDKs fall back to): the 404 there says
what to send instead."""
NO_OAUTH = (
    "tickwork does not do OAuth: send a personal API token (the dashboard's account page, or"
    " POST /api/me/tokens) as a bearer token, 'Authorization: Bearer <token>'"
)


def _segments(path: str) -> tuple[str, ...]:
    bare = path.strip("/")
    return tuple(bare.split("/")) if bare else ()


_ROUTES = tuple(_segments(p) for p in PAGES)


def is_page(path: str) -> bool:
    """``path`` (below the mount path; a trailing ``/`` is the router's too) is one of the
    app's pages."""
    segments = _segments(path)
    return any(
        len(route) == len(segments)
        and all(r == s or (r.startswith(":") and s) for r, s in zip(route, segments, strict=True))
        for route in _ROUTES
    )


def never_page(path: str) -> bool:
    """``path`` is under one of :data:`NEVER_PAGES`."""
    return path.strip("/").split("/")[0] in NEVER_PAGES


def oauth_probe(path: str) -> bool:
    """``path`` is one an OAuth client asks an authorization server at."""
    bare = path.strip("/")
    return bare in OAUTH_NAMES or bare.startswith(OAUTH_PREFIXES)
