"""What checking an access token's session costs the API: requests per second of an
authenticated read, in alternating rounds of three modes, in one process over ASGI (no
network: the server's own cost per request is what differs).

- ``signature``: the token's signature and claims only (what tickwork did before sessions
  were checked; the check is switched off for this mode alone).
- ``cached``: the session check as shipped (one database lookup per session per second).
- ``uncached``: the check with its cache off (a lookup per request: the worst case, as
  when every request comes from another session).

    .venv/bin/python benchmarks/api_auth.py [--url URL] [--seconds 5] [--rounds 3]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import platform
import statistics
import time
from typing import Any

import httpx

from tickwork import App
from tickwork.api import create_api
from tickwork.auth import AuthService, Role

DEFAULT_URL = os.environ.get("BENCH_DATABASE_URL", "postgresql://127.0.0.1:5432/bench_compare")
SCHEMA = "bench_api_auth"
CONCURRENCY = 8
PASSWORD = "correct horse battery staple"
ROUTE = "/api/leaders"  # authenticated, one small query: the check is a visible share of it


async def rate(client: httpx.AsyncClient, headers: dict[str, str], seconds: float) -> float:
    done = 0
    stop = time.perf_counter() + seconds

    async def loop() -> None:
        nonlocal done
        while time.perf_counter() < stop:
            answer = await client.get(ROUTE, headers=headers)
            assert answer.status_code == 200, answer.text
            done += 1

    started = time.perf_counter()
    await asyncio.gather(*(loop() for _ in range(CONCURRENCY)))
    return done / (time.perf_counter() - started)


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--url", default=DEFAULT_URL)
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--rounds", type=int, default=3)
    options = parser.parse_args()

    app = App(database_url=options.url, schema=SCHEMA)
    app.migrate()
    pool = await app.db.async_pool()
    async with pool.connection() as conn:
        await conn.execute(f"TRUNCATE {SCHEMA}.users, {SCHEMA}.refresh_tokens CASCADE")
    auth = AuthService(pool, app.db.statements, app.settings.auth)
    await auth.start()
    await auth.create_user("bench@example.com", PASSWORD, Role.VIEWER)
    pair = await auth.login("bench@example.com", PASSWORD, "192.0.2.1")
    headers = {"Authorization": f"Bearer {pair.access_token}"}
    api = create_api(app, auth, pool)
    checked = auth._session_refusal

    async def unchecked(claims: Any) -> None:
        return None

    results: dict[str, list[float]] = {"signature": [], "cached": [], "uncached": []}
    transport = httpx.ASGITransport(app=api)
    async with httpx.AsyncClient(transport=transport, base_url="http://bench") as client:
        await rate(client, headers, 1.0)  # warm up
        for _ in range(options.rounds):
            for mode in results:
                auth._session_refusal = unchecked if mode == "signature" else checked  # type: ignore[method-assign]
                auth._sessions.ttl = 0.0 if mode == "uncached" else 1.0
                results[mode].append(await rate(client, headers, options.seconds))
    await app.db.aclose()

    print(
        f"machine: {platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}"
    )
    print(f"{ROUTE} x {CONCURRENCY} concurrent, {options.rounds} rounds of {options.seconds:.0f} s")
    base = statistics.median(results["signature"])
    for mode, rates in results.items():
        median = statistics.median(rates)
        spread = ", ".join(f"{r:,.0f}" for r in rates)
        print(f"{mode:>10}: {median:8,.0f} req/s ({median / base:.2f}x)  [{spread}]")


if __name__ == "__main__":
    asyncio.run(main())
