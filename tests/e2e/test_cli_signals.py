"""``tickwork signals`` and ``tickwork reactors`` as an operator runs them: signals straight on
the database, reactors' runtime switches through a running ``tickwork serve``."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import psycopg
import pytest

from tickwork import App
from tickwork.cli import cli_actor
from tickwork.ops.audit import AuditFilter, list_events

from .support import free_port, tickwork

pytestmark = pytest.mark.e2e

E2E_DIR = Path(__file__).parent
START_GUARD = 180.0  # not a timing assertion: only stops a broken start from hanging the run
ADMIN = {"email": "root@example.com", "password": "cli-signals-admin-pw"}

Sql = psycopg.Connection[tuple[Any, ...]]


def with_app_path(env: dict[str, str]) -> dict[str, str]:
    """``env`` with tests/e2e importable, for ``--app signals_app:app``."""
    paths = (str(E2E_DIR), env.get("PYTHONPATH"))
    return env | {"PYTHONPATH": os.pathsep.join(p for p in paths if p)}


async def run(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    """``tickwork`` from an async test without blocking its event loop."""
    return await asyncio.to_thread(tickwork, env, *args)


def as_json(done: subprocess.CompletedProcess[str]) -> Any:
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def failed(done: subprocess.CompletedProcess[str]) -> str:
    """The one-line error of a command that exited with code 2."""
    assert done.returncode == 2, (done.stdout, done.stderr)
    assert done.stderr.startswith("error: ") and done.stderr.count("\n") == 1, done.stderr
    return done.stderr


def status_of(sql: Sql, signal_id: int) -> str:
    row = sql.execute("SELECT status FROM signals WHERE id = %s", (signal_id,)).fetchone()
    assert row is not None
    status: str = row[0]
    return status


async def test_signals_list_show_and_stats(db_env: dict[str, str], app: App, sql: Sql) -> None:
    paid = (await app.signals.emit_async("ORDER_PAID", "Order", 1, "order:1", 1)).signal_id
    other = (await app.signals.emit_async("ORDER_PAID", "Order", 2, "order:2", 2)).signal_id
    sent = (await app.signals.emit_async("INVOICE_SENT", "Invoice", 7, "invoice:7")).signal_id
    sql.execute(
        "UPDATE signals SET status = 'DEAD', error_message = 'reactor order_paid is DEAD'"
        " WHERE id = %s",
        (paid,),
    )
    # a status written by hand is not tallied (tickwork's statements tally what they change):
    # doctor --recount counts the tables again
    await run(db_env, "doctor", "--recount")
    sql.execute(
        "INSERT INTO signal_reactor_status (signal_id, reactor_name, status, error_message,"
        " retry_count) VALUES (%s, 'order_paid', 'DEAD', 'RuntimeError: boom', 3)",
        (paid,),
    )

    page = as_json(await run(db_env, "signals", "list", "--status", "dead,pending", "--json"))
    assert [(s["id"], s["status"]) for s in page["items"]] == [
        (sent, "PENDING"),
        (other, "PENDING"),
        (paid, "DEAD"),
    ]
    assert page["next_cursor"] is None
    dead = as_json(await run(db_env, "signals", "list", "-s", "DEAD", "--json"))
    assert [s["id"] for s in dead["items"]] == [paid]
    assert dead["items"][0]["error_message"] == "reactor order_paid is DEAD"
    assert as_json(await run(db_env, "signals", "list", "-s", "COMPLETED", "--json"))["items"] == []
    by_type = await run(db_env, "signals", "list", "--type", "INVOICE_SENT", "--json")
    assert [s["id"] for s in as_json(by_type)["items"]] == [sent]
    by_key = await run(db_env, "signals", "list", "--key", "order:2", "--json")
    assert [s["id"] for s in as_json(by_key)["items"]] == [other]
    by_org = await run(db_env, "signals", "list", "--organisation", "1", "--json")
    assert [s["id"] for s in as_json(by_org)["items"]] == [paid]
    first = as_json(await run(db_env, "signals", "list", "--limit", "1", "--json"))
    assert [s["id"] for s in first["items"]] == [sent] and first["next_cursor"] == sent
    rest = await run(db_env, "signals", "list", "--before-id", str(sent), "--json")
    assert [s["id"] for s in as_json(rest)["items"]] == [other, paid]
    table = await run(db_env, "signals", "list")
    assert table.returncode == 0, table.stderr
    assert "INVOICE_SENT" in table.stdout and "DEAD" in table.stdout

    unknown_status = failed(await run(db_env, "signals", "list", "--status", "pending,asleep"))
    assert "status ('asleep') is not a signal status" in unknown_status
    unknown_type = failed(await run(db_env, "signals", "list", "--type", "NO_SUCH_TYPE"))
    assert "signal_type ('NO_SUCH_TYPE')" in unknown_type
    bad_limit = failed(await run(db_env, "signals", "list", "--limit", "0"))
    assert "limit (0) must be between 1 and" in bad_limit

    shown = as_json(await run(db_env, "signals", "show", str(paid), "--json"))
    assert (shown["signal"]["id"], shown["signal"]["status"]) == (paid, "DEAD")
    assert (shown["signal"]["entity_type"], shown["signal"]["entity_id"]) == ("Order", "1")
    assert shown["signal"]["aggregate_key"] == "order:1"
    assert shown["signal"]["organisation_id"] == "1"
    [delivery] = shown["deliveries"]
    assert (delivery["reactor_name"], delivery["status"], delivery["retry_count"]) == (
        "order_paid",
        "DEAD",
        3,
    )
    assert delivery["error_message"] == "RuntimeError: boom"
    readable = await run(db_env, "signals", "show", str(paid))
    assert readable.returncode == 0, readable.stderr
    assert "order_paid" in readable.stdout and "RuntimeError: boom" in readable.stdout
    missing = failed(await run(db_env, "signals", "show", "999999"))
    assert "signal 999999 does not exist" in missing

    stats = as_json(await run(db_env, "signals", "stats", "--json"))
    assert {(r["status"], r["signal_type"]): r["count"] for r in stats} == {
        ("DEAD", "ORDER_PAID"): 1,
        ("PENDING", "ORDER_PAID"): 1,
        ("PENDING", "INVOICE_SENT"): 1,
    }
    # the oldest of the live ones; the settled ones are counted, not dated
    assert [bool(r["oldest_created_at"]) for r in stats] == [False, True, True]
    stats_table = await run(db_env, "signals", "stats")
    assert stats_table.returncode == 0, stats_table.stderr
    assert "INVOICE_SENT" in stats_table.stdout


async def test_signals_retry_and_cancel(db_env: dict[str, str], app: App, sql: Sql) -> None:
    dead = (await app.signals.emit_async("ORDER_PAID", "Order", 1, "order:1", 1)).signal_id
    sql.execute("UPDATE signals SET status = 'DEAD' WHERE id = %s", (dead,))
    fresher = await app.signals.emit_async("ORDER_PAID", "Order", 1, "order:1", 1)
    assert not fresher.squashed and fresher.signal_id != dead  # only a PENDING one absorbs

    superseded = failed(await run(db_env, "signals", "retry", str(dead)))
    assert (
        f"signal {dead} was not retried: pending signal {fresher.signal_id} already holds"
        " the same type and aggregate key (the work is queued)"
    ) in superseded
    assert status_of(sql, dead) == "DEAD"

    cancelled = await run(db_env, "signals", "cancel", str(fresher.signal_id))
    assert cancelled.returncode == 0, cancelled.stderr
    assert f"signal {fresher.signal_id} is COMPLETED" in cancelled.stdout
    assert status_of(sql, fresher.signal_id) == "COMPLETED"
    again = failed(await run(db_env, "signals", "cancel", str(fresher.signal_id)))
    assert "is COMPLETED; only a PENDING signal is cancelled" in again

    retried = await run(db_env, "signals", "retry", str(dead))
    assert retried.returncode == 0, retried.stderr
    assert f"signal {dead} is PENDING" in retried.stdout
    assert status_of(sql, dead) == "PENDING"
    not_dead = failed(await run(db_env, "signals", "retry", str(dead)))
    assert "is PENDING; only a DEAD signal is retried" in not_dead
    missing = failed(await run(db_env, "signals", "cancel", "999999"))
    assert "signal 999999 does not exist" in missing

    pool = await app.db.async_pool()
    events = await list_events(pool, app.db.store, AuditFilter(target_type="signal"))
    assert {(e.event_type, e.actor) for e in events.items} == {
        ("signal.cancelled", cli_actor()),
        ("signal.retried", cli_actor()),
    }


async def test_reactors_list_shows_the_configuration(
    db_env: dict[str, str], app: App, sql: Sql
) -> None:
    env = with_app_path(db_env) | {
        "TICKWORK_SIGNALS__REACTORS__ORDER_PAID__ENABLED": "true",
        "TICKWORK_SIGNALS__REACTORS__ORDER_PAID__ORGANISATIONS": '["org-2", "org-1"]',
    }
    sql.execute(
        "INSERT INTO sweep_runs (reactor_name, holder, trigger, dry_run, finished_at, outcome)"
        " VALUES ('order_paid', 'h1', 'schedule', false, now(), 'FAILED'),"
        " ('order_paid', 'h1', 'manual', true, now(), 'COMPLETED')"
    )
    listed = as_json(await run(env, "reactors", "list", "--app", "signals_app:app", "--json"))
    by_name = {r["name"]: r for r in listed}
    assert list(by_name) == ["order_paid", "signal-retention"]
    mine = by_name["order_paid"]
    assert mine["handles"] == ["ORDER_PAID"] and mine["sweep_cron"] == "*/5 * * * *"
    assert mine["organisation_scoped"] is True
    assert mine["enabled"] == {"config": True} and mine["dry_run"] == {"config": False}
    assert mine["organisations"] == {"config": ["org-1", "org-2"]}
    last = mine["last_sweep"]
    assert (last["outcome"], last["trigger"], last["dry_run"]) == ("COMPLETED", "manual", True)
    retention = by_name["signal-retention"]
    assert retention["handles"] == [] and retention["organisation_scoped"] is False
    assert retention["enabled"] == {"config": True} and retention["last_sweep"] is None

    table = await run(env, "reactors", "list", "--app", "signals_app:app")
    assert table.returncode == 0, table.stderr
    assert "order_paid" in table.stdout and "signal-retention" in table.stdout
    assert "org-1, org-2" in table.stdout and "COMPLETED (dry run)" in table.stdout
    bare = as_json(await run(db_env, "reactors", "list", "--json"))
    assert [r["name"] for r in bare] == ["signal-retention"]  # no --app: the framework's own

    for command in ("enable", "disable"):
        refused = failed(await run(db_env, "reactors", command, "order_paid"))
        assert f"reactors {command} changes a runtime override" in refused
        assert "lives in the memory of the running `tickwork serve` process" in refused
        assert "--url" in refused and "TICKWORK_API_URL" in refused
    no_token = failed(
        await run(db_env, "reactors", "disable", "order_paid", "--url", "http://127.0.0.1:9")
    )
    assert "--url needs --token" in no_token


@pytest.fixture
def served(db_env: dict[str, str], clean: None) -> Iterator[tuple[str, str]]:
    """A ``tickwork serve --roles api,signals`` of signals_app on the test schema: its URL
    and an ADMIN's access token."""
    env = with_app_path(db_env) | {
        "TICKWORK_AUTH__ADMIN_EMAIL": ADMIN["email"],
        "TICKWORK_AUTH__ADMIN_PASSWORD": ADMIN["password"],
    }
    port = free_port()
    process = subprocess.Popen(
        [
            *(sys.executable, "-m", "tickwork", "serve", "--app", "signals_app:app"),
            *("--roles", "api,signals", "--port", str(port), "--log-level", "ERROR"),
        ],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        assert process.stdout is not None
        printed = []
        for line in process.stdout:
            printed.append(line)
            if line.startswith("roles:"):
                break
        assert printed and printed[-1].startswith("roles:"), "".join(printed)
        yield url, login(url, process)
    finally:
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
            process.wait(timeout=START_GUARD)


def login(url: str, process: subprocess.Popen[str]) -> str:
    """An access token, once the API accepts connections (it starts after the roles line)."""
    deadline = time.monotonic() + START_GUARD
    with httpx.Client(base_url=url, timeout=30) as client:
        while True:
            try:
                answer = client.post("/api/auth/login", json=ADMIN)
                break
            except httpx.ConnectError:
                if process.poll() is not None or time.monotonic() > deadline:
                    raise
                time.sleep(0.05)  # polling for the listening socket, not a synchronisation
        assert answer.status_code == 200, answer.text
        token: str = answer.json()["access_token"]
        return token


async def test_reactors_runtime_switch_through_a_running_serve(
    db_env: dict[str, str], served: tuple[str, str]
) -> None:
    url, token = served
    env = db_env | {"TICKWORK_API_URL": url, "TICKWORK_API_TOKEN": token}

    def order_paid(listed: list[dict[str, Any]]) -> dict[str, Any]:
        [found] = [r for r in listed if r["name"] == "order_paid"]
        return found

    before = order_paid(as_json(await run(env, "reactors", "list", "--json")))
    assert before["enabled"] == {"config": False, "override": None, "effective": False}

    enabled = await run(env, "reactors", "enable", "order_paid")
    assert enabled.returncode == 0, enabled.stderr
    assert "order_paid is enabled" in enabled.stdout and token not in enabled.stdout
    after = order_paid(as_json(await run(env, "reactors", "list", "--json")))
    assert after["enabled"] == {"config": False, "override": True, "effective": True}
    table = await run(env, "reactors", "list")
    assert table.returncode == 0, table.stderr
    assert "yes (override; config: no)" in table.stdout and token not in table.stdout

    flags = ("--url", url, "--token", token)
    disabled = await run(db_env, "reactors", "disable", "order_paid", *flags)
    assert disabled.returncode == 0, disabled.stderr
    after = order_paid(as_json(await run(env, "reactors", "list", "--json")))
    assert after["enabled"] == {"config": False, "override": False, "effective": False}
    cleared = await run(env, "reactors", "enable", "order_paid", "--clear")
    assert cleared.returncode == 0, cleared.stderr
    after = order_paid(as_json(await run(env, "reactors", "list", "--json")))
    assert after["enabled"] == {"config": False, "override": None, "effective": False}

    unknown = failed(await run(env, "reactors", "disable", "no_such_reactor"))
    assert "reactor 'no_such_reactor' does not exist" in unknown
    forged = failed(await run(env | {"TICKWORK_API_TOKEN": "not-a-token"}, "reactors", "list"))
    assert "not-a-token" not in forged
    for done in (unknown, forged):
        assert token not in done
