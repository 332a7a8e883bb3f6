"""Two API hosts (``tickwork serve``) behind a round-robin client; one is killed with
SIGKILL mid-stream. The client moves to the other host only on a connection error (nothing
was sent); no request fails beyond those in flight at the kill, and each stored job was
stored once (an in-flight enqueue retried with its unique key finds the first)."""

from __future__ import annotations

import itertools
import secrets
import threading
import time
from typing import Any

import httpx
import pytest

from ..figures import record, scale
from .hosts import Fleet, Process, wait_until

pytestmark = pytest.mark.e2e

CHECK = "one of two API hosts killed (-9) behind a round-robin client"
CLIENTS = 4
REQUESTS = scale(100, 1000)
"""Enqueues each client sends."""
PASSWORD = "correct horse battery staple"
SERVE = {
    "AUTH__ADMIN_EMAIL": "root@example.com",
    "AUTH__ADMIN_PASSWORD": PASSWORD,
    "AUTH__JWT_SECRET": secrets.token_hex(32),
    "WORKER__POLL_INTERVAL": 5,
}


class RoundRobin:
    """Sends each request to the next host in turn; on a connection error (the request never
    left) it tries the other hosts; any other error is the caller's."""

    def __init__(self, urls: list[str], token: str) -> None:
        self.urls = urls
        self.turn = itertools.count()  # next() of a count is atomic under the GIL
        self.client = httpx.Client(
            headers={"Authorization": f"Bearer {token}"}, timeout=30.0, limits=httpx.Limits()
        )
        self.moved = 0

    def post(self, path: str, body: dict[str, Any]) -> httpx.Response:
        first = next(self.turn)
        for tried in range(len(self.urls)):
            url = self.urls[(first + tried) % len(self.urls)]
            try:
                return self.client.post(f"{url}{path}", json=body)
            except httpx.ConnectError:
                if tried == len(self.urls) - 1:
                    raise
                self.moved += 1
        raise AssertionError("unreachable")


def api(fleet: Fleet, name: str) -> tuple[Process, str]:
    host = fleet.host()
    process = fleet.start(
        host, name, "serve", "--app", "worker_app:app", "--roles", "api",
        "--host", host.address, "--port", "8000", **SERVE,
    )  # fmt: skip
    url = f"http://{host.address}:8000"

    def ready() -> bool:
        try:
            return httpx.get(f"{url}/readyz", timeout=2).status_code == 200
        except httpx.HTTPError:
            return False

    wait_until(ready, f"{name} is ready", guard=fleet.assert_alive, detail=fleet.logs)
    return process, url


def test_killing_one_api_host_fails_no_request_beyond_those_in_flight(
    fleet: Fleet, net_sql: Any
) -> None:
    sql = net_sql
    (a1, url1), (_, url2) = api(fleet, "a1"), api(fleet, "a2")
    login = httpx.post(
        f"{url2}/api/auth/login", json={"email": "root@example.com", "password": PASSWORD}
    )
    assert login.status_code == 200, login.text
    balancer = RoundRobin([url1, url2], login.json()["access_token"])
    stored: list[str] = []
    failed: list[str] = []
    sent = threading.Semaphore(0)

    def client(n: int) -> None:
        for i in range(REQUESTS):
            key = f"c{n}-{i}"
            try:
                answer = balancer.post("/api/jobs", {"task": "e2e.noop", "unique_key": key})
            except httpx.HTTPError as exc:
                failed.append(f"{key}: {type(exc).__name__}: {exc}")
            else:
                (stored if answer.status_code in (200, 201) else failed).append(
                    key if answer.status_code in (200, 201) else f"{key}: {answer.status_code}"
                )
            sent.release()

    threads = [threading.Thread(target=client, args=(n,)) for n in range(CLIENTS)]
    for thread in threads:
        thread.start()
    for _ in range(CLIENTS * REQUESTS // 3):  # a third of the way through
        sent.acquire(timeout=60)
    a1.popen.kill()
    killed_at = time.monotonic()
    for thread in threads:
        thread.join(timeout=300)
    assert not any(thread.is_alive() for thread in threads)
    a1.popen.wait()
    fleet.processes.remove(a1)
    fleet.assert_alive()

    assert len(failed) <= CLIENTS, f"more failures than requests in flight: {failed}"
    keys = dict(sql.execute("SELECT unique_key, count(*) FROM jobs GROUP BY unique_key").fetchall())
    assert all(n == 1 for n in keys.values())
    assert set(stored) <= set(keys), "a request answered 201 has no job"
    record("reliability", CHECK, "requests", CLIENTS * REQUESTS, clients=CLIENTS)
    stored_anyway = sum(1 for f in failed if f.split(":")[0] in keys)
    record("reliability", CHECK, "requests failed", len(failed),
           in_flight_at_the_kill_at_most=CLIENTS, stored_before_the_kill=stored_anyway)  # fmt: skip
    record("reliability", CHECK, "requests moved to the other host (connection refused)",
           balancer.moved)  # fmt: skip
    record("reliability", CHECK, "jobs stored twice", 0,
           seconds_after_the_kill=round(time.monotonic() - killed_at, 1))  # fmt: skip
