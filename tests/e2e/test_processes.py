"""End to end: real worker processes (``python -m tickwork worker``) against the real database.

Each test starts worker processes that load ``worker_app:app`` (tests/e2e/worker_app.py), feeds
them jobs through the test's own App (which registers stubs under the same task names; the
handlers themselves only ever run in the workers) and then checks what the database says
happened: jobs, executions, workers, audit events, and the ``runs`` table the handlers write.

Synchronisation is by polling the database (or a worker's log) for a condition with
:func:`wait_until`; nothing waits on a fixed sleep and nothing asserts on durations.
"""

from __future__ import annotations

import ctypes
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar
from uuid import UUID

import psycopg
import pytest

from tickwork import App, ExecutionState, JobContext, JobSpec, JobState
from tickwork.queue.watchdog import Watchdog

from ..figures import record, scale
from .support import worker_command

pytestmark = pytest.mark.e2e

Conn = psycopg.Connection[tuple[Any, ...]]
T = TypeVar("T")

E2E_DIR = Path(__file__).resolve().parent
HANG_GUARD = 60.0
"""Longest any single wait may take. Not a timing assertion: it only stops a broken run."""
EXIT_GUARD = 20.0
"""Longest a worker may take to exit after SIGTERM (well below the 30 s of the long jobs)."""


# -- waiting --------------------------------------------------------------------------------


def wait_until(
    predicate: Callable[[], T | None],
    *,
    what: str,
    timeout: float = HANG_GUARD,
    interval: float = 0.05,
    guard: Callable[[], None] | None = None,
    detail: Callable[[], str] | None = None,
) -> T:
    """Poll ``predicate`` until it returns something truthy, and return that.

    ``guard`` runs before each poll and may raise (e.g. when a worker died unexpectedly);
    ``detail`` adds context to the timeout message.
    """
    deadline = time.monotonic() + timeout
    while True:
        if guard is not None:
            guard()
        value = predicate()
        if value:
            return value
        if time.monotonic() >= deadline:
            extra = f"\n{detail()}" if detail is not None else ""
            raise AssertionError(
                f"timed out after {timeout}s waiting until {what} (last value: {value!r}){extra}"
            )
        time.sleep(interval)


def scalar(sql: Conn, query: str, params: tuple[Any, ...] | list[Any] = ()) -> Any:
    row = sql.execute(query, params).fetchone()
    assert row is not None, f"no row from {query!r}"
    return row[0]


def rows(sql: Conn, query: str, params: tuple[Any, ...] | list[Any] = ()) -> list[tuple[Any, ...]]:
    return sql.execute(query, params).fetchall()


def job_states(sql: Conn) -> dict[str, int]:
    return dict(rows(sql, "SELECT state, count(*) FROM jobs GROUP BY state ORDER BY state"))


# -- worker processes -----------------------------------------------------------------------


PR_SET_PDEATHSIG = 1
_prctl = ctypes.CDLL(None, use_errno=True).prctl if sys.platform == "linux" else None
"""Resolved here, not in the child: between fork and exec only the call itself runs."""


def _die_with_parent() -> None:
    """In the child before exec: SIGKILL it if the test process dies, so none is left over."""
    if _prctl is not None:
        _prctl(PR_SET_PDEATHSIG, signal.SIGKILL)


@dataclass
class WorkerProcess:
    """One ``tickwork worker`` process and the file its output goes to."""

    name: str
    popen: subprocess.Popen[bytes]
    log_path: Path
    app_name: str
    """``application_name`` of its database sessions (set through PGAPPNAME)."""
    worker_id: UUID | None = None

    @property
    def pid(self) -> int:
        return self.popen.pid

    def alive(self) -> bool:
        return self.popen.poll() is None

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def tail(self, lines: int = 40) -> str:
        text = self.log().splitlines()[-lines:]
        return f"--- {self.name} (pid {self.pid}) {self.log_path} ---\n" + "\n".join(text)


