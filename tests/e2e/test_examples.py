"""The projects in examples/ run as their READMEs say, against the test database.

Each test works on a copy of its example's folder (as a reader would copy it), with
``TICKWORK_DATABASE_URL`` and a ``TICKWORK_SCHEMA`` of its own (dropped at the end), this
interpreter's ``bin/`` first on ``PATH``. To add an example: a folder under examples/ with a
README.md, and a test here that takes ``example("name")`` and runs what its README runs
(``run`` for a command that ends, ``started`` for a server or a worker) and asserts what
came of it.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import secrets
import shutil
import signal
import subprocess
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import psycopg
import pytest

from tickwork import App, JobState

pytestmark = pytest.mark.e2e

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"
HANG_GUARD = 120.0
"""Not a timing assertion: only stops a broken example from hanging the run."""


@dataclass(frozen=True)
class Example:
    """A copy of an example, and the environment its commands run in."""

    directory: Path
    env: dict[str, str]
    database_url: str
    schema: str

    def run(self, *argv: str, env: dict[str, str] | None = None) -> str:
        """Run a command in the example's folder; it must exit 0. Its output."""
        done = subprocess.run(
            argv,
            cwd=self.directory,
            env=self.env | (env or {}),
            capture_output=True,
            text=True,
            timeout=HANG_GUARD,
            check=False,
        )
        assert done.returncode == 0, f"{argv} exited {done.returncode}:\n{done.stdout}{done.stderr}"
        return done.stdout

    @contextlib.contextmanager
    def started(
        self, *argv: str, ready: str, exits: tuple[int, ...] = (0,)
    ) -> Iterator[re.Match[str]]:
        """A long-running command, until a line of its output matches ``ready`` (the match);
        then SIGTERM, after which it must exit with one of ``exits``."""
        process = subprocess.Popen(
            argv,
            cwd=self.directory,
            env=self.env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        assert process.stdout is not None
        seen: list[str] = []
        try:
            while line := process.stdout.readline():
                seen.append(line)
                if found := re.search(ready, line):
                    break
            else:
                raise AssertionError(f"{argv} ended before it was ready:\n{''.join(seen)}")
            yield found
            process.send_signal(signal.SIGTERM)
            rest, _ = process.communicate(timeout=HANG_GUARD)
            assert process.returncode in exits, f"{argv} exited {process.returncode}:\n{rest}"
        finally:
            if process.poll() is None:
                process.kill()
                process.wait(HANG_GUARD)

    def app(self) -> App:
        """An App on the example's database and schema, to look at what it did."""
        return App(database_url=self.database_url, schema=self.schema)


@pytest.fixture
def example(database_url: str, tmp_path: Path) -> Iterator[Callable[[str], Example]]:
    schemas: list[str] = []

    def copy(name: str) -> Example:
        directory = tmp_path / name
        shutil.copytree(EXAMPLES / name, directory)
        schema = f"tw_example_{os.getpid()}_{secrets.token_hex(3)}"
        schemas.append(schema)
        env = {k: v for k, v in os.environ.items() if not k.startswith(("TICKWORK_", "PG"))}
        env |= {
            "PATH": f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}",
            "PYTHONDONTWRITEBYTECODE": "1",
            "PYTHONUNBUFFERED": "1",
            "TICKWORK_DATABASE_URL": database_url,
            "TICKWORK_SCHEMA": schema,
        }
        return Example(directory, env, database_url, schema)

    yield copy
    with psycopg.connect(database_url, autocommit=True) as conn:
        for schema in schemas:
            conn.execute(f"DROP SCHEMA IF EXISTS {schema} CASCADE")


def readme_output(name: str) -> str:
    """The output an example's README shows (its ```text block)."""
    readme = (EXAMPLES / name / "README.md").read_text(encoding="utf-8")
    found = re.search(r"```text\n(.*?)```", readme, re.S)
    assert found, f"examples/{name}/README.md shows no output"
    return found[1]


def test_plain_prints_what_its_readme_shows(example: Callable[[str], Example]) -> None:
    plain = example("plain")
    printed = plain.run(sys.executable, "main.py")
    assert printed == readme_output("plain")
    jobs = json.loads(plain.run("tickwork", "jobs", "list", "--json"))["items"]
    assert sorted(j["task"] for j in jobs) == [
        "tasks.charge",
        "tasks.charge",
        "tasks.send_receipt",
        "tasks.send_receipt",
    ]  # the rolled-back order's receipt never existed


def test_fastapi_own_tests_pass(example: Callable[[str], Example]) -> None:
    shop = example("fastapi")
    printed = shop.run(
        sys.executable,
        "-m",
        "pytest",
        "-q",
        "-p",
        "no:cacheprovider",
        env={"TICKWORK_TEST_DATABASE_URL": shop.database_url},
    )
    assert "2 passed" in printed, printed


def test_fastapi_under_uvicorn_with_a_worker(example: Callable[[str], Example]) -> None:
    shop = example("fastapi")
    shop.run("tickwork", "migrate", "--app", "shop:app")
    running = r"Uvicorn running on (http://\S+)"
    # uvicorn shuts down cleanly on SIGTERM, then ends by the signal it caught (-15)
    uvicorn = ("uvicorn", "shop:api", "--port", "0")
    with shop.started(*uvicorn, ready=running, exits=(0, -signal.SIGTERM)) as served:
        url = served[1]
        placed = httpx.post(f"{url}/orders/7", timeout=HANG_GUARD)
        assert placed.status_code == 201, placed.text
        job_id = placed.json()["receipt_job"]
        refused = httpx.post(f"{url}/orders/4242", timeout=HANG_GUARD)
        assert refused.status_code == 404
        worker = ("tickwork", "worker", "--app", "shop:app")
        with shop.started(*worker, ready="worker started"), shop.app() as app:
            done = app.wait(job_id, timeout=HANG_GUARD)
        assert done.state is JobState.SUCCEEDED
        assert httpx.get(f"{url}/jobs/{job_id}", timeout=HANG_GUARD).json() == {
            "id": job_id,
            "state": "SUCCEEDED",
            "result": "receipt for order 7",
        }
    jobs = json.loads(shop.run("tickwork", "jobs", "list", "--json"))["items"]
    assert [j["id"] for j in jobs] == [job_id]  # the refused order's receipt was rolled back
