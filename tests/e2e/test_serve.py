"""``tickwork serve`` as a user runs it: a real process on the embedded PostgreSQL, driven
over HTTP, stopped with SIGTERM."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from .support import free_port

pytestmark = pytest.mark.e2e

E2E_DIR = Path(__file__).parent
START_GUARD = 180.0  # not a timing assertion: only stops a broken start from hanging the run


def start_serve(env: dict[str, str], cwd: Path) -> tuple[subprocess.Popen[str], str]:
    port = free_port()
    process = subprocess.Popen(
        [sys.executable, "-m", "tickwork", "serve", "--app", "serve_app:app", "--port", str(port)],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        cwd=cwd,
    )
    return process, f"http://127.0.0.1:{port}"


def read_until_roles(process: subprocess.Popen[str]) -> str:
    assert process.stdout is not None
    lines = []
    deadline = time.monotonic() + START_GUARD
    while time.monotonic() < deadline:
        line = process.stdout.readline()
        if not line:
            break
        lines.append(line)
        if line.startswith("roles:"):
            break
    return "".join(lines)


@pytest.fixture
def serve(
    tmp_path: Path, embedded_home: Path
) -> Iterator[tuple[subprocess.Popen[str], str, list[str]]]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("TICKWORK_")}
    env["TICKWORK_DATA_DIR"] = str(embedded_home / "pgdata")  # no URL: the embedded server
    env["TICKWORK_AUTH__ADMIN_EMAIL"] = "root@example.com"
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(E2E_DIR), env.get("PYTHONPATH")) if p)
    process, url = start_serve(env, tmp_path)
    try:
        yield process, url, read_until_roles(process).splitlines(keepends=True)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()


def test_serve_end_to_end(serve: tuple[subprocess.Popen[str], str, list[str]]) -> None:
    process, url, lines = serve
    printed = "".join(lines)
    assert "created the first administrator: root@example.com" in printed, printed
    found = re.search(r"password \(shown once.*\): (\S+)", printed)
    assert found, printed
    password = found.group(1)
    assert f"serving on {url}" in printed

    with httpx.Client(base_url=url, timeout=30) as client:
        assert client.get("/healthz").json() == {"status": "ok"}
        assert client.get("/readyz").json()["status"] == "ready"
        login = client.post(
            "/api/auth/login", json={"email": "root@example.com", "password": password}
        )
        assert login.status_code == 200, login.text
        auth = {"Authorization": f"Bearer {login.json()['access_token']}"}
        made = client.post(
            "/api/jobs", json={"task": "e2e.greet", "args": {"name": "ada"}}, headers=auth
        )
        assert made.status_code == 201, made.text
        job_id = made.json()["id"]
        # The executor in the same process picks it up (LISTEN/NOTIFY); poll the API for it.
        state = None
        deadline = time.monotonic() + START_GUARD
        while time.monotonic() < deadline:
            job = client.get(f"/api/jobs/{job_id}", headers=auth).json()
            state = job["state"]
            if state == "SUCCEEDED":
                break
            time.sleep(0.05)
        assert state == "SUCCEEDED"
        assert job["result"] == "hello ada"
        assert job["executions"][0]["state"] == "SUCCEEDED"
        workers = client.get("/api/workers", headers=auth).json()
        # the app's executor, and one per runtime found (HTTP, and every script runtime this
        # machine has), each on its runtime's queue alone
        queues = sorted(w["queues"] for w in workers)
        assert queues[0] == ["default"] and queues[1] == ["http"], queues
        assert queues[2] == ["scripts-bash"] and all(len(q) == 1 for q in queues), queues
        # one lease manager for the process: every singleton it runs, under one holder id
        # (the executor took its first job after the leases' first election)
        leaders = client.get("/api/leaders", headers=auth).json()
        assert {lease["name"] for lease in leaders} == {
            "SCHEDULER",
            "RETENTION",
            "SIGNAL_MASTER",
            "SWEEP_MASTER",
        }
        assert len({lease["holder"] for lease in leaders}) == 1, leaders

    process.send_signal(signal.SIGTERM)
    assert process.wait(timeout=START_GUARD) == 0
    assert process.stdout is not None
    rest = process.stdout.read()
    assert "Traceback" not in rest, rest
    assert password not in rest  # printed once, at the bootstrap only


def test_two_serve_processes_share_one_database(
    db_env: dict[str, str], tmp_path: Path, clean: None
) -> None:
    """Started at once on one database: one first administrator, both answer, leases decide
    who runs the singletons, both stop cleanly."""
    password = "correct horse battery staple"
    env = dict(
        db_env,
        TICKWORK_ADMIN_EMAIL="twice@example.com",
        TICKWORK_ADMIN_PASSWORD=password,
        PYTHONPATH=os.pathsep.join(p for p in (str(E2E_DIR), db_env.get("PYTHONPATH")) if p),
    )
    started = [start_serve(env, tmp_path) for _ in range(2)]
    try:
        printed = [read_until_roles(process) for process, _ in started]
        assert sum("created the first administrator" in p for p in printed) == 1, printed
        assert all(password not in p for p in printed)  # chosen, not generated: never printed
        for (_, url), text in zip(started, printed, strict=True):
            assert f"serving on {url}" in text
            with httpx.Client(base_url=url, timeout=30) as client:
                login = client.post(
                    "/api/auth/login", json={"email": "twice@example.com", "password": password}
                )
                assert login.status_code == 200, login.text
                auth = {"Authorization": f"Bearer {login.json()['access_token']}"}
                users = client.get("/api/users", headers=auth).json()
                assert [u["email"] for u in users] == ["twice@example.com"]
        for process, _ in started:
            process.send_signal(signal.SIGTERM)
        for process, _ in started:
            assert process.wait(timeout=START_GUARD) == 0
    finally:
        for process, _ in started:
            if process.poll() is None:
                process.kill()
                process.wait()


@pytest.mark.parametrize("trusted", [False, True])
def test_forwarded_headers_are_believed_only_from_trusted_proxies(
    db_env: dict[str, str], tmp_path: Path, clean: None, trusted: bool
) -> None:
    """Wrong passwords for ever new emails from one client, each claiming another address in
    X-Forwarded-For: counted by the real address (and throttled) unless the client is a
    configured proxy."""
    env = dict(
        db_env,
        TICKWORK_ADMIN_EMAIL="root@example.com",
        TICKWORK_ADMIN_PASSWORD="correct horse battery staple",
        TICKWORK_AUTH__LOGIN_MAX_PER_ADDRESS="3",
        PYTHONPATH=os.pathsep.join(p for p in (str(E2E_DIR), db_env.get("PYTHONPATH")) if p),
    )
    if trusted:
        env["TICKWORK_API__TRUSTED_PROXIES"] = '["127.0.0.1"]'
    process, url = start_serve(env, tmp_path)
    try:
        assert "serving on" in read_until_roles(process)
        statuses = []
        with httpx.Client(base_url=url, timeout=30) as client:
            for n in range(6):
                answer = client.post(
                    "/api/auth/login",
                    json={"email": f"guess{n}@example.com", "password": "wrong password"},
                    headers={"X-Forwarded-For": f"198.51.100.{n + 1}"},
                )
                statuses.append(answer.status_code)
        if trusted:
            assert statuses == [401] * 6  # six addresses, one guess each
        else:
            assert statuses == [401, 401, 401, 429, 429, 429]
    finally:
        process.kill()
        process.wait()