@dataclass
class Fleet:
    """Starts worker processes and makes sure none outlives the test."""

    env: dict[str, str]
    schema: str
    sql: Conn
    log_dir: Path
    procs: list[WorkerProcess] = field(default_factory=list)

    def start(
        self,
        *,
        concurrency: int = 4,
        lease_ttl: float = 5.0,
        lease_renew_interval: float = 1.0,
        watchdog_interval: float = 1.0,
        shutdown_grace: float = 5.0,
        poll_interval: float = 0.2,
    ) -> WorkerProcess:
        name = f"w{len(self.procs) + 1}"
        app_name = f"e2e-{self.schema}-{name}"
        env = dict(self.env)
        env["PYTHONPATH"] = os.pathsep.join(
            p for p in (str(E2E_DIR), self.env.get("PYTHONPATH", "")) if p
        )
        env["PGAPPNAME"] = app_name
        env["TICKWORK_WORKER__LEASE_TTL"] = str(lease_ttl)
        env["TICKWORK_WORKER__LEASE_RENEW_INTERVAL"] = str(lease_renew_interval)
        env["TICKWORK_WORKER__WATCHDOG_INTERVAL"] = str(watchdog_interval)
        env["TICKWORK_WORKER__SHUTDOWN_GRACE"] = str(shutdown_grace)
        env["TICKWORK_WORKER__POLL_INTERVAL"] = str(poll_interval)
        command = worker_command(concurrency)
        log_path = self.log_dir / f"{name}.log"
        with log_path.open("wb") as log:
            popen = subprocess.Popen(
                command,
                env=env,
                cwd=self.log_dir,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                preexec_fn=_die_with_parent if _prctl is not None else None,
            )
        proc = WorkerProcess(name, popen, log_path, app_name)
        self.procs.append(proc)
        return proc

    def lookup_id(self, proc: WorkerProcess) -> UUID | None:
        """The worker id ``proc`` registered under, or None if it has not registered yet."""
        if proc.worker_id is None:
            found = self.sql.execute(
                "SELECT id FROM workers WHERE pid = %s ORDER BY started_at DESC LIMIT 1",
                [proc.pid],
            ).fetchone()
            if found is not None:
                proc.worker_id = found[0]
        return proc.worker_id

    def worker_id(self, proc: WorkerProcess) -> UUID:
        """Wait until ``proc`` has registered in the workers table; its id."""
        return wait_until(
            lambda: self.lookup_id(proc),
            what=f"worker {proc.name} (pid {proc.pid}) is registered",
            guard=lambda: self.assert_alive(proc),
        )

    def assert_alive(self, *procs: WorkerProcess) -> None:
        for proc in procs:
            code = proc.popen.poll()
            if code is not None:
                raise AssertionError(
                    f"worker {proc.name} exited unexpectedly with code {code}\n{proc.tail()}"
                )

    def kill(self, proc: WorkerProcess) -> None:
        """SIGKILL ``proc`` and reap it."""
        proc.popen.send_signal(signal.SIGKILL)
        proc.popen.wait(timeout=HANG_GUARD)

    def terminate(self, proc: WorkerProcess) -> int:
        """SIGTERM ``proc``, wait for it to exit; its exit code."""
        proc.popen.send_signal(signal.SIGTERM)
        try:
            return proc.popen.wait(timeout=EXIT_GUARD)
        except subprocess.TimeoutExpired:
            raise AssertionError(
                f"worker {proc.name} did not exit within {EXIT_GUARD}s of SIGTERM\n{proc.tail()}"
            ) from None

    def logs(self) -> str:
        return "\n".join(proc.tail() for proc in self.procs)

    def cleanup(self) -> None:
        for proc in self.procs:
            if proc.popen.poll() is None:
                try:
                    proc.popen.send_signal(signal.SIGCONT)  # in case a test stopped it
                    proc.popen.kill()
                except ProcessLookupError:
                    pass
            try:
                proc.popen.wait(timeout=HANG_GUARD)
            except subprocess.TimeoutExpired:
                print(f"worker {proc.name} (pid {proc.pid}) could not be reaped")
            print(
                f"worker {proc.name}: pid {proc.pid}, exit {proc.popen.returncode}, "
                f"log {proc.log_path}"
            )


# -- fixtures -------------------------------------------------------------------------------


@pytest.fixture
def fleet(db_env: dict[str, str], schema: str, sql: Conn, tmp_path: Path) -> Iterator[Fleet]:
    workers = Fleet(env=db_env, schema=schema, sql=sql, log_dir=tmp_path)
    try:
        yield workers
    finally:
        workers.cleanup()


@pytest.fixture
def runs(sql: Conn, schema: str) -> Conn:
    """The table the worker app's handlers record each run in, created and emptied."""
    sql.execute(
        f"CREATE TABLE IF NOT EXISTS {schema}.runs (id bigserial primary key, job_id bigint,"
        " execution_id bigint, pid int, label text, at timestamptz default clock_timestamp())"
    )
    sql.execute(f"TRUNCATE {schema}.runs RESTART IDENTITY")
    return sql


