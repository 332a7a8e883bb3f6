"""A second SIGTERM stops a process now: a worker or serve process told to stop while a
long job runs waits out the grace period after the first signal; a second one ends the
wait at once. The job goes back to PENDING (its attempt RELEASED, not counted) and the
process exits: an async handler is cancelled, a sync handler's thread is left behind (it
cannot be interrupted) and the process exits without it. Real processes, real signals."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest

from tickwork import App, ExecutionState, JobState

from ..figures import record
from .support import HANG_GUARD, free_port, tickwork, wait_for

pytestmark = pytest.mark.e2e

E2E_DIR = Path(__file__).resolve().parent
APP = "stop_now_app:app"
LONG_JOB = 60.0
"""Seconds the job would run: longer than the whole test may take."""
EXIT_GUARD = 15.0
"""Longest the process may take to exit after the second signal. Not a timing assertion (it
only stops a broken run); what it takes is a figure in docs/reliability.md."""

CHECK = "a second SIGTERM with a 60 s job in flight (grace 25 s)"

Conn = psycopg.Connection[tuple[Any, ...]]


class Process:
    """One ``tickwork`` process of the test, its output in a file."""

    def __init__(self, env: dict[str, str], cwd: Path, *args: str) -> None:
        self.log_path = cwd / "process.log"
        with self.log_path.open("wb") as out:
            self.popen = subprocess.Popen(
                [sys.executable, "-m", "tickwork", *args, "--app", APP, "--log-level", "INFO"],
                env=env,
                cwd=cwd,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
            )

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def wait_log(self, text: str, what: str) -> None:
        def seen() -> bool:
            if self.popen.poll() is not None:
                raise AssertionError(f"the process exited while waiting for {what}\n{self.log()}")
            return text in self.log()

        wait_for(seen, what)

    def kill(self) -> None:
        if self.popen.poll() is None:
            self.popen.kill()
        self.popen.wait(HANG_GUARD)


@pytest.fixture
def env(db_env: dict[str, str]) -> dict[str, str]:
    return db_env | {
        "PYTHONPATH": os.pathsep.join(p for p in (str(E2E_DIR), db_env.get("PYTHONPATH")) if p),
        "TICKWORK_ADMIN_EMAIL": "root@example.com",
        "TICKWORK_ADMIN_PASSWORD": "correct horse battery staple",
        # the default grace period, 25 s: far longer than the exit guard
        "TICKWORK_WORKER__SHUTDOWN_GRACE": "25",
    }


@pytest.fixture
def tasks(app: App) -> App:
    """``app`` with stubs of the stop-now app's tasks, to enqueue them."""

    @app.task(name="e2e.sleep_sync")
    def sleep_sync(seconds: float) -> None:
        raise AssertionError("runs only in the tested process")

    @app.task(name="e2e.sleep_async")
    async def sleep_async(seconds: float) -> None:
        raise AssertionError("runs only in the tested process")

    return app


@pytest.fixture
def started(env: dict[str, str], tmp_path: Path) -> Iterator[list[Process]]:
    procs: list[Process] = []
    try:
        yield procs
    finally:
        for proc in procs:
            proc.kill()


def running(sql: Conn, job_id: int) -> bool:
    row = sql.execute(
        "SELECT count(*) FROM executions WHERE job_id = %s AND state = 'RUNNING'", [job_id]
    ).fetchone()
    return row is not None and row[0] == 1


def stop_twice(proc: Process) -> float:
    """SIGTERM, then (once the drain waits out its grace period) SIGTERM again; the exit
    code is checked and the seconds from the second signal to the exit returned."""
    proc.popen.send_signal(signal.SIGTERM)
    proc.wait_log("waiting for in-flight attempts", "the drain to wait for the job")
    proc.popen.send_signal(signal.SIGTERM)
    second = time.monotonic()
    try:
        code = proc.popen.wait(EXIT_GUARD)
    except subprocess.TimeoutExpired:
        raise AssertionError(
            f"no exit within {EXIT_GUARD}s of the second SIGTERM\n{proc.log()}"
        ) from None
    took = time.monotonic() - second
    assert code == 0, proc.log()
    print(f"exit {took:.2f}s after the second SIGTERM")
    return took


def assert_released(tasks: App, job_id: int, log: str) -> None:
    job = tasks.get_job(job_id)
    assert (job.state, job.attempts) == (JobState.PENDING, 0), log
    assert [e.state for e in tasks.list_executions(job_id)] == [ExecutionState.RELEASED], log
    assert "job.released" in [e.event_type for e in tasks.audit_events(job_id)]
    assert "grace period skipped in_flight=1" in log, log
    released = "released in-flight attempts at shutdown released=1 in_flight=1 grace_skipped=True"
    assert released in log, log


@pytest.mark.parametrize("task", ["e2e.sleep_async", "e2e.sleep_sync"], ids=["async", "sync"])
@pytest.mark.parametrize("command", ["worker", "serve"])
def test_a_second_sigterm_releases_the_running_job_and_exits_now(
    env: dict[str, str],
    tasks: App,
    sql: Conn,
    tmp_path: Path,
    started: list[Process],
    command: str,
    task: str,
) -> None:
    args = ["worker"] if command == "worker" else ["serve", "--port", str(free_port())]
    proc = Process(env, tmp_path, *args)
    started.append(proc)
    if command == "serve":
        proc.wait_log("roles: ", "serve to be ready")
    job = tasks.enqueue(task, {"seconds": LONG_JOB})
    wait_for(lambda: running(sql, job.id), "the job to be RUNNING")

    took = stop_twice(proc)

    log = proc.log()
    assert_released(tasks, job.id, log)
    sync_left = "exiting with sync handlers still running handlers=1" in log
    assert sync_left is (task == "e2e.sleep_sync"), log
    kind = "sync" if task == "e2e.sleep_sync" else "async"
    record("reliability", CHECK, f"seconds to exit: {command}, {kind} handler", round(took, 2))


def test_a_second_sigterm_releases_a_script_run_in_serves_runtime_executor(
    env: dict[str, str],
    tasks: App,
    sql: Conn,
    tmp_path: Path,
    started: list[Process],
) -> None:
    given = tmp_path / "long.json"
    given.write_text(
        json.dumps(
            {
                "name": "long",
                "kind": "script",
                "script": {"language": "bash", "source": f"sleep {LONG_JOB:.0f}\n"},
            }
        )
    )
    created = tickwork(env, "definitions", "create", str(given))
    assert created.returncode == 0, created.stderr
    runtime_env = env | {"TICKWORK_RUNTIMES__SERVE": '["bash"]'}
    proc = Process(runtime_env, tmp_path, "serve", "--port", str(free_port()))
    started.append(proc)
    proc.wait_log("runtimes: bash", "serve to run the bash executor")
    ran = tickwork(env, "definitions", "run", "long")
    assert ran.returncode == 0, ran.stderr
    job_id = int(ran.stdout.split()[2])
    wait_for(lambda: running(sql, job_id), "the script run to be RUNNING")

    took = stop_twice(proc)

    assert_released(tasks, job_id, proc.log())
    record("reliability", CHECK, "seconds to exit: serve, bash script run", round(took, 2))
