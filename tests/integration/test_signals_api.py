"""The signals admin API (/api/admin/signals): every endpoint with its documented codes."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import psycopg
import pytest

from tickwork import App
from tickwork.auth import Role
from tickwork.services.leases import Role as Lease
from tickwork.signals import Reactor, ReactorContext, Signal
from tickwork.signals.runtime import SignalRuntime

from .api_support import Api, start_api

BASE = "/api/admin/signals"


class Tally(Reactor):
    name = "tally"
    handles = frozenset({"ORDER_PAID"})
    sweep_cron = "0 * * * *"

    def __init__(self) -> None:
        self.handled: list[int] = []
        self.swept = 0

    async def handle_signal(self, signal: Signal, ctx: ReactorContext) -> None:
        self.handled.append(signal.id)

    async def sweep(self, ctx: ReactorContext) -> None:
        self.swept += 1


@pytest.fixture
async def env(
    database_url: str, schema: str, clean: None
) -> AsyncIterator[tuple[Api, SignalRuntime, Tally]]:
    app = App(
        database_url=database_url,
        schema=schema,
        signals={"reactors": {"tally": {"enabled": True, "organisations": ["1"]}}},
    )
    tally = Tally()
    app.add_reactor(tally)
    runtime = app.signal_runtime(await app.db.async_pool(), holder_id="api-holder")
    await runtime.leases.run_once()
    async for api in start_api(app, runtime):
        yield api, runtime, tally
    await app.aclose()


def status(answer: Any, code: int) -> Any:
    assert answer.status_code == code, answer.text
    return answer.json() if answer.content else None


async def test_non_admins_get_403_everywhere(env: tuple[Api, SignalRuntime, Tally]) -> None:
    api, _, _ = env
    for role in (Role.VIEWER, Role.OPERATOR):
        for method, path in (
            ("GET", BASE),
            ("GET", f"{BASE}/reactors"),
            ("PUT", f"{BASE}/processor/enabled"),
        ):
            answer = await api.client.request(
                method, path, json={"enabled": False}, headers=api.headers(role)
            )
            assert answer.status_code == 403, (role, path)


async def test_list_detail_stats_retry_cancel(
    env: tuple[Api, SignalRuntime, Tally], sql: psycopg.Connection[Any]
) -> None:
    api, runtime, tally = env
    admin = api.headers(Role.ADMIN)
    sig = api.app.signals.emit("ORDER_PAID", "Order", 1, "order:1", 1, {"amount": 5})
    page = status(await api.client.get(BASE, params={"status": "PENDING"}, headers=admin), 200)
    assert [s["id"] for s in page["items"]] == [sig.signal_id]
    assert (
        status(await api.client.get(BASE, params={"status": "LOST"}, headers=admin), 400)["field"]
        == "status"
    )
    unknown_type = await api.client.get(BASE, params={"signal_type": "NEVER_SEEN"}, headers=admin)
    assert status(unknown_type, 400)["field"] == "signal_type"
    stats = status(await api.client.get(f"{BASE}/stats", headers=admin), 200)
    assert stats[0]["count"] == 1 and stats[0]["status"] == "PENDING"

    sql.execute("UPDATE signals SET process_after = now() - interval '1 s'")
    await runtime.processor.run_once()
    assert tally.handled == [sig.signal_id]
    detail = status(await api.client.get(f"{BASE}/{sig.signal_id}", headers=admin), 200)
    assert detail["signal"]["status"] == "COMPLETED"
    assert detail["deliveries"][0]["reactor_name"] == "tally"
    status(await api.client.get(f"{BASE}/987654", headers=admin), 404)

    status(await api.client.post(f"{BASE}/{sig.signal_id}/retry", headers=admin), 400)  # not DEAD
    status(
        await api.client.post(f"{BASE}/{sig.signal_id}/cancel", headers=admin), 400
    )  # not PENDING
    sql.execute("UPDATE signals SET status = 'DEAD'")
    fresher = api.app.signals.emit("ORDER_PAID", "Order", 1, "order:1", 1)
    superseded = status(await api.client.post(f"{BASE}/{sig.signal_id}/retry", headers=admin), 409)
    assert superseded["supersededByPendingId"] == fresher.signal_id
    cancelled = status(
        await api.client.post(f"{BASE}/{fresher.signal_id}/cancel", headers=admin), 200
    )
    assert cancelled["status"] == "COMPLETED"
    retried = status(await api.client.post(f"{BASE}/{sig.signal_id}/retry", headers=admin), 200)
    assert retried["status"] == "PENDING"
    events = status(
        await api.client.get("/api/audit", params={"target_type": "signal"}, headers=admin), 200
    )
    assert {e["event_type"] for e in events["items"]} == {"signal.retried", "signal.cancelled"}


async def test_stuck(env: tuple[Api, SignalRuntime, Tally], sql: psycopg.Connection[Any]) -> None:
    api, _, _ = env
    admin = api.headers(Role.ADMIN)
    sig = api.app.signals.emit("ORDER_PAID", aggregate_key="order:2")
    sql.execute("UPDATE signals SET status = 'PROCESSING', claimed_at = now() - interval '2 hours'")
    found = status(
        await api.client.get(f"{BASE}/stuck", params={"older_than": 3600}, headers=admin), 200
    )
    assert [s["id"] for s in found] == [sig.signal_id]
    status(await api.client.get(f"{BASE}/stuck", params={"older_than": -1}, headers=admin), 400)


async def test_reactor_switches_and_sweep(env: tuple[Api, SignalRuntime, Tally]) -> None:
    api, runtime, tally = env
    admin = api.headers(Role.ADMIN)
    reactors = {
        r["name"]: r for r in status(await api.client.get(f"{BASE}/reactors", headers=admin), 200)
    }
    assert reactors["tally"]["enabled"] == {"config": True, "override": None, "effective": True}
    assert reactors["tally"]["organisations"]["effective"] == ["1"]
    assert "signal-retention" in reactors

    assert (
        status(
            await api.client.put(
                f"{BASE}/reactors/tally/enabled", json={"enabled": False}, headers=admin
            ),
            204,
        )
        is None
    )
    assert not runtime.control.reactor("tally").enabled.effective
    status(
        await api.client.put(
            f"{BASE}/reactors/nope/enabled", json={"enabled": False}, headers=admin
        ),
        404,
    )
    for loose in ("maybe", "yes", "true", 1, 0):  # strict: no coercion to a bool
        refused = await api.client.put(
            f"{BASE}/reactors/tally/enabled", json={"enabled": loose}, headers=admin
        )
        status(refused, 400)
        assert refused.json()["field"] == "enabled", refused.text
    assert not runtime.control.reactor("tally").enabled.effective  # none of them took effect
    status(
        await api.client.put(
            f"{BASE}/reactors/tally/dry-run", json={"dry_run": True}, headers=admin
        ),
        204,
    )
    status(
        await api.client.put(
            f"{BASE}/reactors/tally/organisations", json={"organisations": []}, headers=admin
        ),
        204,
    )
    assert runtime.control.reactor("tally").organisations.effective == frozenset()
    status(  # integers as emit takes them, stored as the text emit stores
        await api.client.put(
            f"{BASE}/reactors/tally/organisations",
            json={"organisations": [7, "8"]},
            headers=admin,
        ),
        204,
    )
    assert runtime.control.reactor("tally").organisations.effective == {"7", "8"}
    for bad in ([True], [""], ["x" * 101], [1.5], "7", list(range(10_001))):
        refused = await api.client.put(
            f"{BASE}/reactors/tally/organisations", json={"organisations": bad}, headers=admin
        )
        status(refused, 400)
        assert refused.json()["field"].startswith("organisations"), refused.text
    status(
        await api.client.put(
            f"{BASE}/reactors/tally/enabled", json={"enabled": None}, headers=admin
        ),
        204,
    )
    status(
        await api.client.put(
            f"{BASE}/reactors/tally/organisations", json={"organisations": None}, headers=admin
        ),
        204,
    )

    swept = status(await api.client.post(f"{BASE}/reactors/tally/sweep", headers=admin), 200)
    assert swept["outcome"] == "COMPLETED" and tally.swept == 1 and swept["dry_run"] is True
    status(await api.client.post(f"{BASE}/reactors/nope/sweep", headers=admin), 404)

    status(
        await api.client.put(f"{BASE}/processor/enabled", json={"enabled": False}, headers=admin),
        204,
    )
    status(
        await api.client.put(f"{BASE}/sweeps/enabled", json={"enabled": False}, headers=admin), 204
    )
    overview = status(await api.client.get(f"{BASE}/status", headers=admin), 200)
    assert overview["processor"]["effective"] is False and overview["sweeps"]["effective"] is False
    assert set(overview["holds"]) == {"SIGNAL_MASTER", "SWEEP_MASTER"}


async def test_setters_that_need_the_lease_answer_409_elsewhere(
    env: tuple[Api, SignalRuntime, Tally],
) -> None:
    api, runtime, _ = env
    admin = api.headers(Role.ADMIN)
    await runtime.leases.release()  # this process no longer holds anything
    other = api.app.signal_runtime(runtime.pool, holder_id="the-other-process")
    await other.leases.run_once()
    for path, body in (
        (f"{BASE}/reactors/tally/dry-run", {"dry_run": True}),
        (f"{BASE}/reactors/tally/organisations", {"organisations": ["2"]}),
    ):
        answer = status(await api.client.put(path, json=body, headers=admin), 409)
        assert answer["holder"] == "the-other-process"
    answer = status(await api.client.post(f"{BASE}/reactors/tally/sweep", headers=admin), 409)
    assert answer["lease"] == Lease.SWEEP_MASTER
    leaders = status(await api.client.get(f"{BASE}/leaders", headers=admin), 200)
    assert {(entry["name"], entry["holder"], entry["this_process"]) for entry in leaders} == {
        ("SIGNAL_MASTER", "the-other-process", False),
        ("SWEEP_MASTER", "the-other-process", False),
    }


async def test_a_dead_delivery_is_replayed_only_to_a_reactor_that_will_run_it(
    env: tuple[Api, SignalRuntime, Tally], sql: psycopg.Connection[Any]
) -> None:
    """A replay removes the DEAD record and makes the signal due: for a reactor the holder
    does not run, or has disabled, it would never run. Refused (400 naming the reactor), the
    record kept; once the reactor is enabled again, the replay runs it."""
    api, runtime, tally = env
    admin = api.headers(Role.ADMIN)
    sig = api.app.signals.emit("ORDER_PAID", "Order", 1, "order:1", 1)
    sql.execute("UPDATE signals SET status = 'COMPLETED', processed_at = now()")
    for reactor in ("tally", "gone"):  # "gone": a reactor since removed from the code
        sql.execute(
            "INSERT INTO signal_reactor_status (signal_id, reactor_name, status, retry_count)"
            " VALUES (%s, %s, 'DEAD', 2)",
            [sig.signal_id, reactor],
        )

    def replay(reactor: str) -> Any:
        return api.client.post(f"{BASE}/{sig.signal_id}/reactors/{reactor}/retry", headers=admin)

    def dead() -> list[str]:
        found = sql.execute(
            "SELECT reactor_name FROM signal_reactor_status WHERE status = 'DEAD' ORDER BY 1"
        )
        return [r[0] for r in found.fetchall()]

    async def enable(on: bool) -> None:
        switch = f"{BASE}/reactors/tally/enabled"
        status(await api.client.put(switch, json={"enabled": on}, headers=admin), 204)

    refused = status(await replay("gone"), 400)
    assert refused["field"] == "reactor"
    assert "not a reactor the SIGNAL_MASTER holder runs" in refused["detail"]
    await enable(False)
    assert "disabled" in status(await replay("tally"), 400)["detail"]
    assert dead() == ["gone", "tally"]  # both records kept
    status(await replay("nope"), 404)  # no delivery of it at all

    status(
        await api.client.put(
            f"{BASE}/reactors/tally/enabled", json={"enabled": True}, headers=admin
        ),
        204,
    )
    assert status(await replay("tally"), 200)["status"] == "PROCESSING"
    await runtime.processor.run_once()
    assert tally.handled == [sig.signal_id]
    assert dead() == ["gone"]