@pytest.fixture
def tasks(app: App) -> App:
    """``app`` with stubs registered under the worker app's task names, to enqueue them.

    The real handlers are in worker_app.py and run only in the worker processes; these carry
    the same names, signatures and options (max_attempts) so the enqueued rows match.
    """

    def not_here() -> None:
        raise AssertionError("e2e handlers run only in the worker processes")

    @app.task(name="e2e.work", max_attempts=50, pass_context=True)
    def work(ctx: JobContext, seconds: float = 0.0) -> int:
        not_here()
        return 0

    @app.task(name="e2e.hold", max_attempts=5, pass_context=True)
    def hold(ctx: JobContext, marker: str) -> int:
        not_here()
        return 0

    @app.task(name="e2e.nap", pass_context=True)
    async def nap(ctx: JobContext, seconds: float) -> int:
        not_here()
        return 0

    return app


# -- 1. exclusivity -------------------------------------------------------------------------

EXCLUSIVITY_JOBS = scale(2000, 20000)


def test_many_workers_run_every_job_exactly_once(tasks: App, runs: Conn, fleet: Fleet) -> None:
    sql = runs
    procs = [fleet.start(concurrency=4) for _ in range(3)]
    ids = {fleet.worker_id(proc) for proc in procs}

    jobs = tasks.enqueue_many(
        [JobSpec(task="e2e.work", args={"seconds": 0.0}) for _ in range(EXCLUSIVITY_JOBS)]
    )
    assert len({job.id for job in jobs}) == EXCLUSIVITY_JOBS

    wait_until(
        lambda: job_states(sql).get("SUCCEEDED") == EXCLUSIVITY_JOBS,
        what=f"all {EXCLUSIVITY_JOBS} jobs are SUCCEEDED",
        timeout=90,
        interval=0.2,
        guard=lambda: fleet.assert_alive(*procs),
        detail=lambda: f"job states: {job_states(sql)}\n{fleet.logs()}",
    )

    not_once = rows(
        sql,
        "SELECT j.id, count(e.id) FILTER (WHERE e.state = 'SUCCEEDED')"
        " FROM jobs j LEFT JOIN executions e ON e.job_id = j.id"
        " GROUP BY j.id HAVING count(e.id) FILTER (WHERE e.state = 'SUCCEEDED') <> 1",
    )
    assert not_once == [], f"jobs without exactly one SUCCEEDED execution: {not_once[:20]}"

    ran = rows(
        sql,
        "SELECT j.id, count(r.id) FROM jobs j LEFT JOIN runs r ON r.job_id = j.id"
        " GROUP BY j.id HAVING count(r.id) <> 1",
    )
    assert ran == [], f"jobs whose handler did not run exactly once (job, runs): {ran[:20]}"

    # The single run was the succeeding attempt, in the process of the worker that claimed it,
    # and that process's pid is the job's result.
    mismatched = rows(
        sql,
        "SELECT j.id, e.id, r.execution_id, w.pid, r.pid, j.result"
        " FROM jobs j"
        " JOIN executions e ON e.job_id = j.id AND e.state = 'SUCCEEDED'"
        " JOIN workers w ON w.id = e.worker_id"
        " JOIN runs r ON r.job_id = j.id"
        " WHERE r.execution_id <> e.id OR r.pid <> w.pid OR j.result <> to_jsonb(w.pid)",
    )
    assert mismatched == [], f"runs not matching their execution's worker: {mismatched[:20]}"

    overlapping = rows(
        sql,
        "SELECT a.job_id, a.id, b.id FROM executions a"
        " JOIN executions b ON b.job_id = a.job_id AND a.id < b.id"
        " WHERE tstzrange(a.started_at, coalesce(a.finished_at, 'infinity'), '[]')"
        "    && tstzrange(b.started_at, coalesce(b.finished_at, 'infinity'), '[]')",
    )
    assert overlapping == [], f"jobs with overlapping executions: {overlapping[:20]}"

    record("reliability", "3 workers share a backlog", "jobs", EXCLUSIVITY_JOBS)
    record("reliability", "3 workers share a backlog", "handler runs more than once", 0)
    record("reliability", "3 workers share a backlog", "overlapping attempts", 0)
    used = {row[0] for row in rows(sql, "SELECT DISTINCT worker_id FROM executions")}
    assert used <= ids, f"executions by unknown workers: {used - ids}"
    assert len(used) >= 2, f"all jobs ran on one worker ({used}); the work was not shared"

    for proc in procs:
        assert fleet.terminate(proc) == 0, proc.tail()


