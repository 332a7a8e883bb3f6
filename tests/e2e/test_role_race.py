"""A demoted ADMIN racing its own demotion, against a real ``tickwork serve``: eight threads
send the ADMIN's own ``PATCH /api/users/{id}`` setting its role back (or enabling itself)
while another ADMIN, or the command line, demotes (disables) it. Before the change re-checked
its actor inside its transaction, the demoted user came out ADMIN in about half the trials;
it must come out demoted in every one (docs/security.md, "Who may change users")."""

from __future__ import annotations

import asyncio
import os
import threading
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tickwork import App
from tickwork.auth import AuthService, Role

from ..figures import record, scale
from .support import HANG_GUARD, serving, tickwork

pytestmark = pytest.mark.e2e

E2E_DIR = Path(__file__).parent
PASSWORD = "correct horse battery staple"
RACER = "ada@example.com"  # the ADMIN demoted in each trial
DEMOTER = "bob@example.com"  # the ADMIN demoting her
THREADS = 8


@pytest.fixture
def served(db_env: dict[str, str], app: App, tmp_path: Path) -> Iterator[tuple[str, int]]:
    """An API-only serve on the test schema with two ADMINs; its URL and the racer's id."""

    async def users() -> int:
        auth = AuthService(await app.db.async_pool(), app.db.store, app.settings.auth)
        await auth.start()
        await auth.create_user(DEMOTER, PASSWORD, Role.ADMIN)
        return (await auth.create_user(RACER, PASSWORD, Role.ADMIN)).id

    app.migrate()
    racer_id = asyncio.run(users())
    env = db_env | {
        "PYTHONPATH": os.pathsep.join(p for p in (str(E2E_DIR), os.environ.get("PYTHONPATH")) if p),
        # the login throttle would refuse a login per trial from one address
        "TICKWORK_AUTH__LOGIN_MAX_PER_ACCOUNT": "1000",
        "TICKWORK_AUTH__LOGIN_MAX_PER_ADDRESS": "1000",
    }
    with serving(env, tmp_path, "--roles", "api", "--log-level", "ERROR") as (_, url, _):
        yield url, racer_id


def bearer(client: httpx.Client, email: str) -> dict[str, str]:
    login = client.post("/api/auth/login", json={"email": email, "password": PASSWORD})
    assert login.status_code == 200, login.text
    return {"Authorization": f"Bearer {login.json()['access_token']}"}


class Racers:
    """``THREADS`` threads sending the racer's own change until told to stop, each after at
    least one request that began once the demotion had been answered."""

    def __init__(self, url: str, path: str, body: dict[str, Any], auth: dict[str, str]) -> None:
        self.url, self.path, self.body, self.auth = url, path, body, auth
        self.codes: Counter[int] = Counter()
        self.lock = threading.Condition()
        self.sent = [0] * THREADS  # requests answered, per thread
        self.demoted = threading.Event()
        self.after = [False] * THREADS  # a request begun after the demotion was answered
        self.threads = [threading.Thread(target=self.race, args=(n,)) for n in range(THREADS)]

    def race(self, n: int) -> None:
        with httpx.Client(base_url=self.url, timeout=HANG_GUARD) as client:
            while True:
                late = self.demoted.is_set()
                answer = client.patch(self.path, json=self.body, headers=self.auth)
                with self.lock:
                    self.codes[answer.status_code] += 1
                    self.sent[n] += 1
                    self.after[n] = self.after[n] or late
                    self.lock.notify_all()
                    if self.after[n]:
                        return

    def __enter__(self) -> Racers:
        for thread in self.threads:
            thread.start()
        with self.lock:  # every thread in the race before the demotion is sent
            assert self.lock.wait_for(lambda: all(self.sent), HANG_GUARD), self.sent
        return self

    def __exit__(self, *exc: object) -> None:
        self.demoted.set()
        for thread in self.threads:
            thread.join(HANG_GUARD)
            assert not thread.is_alive()


def trials(
    url: str, racer_id: int, body: dict[str, Any], demote: Callable[[], None], won: str, n: int
) -> tuple[int, Counter[int]]:
    """``n`` trials: the racer restored (ADMIN, enabled), logged in, its threads racing
    ``demote``; how many times it came out with ``won`` true, and its requests' answers."""
    wins = 0
    codes: Counter[int] = Counter()
    path = f"/api/users/{racer_id}"
    with httpx.Client(base_url=url, timeout=HANG_GUARD) as client:
        demoter = bearer(client, DEMOTER)
        for _ in range(n):
            restored = client.patch(
                path, json={"role": "ADMIN", "disabled": False}, headers=demoter
            )
            assert restored.status_code == 200, restored.text
            with Racers(url, path, body, bearer(client, RACER)) as racers:
                demote()
            codes += racers.codes
            user = client.get("/api/users", headers=demoter).json()
            [racer] = [u for u in user if u["id"] == racer_id]
            wins += racer["role"] == "ADMIN" if won == "role" else not racer["disabled"]
    return wins, codes


def through_api(url: str, racer_id: int, body: dict[str, Any]) -> Callable[[], None]:
    def demote() -> None:
        with httpx.Client(base_url=url, timeout=HANG_GUARD) as client:
            answer = client.patch(
                f"/api/users/{racer_id}", json=body, headers=bearer(client, DEMOTER)
            )
            assert answer.status_code == 200, answer.text

    return demote


def test_a_demoted_admin_never_sets_its_role_back(served: tuple[str, int]) -> None:
    url, racer_id = served
    n = scale(20, 60)
    demote = through_api(url, racer_id, {"role": "OPERATOR"})
    wins, codes = trials(url, racer_id, {"role": "ADMIN"}, demote, "role", n)
    record("security", "role race", "self-promotions racing an ADMIN's demotion", n)
    record("security", "role race", "trials the demoted user came out ADMIN", wins)
    assert wins == 0, (wins, n, codes)
    assert set(codes) <= {200, 401, 403}, codes  # 200: while still ADMIN, a no-op


def test_a_disabled_admin_never_enables_itself(served: tuple[str, int]) -> None:
    url, racer_id = served
    n = scale(20, 60)
    demote = through_api(url, racer_id, {"disabled": True})
    wins, codes = trials(url, racer_id, {"disabled": False}, demote, "enabled", n)
    record("security", "role race", "self-enables racing an ADMIN's disable", n)
    record("security", "role race", "trials the disabled user came out enabled", wins)
    assert wins == 0, (wins, n, codes)
    assert set(codes) <= {200, 401, 403}, codes


def test_a_cli_demotion_is_never_undone(served: tuple[str, int], db_env: dict[str, str]) -> None:
    url, racer_id = served
    n = scale(10, 30)

    def demote() -> None:
        done = tickwork(db_env, "users", "set-role", RACER, "OPERATOR")
        assert done.returncode == 0, done.stdout + done.stderr

    wins, codes = trials(url, racer_id, {"role": "ADMIN"}, demote, "role", n)
    record("security", "role race", "self-promotions racing a command-line demotion", n)
    record("security", "role race", "trials the demoted user came out ADMIN (CLI)", wins)
    assert wins == 0, (wins, n, codes)
