"""The signals admin API behind a load balancer: three ``tickwork serve`` processes on one
database (H holding SIGNAL_MASTER and SWEEP_MASTER, S running the signal services without
the leases, A the API alone) each answer for the lease holder, as the seed's contract says.
Real processes, one database; the state is read over HTTP and from the database."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import psycopg
import pytest

from tickwork import App

from .support import HANG_GUARD, free_port, wait_for

pytestmark = pytest.mark.e2e

E2E_DIR = Path(__file__).parent
ADMIN = {"email": "root@example.com", "password": "signals-fleet-admin-pw"}
BASE = "/api/admin/signals"
FAST_LEASES = {
    "TICKWORK_LEASES__HEARTBEAT": "0.3",
    "TICKWORK_LEASES__TTL": "5",
    "TICKWORK_SIGNALS__LEASE__HEARTBEAT": "0.3",
    "TICKWORK_SIGNALS__LEASE__TTL": "5",
    "TICKWORK_SIGNALS__PROCESSOR__POLL_INTERVAL": "0.2",
    # order_paid is organisation-scoped: it acts for organisation 7 only
    "TICKWORK_SIGNALS__REACTORS": '{"order_paid": {"organisations": ["7"]}}',
}
"""Failover and processing within a second: what the test waits for, not what it asserts."""


@dataclass
class Serve:
    """One ``tickwork serve`` process and an admin's client of its API."""

    name: str
    process: subprocess.Popen[bytes]
    url: str
    client: httpx.Client = field(init=False)

    def __post_init__(self) -> None:
        self.client = httpx.Client(base_url=self.url, timeout=30)

    def login(self) -> None:
        def answered() -> httpx.Response | None:
            assert self.process.poll() is None, f"{self.name} exited"
            try:
                return self.client.post("/api/auth/login", json=ADMIN)
            except httpx.ConnectError:
                return None  # not listening yet

        answer = wait_for(answered, f"{self.name} to listen")
        assert answer.status_code == 200, answer.text
        self.client.headers["Authorization"] = f"Bearer {answer.json()['access_token']}"

    def get(self, path: str) -> Any:
        answer = self.client.get(f"{BASE}{path}")
        assert answer.status_code == 200, (self.name, path, answer.text)
        return answer.json()

    def put(self, path: str, body: dict[str, Any]) -> httpx.Response:
        return self.client.put(f"{BASE}{path}", json=body)

    def reactor(self, name: str) -> dict[str, Any]:
        [found] = [r for r in self.get("/reactors") if r["name"] == name]
        return found

    def holder(self, lease: str) -> str | None:
        live = [r["holder"] for r in self.get("/leaders") if r["name"] == lease and r["live"]]
        return live[0] if live else None

    def holds_both(self) -> bool:
        mine = {r["name"] for r in self.get("/leaders") if r["this_process"] and r["live"]}
        return mine == {"SIGNAL_MASTER", "SWEEP_MASTER"}

    def stop(self) -> None:
        self.process.send_signal(signal.SIGTERM)
        self.process.wait(HANG_GUARD)


@pytest.fixture
def fleet(db_env: dict[str, str], clean: None, tmp_path: Path) -> Iterator[dict[str, Serve]]:
    env = db_env | FAST_LEASES
    env |= {"TICKWORK_AUTH__ADMIN_EMAIL": ADMIN["email"]}
    env |= {"TICKWORK_AUTH__ADMIN_PASSWORD": ADMIN["password"]}
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(E2E_DIR), env.get("PYTHONPATH")) if p)
    started: dict[str, Serve] = {}

    def start(name: str, roles: str) -> Serve:
        port = free_port()
        command = [sys.executable, "-m", "tickwork", "serve", "--app", "signals_app:app"]
        command += ["--roles", roles, "--port", str(port)]
        log = (tmp_path / f"{name}.log").open("wb")
        process = subprocess.Popen(command, env=env, stdout=log, stderr=subprocess.STDOUT)
        started[name] = Serve(name, process, f"http://127.0.0.1:{port}")
        started[name].login()
        return started[name]

    try:
        holder = start("H", "api,signals")
        wait_for(holder.holds_both, "H to hold SIGNAL_MASTER and SWEEP_MASTER")
        start("S", "api,signals")  # competes for the leases, holds none while H lives
        start("A", "api")
        yield started
    finally:
        for serve in started.values():
            if serve.process.poll() is None:
                serve.process.kill()
            serve.process.wait(HANG_GUARD)
            serve.client.close()


def problem(answer: httpx.Response, status: int) -> dict[str, Any]:
    assert answer.status_code == status, answer.text
    assert answer.headers["content-type"].startswith("application/problem+json")
    body: dict[str, Any] = answer.json()
    return body