# -- 2. crash -------------------------------------------------------------------------------

CRASH_JOBS = scale(300, 3000)
MIN_KILLS = scale(4, 50)
CRASH_SETTINGS: dict[str, Any] = {
    "concurrency": 2,
    "lease_ttl": 2.0,
    "lease_renew_interval": 0.5,
    "watchdog_interval": 0.5,
    "poll_interval": 0.2,
}


def running_jobs(sql: Conn, worker_id: UUID, states: tuple[str, ...] = ("RUNNING",)) -> set[int]:
    found = rows(
        sql,
        "SELECT job_id FROM executions WHERE worker_id = %s AND state = ANY(%s)",
        [worker_id, list(states)],
    )
    return {row[0] for row in found}


def kill_and_settle(fleet: Fleet, sql: Conn, victim: WorkerProcess) -> set[int]:
    """SIGKILL ``victim``; the jobs it had in flight at its death, once that is final.

    A statement the victim sent just before it died (a claim, say) still completes on the
    server. Once its sessions are gone its executions are final: the RUNNING ones (or
    TIMED_OUT, if the watchdog already got to them) are the ones it had in flight.
    """
    assert victim.worker_id is not None
    fleet.kill(victim)
    wait_until(
        lambda: scalar(
            sql,
            "SELECT count(*) = 0 FROM pg_stat_activity WHERE application_name = %s",
            [victim.app_name],
        ),
        what=f"the database sessions of killed worker {victim.name} are gone",
    )
    return running_jobs(sql, victim.worker_id, ("RUNNING", "TIMED_OUT"))


def test_killed_workers_jobs_are_reclaimed_and_rerun(tasks: App, runs: Conn, fleet: Fleet) -> None:
    sql = runs
    live = [fleet.start(**CRASH_SETTINGS) for _ in range(2)]
    for proc in live:
        fleet.worker_id(proc)
    tasks.enqueue_many(
        [
            JobSpec(task="e2e.work", args={"seconds": 0.05 + (i % 6) * 0.01})
            for i in range(CRASH_JOBS)
        ]
    )

    def succeeded() -> int:
        return int(scalar(sql, "SELECT count(*) FROM jobs WHERE state = 'SUCCEEDED'"))

    def pick_victim() -> tuple[WorkerProcess | None, set[int]] | None:
        """The oldest live worker with jobs in flight and the jobs, while another live one
        is registered (so the fleet never runs empty); (None, ...) when all is done."""
        if kills >= MIN_KILLS and succeeded() == CRASH_JOBS:
            return None, set()
        registered = [p for p in live if fleet.lookup_id(p) is not None]
        if len(registered) < 2:
            return None
        for proc in registered:
            assert proc.worker_id is not None
            in_flight = running_jobs(sql, proc.worker_id)
            if in_flight:
                return proc, in_flight
        return None

    killed: set[UUID] = set()
    in_flight_on_killed: set[int] = set()
    kills = 0
    while kills < MIN_KILLS or (kills < MIN_KILLS * 2 and succeeded() < CRASH_JOBS * 0.9):
        victim, before = wait_until(
            pick_victim,
            what="a live worker has jobs in flight while another live worker is registered",
            guard=lambda: fleet.assert_alive(*live),
            detail=lambda: f"job states: {job_states(sql)}",
        )
        if victim is None:
            break
        after = kill_and_settle(fleet, sql, victim)
        in_flight_on_killed |= before | after
        assert victim.worker_id is not None
        killed.add(victim.worker_id)
        kills += 1
        live.remove(victim)
        live.append(fleet.start(**CRASH_SETTINGS))

    wait_until(
        lambda: succeeded() == CRASH_JOBS,
        what=f"all {CRASH_JOBS} jobs are SUCCEEDED after {kills} kills",
        interval=0.1,
        guard=lambda: fleet.assert_alive(*live),
        detail=lambda: f"job states: {job_states(sql)}\n{fleet.logs()}",
    )

    not_once = rows(
        sql,
        "SELECT j.id, count(e.id) FILTER (WHERE e.state = 'SUCCEEDED')"
        " FROM jobs j LEFT JOIN executions e ON e.job_id = j.id"
        " GROUP BY j.id HAVING count(e.id) FILTER (WHERE e.state = 'SUCCEEDED') <> 1",
    )
    assert not_once == [], f"jobs without exactly one SUCCEEDED execution: {not_once[:20]}"

    unsuccessful = rows(
        sql, "SELECT id, job_id, state, worker_id FROM executions WHERE state <> 'SUCCEEDED'"
    )
    wrong = [e for e in unsuccessful if e[2] != "TIMED_OUT" or e[3] not in killed]
    assert wrong == [], f"non-SUCCEEDED executions not TIMED_OUT on a killed worker: {wrong}"

    rerun = {
        row[0]
        for row in rows(sql, "SELECT job_id FROM executions GROUP BY job_id HAVING count(*) > 1")
    }
    print(
        f"crash: {kills} kills, {len(in_flight_on_killed)} jobs in flight on killed workers, "
        f"{len(rerun)} re-run"
    )
    assert rerun, "no job was re-run although workers were killed with jobs in flight"
    assert rerun <= in_flight_on_killed, (
        f"jobs re-run that were not in flight on a killed worker: "
        f"{sorted(rerun - in_flight_on_killed)}"
    )
    assert rerun == {row[1] for row in unsuccessful}

    # every succeeding attempt really ran (the handler recorded it)
    unrecorded = rows(
        sql,
        "SELECT e.job_id, e.id FROM executions e WHERE e.state = 'SUCCEEDED'"
        " AND NOT EXISTS (SELECT 1 FROM runs r WHERE r.execution_id = e.id)",
    )
    assert unrecorded == [], f"SUCCEEDED executions with no run recorded: {unrecorded[:20]}"
    check = "kill -9 of workers mid-drain"
    record("reliability", check, "kill -9s", kills)
    record("reliability", check, "jobs", CRASH_JOBS)
    record("reliability", check, "jobs lost", CRASH_JOBS - succeeded())
    record("reliability", check, "jobs in flight on killed workers", len(in_flight_on_killed))
    record("reliability", check, "jobs re-run", len(rerun))
    record("reliability", check, "re-runs of jobs not in flight on a killed worker", 0)

    for proc in live:
        assert fleet.terminate(proc) == 0, proc.tail()


