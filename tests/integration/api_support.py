"""An API on the test database with one user per role, driven in-process over ASGI."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import httpx
from fastapi import FastAPI

from tickwork import App
from tickwork.api import create_api
from tickwork.auth import AuthService, Role
from tickwork.signals.runtime import SignalRuntime

PASSWORD = "correct horse battery staple"
BASE_URL = "http://testserver"


@dataclass
class Api:
    """The API, its auth service and an access token per role (None: anonymous)."""

    app: App
    api: FastAPI
    auth: AuthService
    client: httpx.AsyncClient
    tokens: dict[Role, str] = field(default_factory=dict)
    refresh: dict[Role, str] = field(default_factory=dict)

    def headers(self, role: Role | None) -> dict[str, str]:
        return {} if role is None else {"Authorization": f"Bearer {self.tokens[role]}"}

    async def login(self, email: str, password: str = PASSWORD) -> httpx.Response:
        return await self.client.post(
            "/api/auth/login", json={"email": email, "password": password}
        )


def email(role: Role) -> str:
    return f"{role.name.lower()}@example.com"


async def start_api(app: App, signals: SignalRuntime | None = None) -> AsyncIterator[Api]:
    pool = await app.db.async_pool()
    auth = AuthService(pool, app.db.store, app.settings.auth)
    await auth.start()
    api = create_api(app, auth, pool, signals)
    transport = httpx.ASGITransport(app=api)
    async with httpx.AsyncClient(transport=transport, base_url=BASE_URL) as client:
        found = Api(app, api, auth, client)
        for role in Role:
            await auth.create_user(email(role), PASSWORD, role)
            answer = await found.login(email(role))
            assert answer.status_code == 200, answer.text
            found.tokens[role] = answer.json()["access_token"]
            found.refresh[role] = answer.json()["refresh_token"]
        yield found


def problem(answer: httpx.Response, status: int) -> dict[str, Any]:
    """The RFC 9457 problem body of ``answer``, checked to carry ``status`` and a detail."""
    assert answer.status_code == status, answer.text
    assert answer.headers["content-type"].startswith("application/problem+json"), answer.text
    body: dict[str, Any] = answer.json()
    assert body["status"] == status and body["detail"]
    return body
