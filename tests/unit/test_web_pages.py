"""The server knows the dashboard's pages as its router does: the paths of ui/src/main.tsx,
and only those (any other path is a 404)."""

from __future__ import annotations

import re
from pathlib import Path

from tickwork.web.pages import PAGES, is_page, never_page, oauth_probe

ROUTER = Path(__file__).parents[2] / "ui" / "src" / "main.tsx"


def test_the_pages_are_the_routers_paths() -> None:
    routes = re.findall(r'\bpath: "([^"]+)"', ROUTER.read_text())
    assert "*" in routes  # the router's own "No such page", for a path of none of these
    assert sorted(PAGES) == sorted(r for r in routes if r != "*")


def test_a_path_is_a_page_as_the_router_matches_it() -> None:
    for path in ("/", "", "/jobs", "/jobs/", "/jobs/42", "/jobs/42/", "/definitions/new",
                 "/definitions/7", "/signals/3", "/login", "/invite", "/account"):  # fmt: skip
        assert is_page(path), path
    for path in ("/nowhere", "/jobs/42/edit", "/jobs//42", "/queues/x", "/register",
                 "/authorize", "/token", "/.well-known/oauth-protected-resource", "/mcp",
                 "/api/jobs", "/assets/x.js", "/favicon.ico", "/robots.txt"):  # fmt: skip
        assert not is_page(path), path


def test_what_is_never_a_page_and_what_an_oauth_client_asks_for() -> None:
    for path in ("/api/x", "/assets/x", "/mcp", "/mcp/x", "/.well-known/security.txt"):
        assert never_page(path), path
    assert not never_page("/nowhere") and not never_page("/apis")
    for path in (
        "/.well-known/oauth-protected-resource",
        "/.well-known/oauth-protected-resource/mcp",
        "/.well-known/oauth-authorization-server",
        "/.well-known/openid-configuration",
        "/register",
        "/authorize",
        "/token",
    ):
        assert oauth_probe(path), path
    assert not oauth_probe("/tokens") and not oauth_probe("/jobs") and not oauth_probe("/")