# -- 3. zombie ------------------------------------------------------------------------------


def process_stopped(pid: int) -> bool:
    """True when ``pid`` is in the stopped state (Linux /proc)."""
    stat = Path(f"/proc/{pid}/stat").read_text()
    return stat.rsplit(")", 1)[1].split()[0] in ("T", "t")


def touch(path: Path) -> None:
    path.touch()


async def test_stalled_worker_is_fenced_off_after_reclaim(
    tasks: App, runs: Conn, fleet: Fleet, tmp_path: Path
) -> None:
    sql = runs
    marker = tmp_path / "release-hold"
    zombie = fleet.start(
        concurrency=1, lease_ttl=2.0, lease_renew_interval=0.5, watchdog_interval=3600.0
    )
    zombie_id = fleet.worker_id(zombie)
    job = tasks.enqueue("e2e.hold", {"marker": str(marker)})

    first: int = wait_until(
        lambda: scalar(
            sql,
            "SELECT min(e.id) FROM executions e JOIN runs r ON r.execution_id = e.id"
            " WHERE e.job_id = %s AND e.state = 'RUNNING' AND e.worker_id = %s",
            [job.id, zombie_id],
        ),
        what="the zombie's handler is running the hold job",
        guard=lambda: fleet.assert_alive(zombie),
    )

    zombie.popen.send_signal(signal.SIGSTOP)
    wait_until(lambda: process_stopped(zombie.pid), what="the zombie is stopped")
    wait_until(
        lambda: scalar(
            sql, "SELECT now() > lease_expires_at FROM executions WHERE id = %s", [first]
        ),
        what="the stopped zombie's lease has expired",
    )

    rescuer = Watchdog(
        await tasks.db.async_pool(), tasks.db.store, actor="watchdog:rescuer", interval=1, batch=10
    )
    result = await rescuer.run_once()
    assert result.reclaimed == [(job.id, first, "PENDING")]
    assert scalar(sql, "SELECT state FROM executions WHERE id = %s", [first]) == "TIMED_OUT"
    assert tasks.get_job(job.id).state is JobState.PENDING

    successor = fleet.start(concurrency=1, lease_ttl=2.0, lease_renew_interval=0.5)
    successor_id = fleet.worker_id(successor)
    second: int = wait_until(
        lambda: scalar(
            sql,
            "SELECT min(id) FROM executions"
            " WHERE job_id = %s AND state = 'RUNNING' AND worker_id = %s",
            [job.id, successor_id],
        ),
        what="the successor is running the job",
        guard=lambda: fleet.assert_alive(successor),
    )
    assert second != first

    zombie.popen.send_signal(signal.SIGCONT)
    touch(marker)

    wait_until(
        lambda: tasks.get_job(job.id).state is JobState.SUCCEEDED,
        what="the job is SUCCEEDED",
        guard=lambda: fleet.assert_alive(zombie, successor),
        detail=fleet.logs,
    )
    fenced = f"execution_id={first}"

    def zombie_fenced() -> bool:
        return any("fenced off" in line and fenced in line for line in zombie.log().splitlines())

    # The zombie's attempt ends with its write fenced off, which leaves no trace in the
    # database, only in its log. Stop waiting early if its write did get through.
    wait_until(
        lambda: (
            zombie_fenced()
            or scalar(sql, "SELECT state <> 'TIMED_OUT' FROM executions WHERE id = %s", [first])
        ),
        what=f"the zombie logs that its attempt ({fenced}) was fenced off",
        guard=lambda: fleet.assert_alive(zombie),
        detail=zombie.tail,
    )

    done = tasks.get_job(job.id)
    assert done.result == successor.pid
    executions = tasks.list_executions(job.id)
    assert [(e.id, e.state, e.worker_id) for e in executions] == [
        (first, ExecutionState.TIMED_OUT, zombie_id),
        (second, ExecutionState.SUCCEEDED, successor_id),
    ]
    assert executions[0].error is not None
    assert executions[0].error.type == "tickwork.LeaseExpired"
    # both handlers really ran; only the successor's outcome counted
    assert rows(sql, "SELECT execution_id, pid FROM runs ORDER BY id") == [
        (first, zombie.pid),
        (second, successor.pid),
    ]
    assert [e.event_type for e in tasks.audit_events(job.id)] == ["job.reclaimed"]
    assert zombie_fenced(), zombie.tail()
    check = "SIGSTOPped worker resumed after its lease was taken"
    record("reliability", check, "writes of the stalled attempt that landed", 0)
    record("reliability", check, "attempts fenced off", 1)

    assert fleet.terminate(zombie) == 0, zombie.tail()
    assert fleet.terminate(successor) == 0, successor.tail()