def test_every_process_answers_for_the_lease_holder(
    fleet: dict[str, Serve], db_env: dict[str, str], sql: psycopg.Connection[Any]
) -> None:
    h, s, a = fleet["H"], fleet["S"], fleet["A"]
    holder = h.holder("SIGNAL_MASTER")
    assert holder is not None and h.holder("SWEEP_MASTER") == holder
    assert {p.holder("SIGNAL_MASTER") for p in (h, s, a)} == {holder}

    # reads: the holder's configuration, on every process
    for p in (h, s, a):
        assert p.reactor("order_paid")["enabled"] == {
            "config": False, "override": None, "effective": False,
        }, p.name  # fmt: skip
        assert p.get("/status")["processor"] == {
            "config": True, "override": None, "effective": True,
        }, p.name  # fmt: skip

    # a switch set through the API-only process is shown everywhere ...
    assert a.put("/reactors/order_paid/enabled", {"enabled": True}).status_code == 204
    for p in (h, s, a):
        assert p.reactor("order_paid")["enabled"] == {
            "config": False, "override": True, "effective": True,
        }, p.name  # fmt: skip
    # ... and the holder obeys it: a signal it routes to the reactor, now enabled
    app = App(database_url=db_env["TICKWORK_DATABASE_URL"], schema=db_env["TICKWORK_SCHEMA"])
    try:
        emitted = app.signals.emit("ORDER_PAID", aggregate_key="order:1", organisation_id=7)
    finally:
        app.close()
    sql.execute("UPDATE signals SET process_after = now() WHERE id = %s", (emitted.signal_id,))

    def delivered() -> Any:
        return sql.execute(
            "SELECT status FROM signal_reactor_status WHERE signal_id = %s"
            " AND reactor_name = 'order_paid'",
            (emitted.signal_id,),
        ).fetchone()

    assert wait_for(delivered, "the holder to deliver the signal") == ("COMPLETED",)

    # the framework switches, from a process that runs the signal services but holds nothing
    assert s.put("/processor/enabled", {"enabled": False}).status_code == 204
    assert a.get("/status")["processor"] == {"config": True, "override": False, "effective": False}
    assert s.put("/processor/enabled", {"enabled": None}).status_code == 204
    assert a.put("/sweeps/enabled", {"enabled": False}).status_code == 204
    assert h.get("/status")["sweeps"] == {"config": True, "override": False, "effective": False}
    assert a.put("/sweeps/enabled", {"enabled": None}).status_code == 204

    # 409 only where the seed lists it, naming the right lease and the real holder
    for p in (s, a):
        for path, body in (
            ("/reactors/order_paid/dry-run", {"dry_run": True}),
            ("/reactors/order_paid/organisations", {"organisations": ["7"]}),
        ):
            refused = problem(p.put(path, body), 409)
            assert (refused["lease"], refused["holder"]) == ("SIGNAL_MASTER", holder), p.name
        refused = problem(p.client.post(f"{BASE}/reactors/order_paid/sweep"), 409)
        assert (refused["lease"], refused["holder"]) == ("SWEEP_MASTER", holder), p.name
    assert h.put("/reactors/order_paid/dry-run", {"dry_run": True}).status_code == 204
    assert a.reactor("order_paid")["dry_run"] == {
        "config": False,
        "override": True,
        "effective": True,
    }
    swept = h.client.post(f"{BASE}/reactors/order_paid/sweep")
    assert swept.status_code == 200, swept.text
    assert (swept.json()["outcome"], swept.json()["dry_run"]) == ("COMPLETED", True)

    # a new holder drops the overrides of the one before (the seed's "lost on restart")
    h.stop()
    successor = wait_for(lambda: s.holds_both() and s.holder("SIGNAL_MASTER"), "S to take over")
    assert successor != holder
    for p in (s, a):
        order_paid = p.reactor("order_paid")
        assert order_paid["enabled"] == {"config": False, "override": None, "effective": False}
        assert order_paid["dry_run"] == {"config": False, "override": None, "effective": False}
    left = {row[0] for row in sql.execute("SELECT holder FROM signal_overrides").fetchall()}
    assert left <= {holder}  # the old holder's rows apply to nobody; the next write deletes them

    # nobody holds the leases: a switch has nobody to apply it
    s.stop()
    wait_for(lambda: a.holder("SIGNAL_MASTER") is None, "the leases to be released")
    answer = a.put("/reactors/order_paid/enabled", {"enabled": True})
    refused = problem(answer, 503)
    assert refused["leases"] == ["SIGNAL_MASTER", "SWEEP_MASTER"] and refused["holder"] is None
    assert int(answer.headers["Retry-After"]) > 0
    assert a.reactor("order_paid")["enabled"]["override"] is None
    assert sql.execute("SELECT count(*) FROM signal_overrides").fetchone() == (0,)