# -- 4. graceful shutdown -------------------------------------------------------------------


def test_sigterm_finishes_short_jobs_and_releases_long_ones(
    tasks: App, runs: Conn, fleet: Fleet
) -> None:
    sql = runs
    short = tasks.enqueue_many([JobSpec(task="e2e.work", args={"seconds": 0.3}) for _ in range(2)])
    long_sync = tasks.enqueue("e2e.work", {"seconds": 30})
    long_async = tasks.enqueue("e2e.nap", {"seconds": 30})
    all_ids = [job.id for job in short] + [long_sync.id, long_async.id]

    worker = fleet.start(concurrency=4, shutdown_grace=1.0)
    wait_until(
        lambda: scalar(
            sql,
            "SELECT count(*) = %s FROM executions WHERE job_id = ANY(%s) AND state = 'RUNNING'",
            [len(all_ids), all_ids],
        ),
        what="all four jobs are RUNNING",
        interval=0.01,
        guard=lambda: fleet.assert_alive(worker),
        detail=lambda: f"job states: {job_states(sql)}\n{worker.tail()}",
    )

    code = fleet.terminate(worker)
    assert code == 0, worker.tail()

    assert scalar(sql, "SELECT count(*) FROM jobs WHERE state = 'RUNNING'") == 0
    assert scalar(sql, "SELECT count(*) FROM executions WHERE state = 'RUNNING'") == 0
    for job in short:
        assert tasks.get_job(job.id).state is JobState.SUCCEEDED, worker.tail()
    for job in (long_sync, long_async):
        after = tasks.get_job(job.id)
        assert (after.state, after.attempts) == (JobState.PENDING, 0), worker.tail()
        assert [e.state for e in tasks.list_executions(job.id)] == [ExecutionState.RELEASED]
        assert "job.released" in [e.event_type for e in tasks.audit_events(job.id)]
    check = "SIGTERM with jobs in flight"
    record("reliability", check, "RUNNING jobs or executions after exit", 0)
    record("reliability", check, "short jobs finished in the grace period", len(short))
    record("reliability", check, "long jobs handed back to PENDING", 2)
