"""The command line's loader, output and smaller commands: ``--app`` from the current
directory for every command, one-line errors, output to a pipe, ``--json``, help without value
hints on flags, ``--version``, ``jobs enqueue`` and ``users set-password``."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from collections.abc import Iterator
from datetime import UTC, datetime
from importlib.metadata import version
from pathlib import Path
from typing import Any

import psycopg
import pytest
import typer
from typer.testing import CliRunner

from tickwork import App
from tickwork.auth import AuthService
from tickwork.cli import cli
from tickwork.errors import AuthError
from tickwork.serve import ROLES

from .support import tickwork

pytestmark = pytest.mark.e2e

JOBS_PY = """\
from tickwork import App

app = App()


@app.task(name="cwd.mail", queue="mail")
def mail(to: str) -> None:
    pass
"""
LONG_NAME = "nightly-report-for-the-finance-department-with-a-long-name"


def one_line_error(done: subprocess.CompletedProcess[str]) -> str:
    assert done.returncode == 2, (done.stdout, done.stderr)
    assert done.stderr.startswith("error: ") and done.stderr.count("\n") == 1, done.stderr
    return done.stderr.strip()


def console_script(
    env: dict[str, str], cwd: Path, *args: str, stdin: str | None = None
) -> subprocess.CompletedProcess[str]:
    """The installed ``tickwork`` script (not ``python -m``, which puts the current
    directory on the path by itself), run in ``cwd``."""
    return subprocess.run(
        [str(Path(sys.executable).parent / "tickwork"), *args],
        env=env,
        cwd=cwd,
        input=stdin,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def sql(env: dict[str, str], query: str, *params: Any) -> list[tuple[Any, ...]]:
    with psycopg.connect(env["TICKWORK_DATABASE_URL"], autocommit=True) as conn:
        conn.execute(f"SET search_path TO {env['TICKWORK_SCHEMA']}")
        done = conn.execute(query, params)
        return done.fetchall() if done.description else []


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """A project directory holding ``jobs.py`` with its ``app``, as the README has it."""
    (tmp_path / "jobs.py").write_text(JOBS_PY)
    return tmp_path


# -- one loader ---------------------------------------------------------------------------


def test_every_command_loads_the_app_from_the_current_directory(
    db_env: dict[str, str], clean: None, project: Path
) -> None:
    commands = [
        ("migrate",),
        ("jobs", "list"),
        ("jobs", "enqueue", "cwd.mail", "--args", '{"to": "ada"}'),
        ("queues", "list"),
        ("users", "list"),
        ("schedules", "list"),
        ("signals", "stats"),
        ("reactors", "list"),
    ]
    for args in commands:
        done = console_script(db_env, project, *args, "--app", "jobs:app")
        assert done.returncode == 0, (args, done.stderr)
    doctor = console_script(db_env, project, "doctor", "--app", "jobs:app")
    assert doctor.returncode in (0, 1) and "xmin horizon" in doctor.stdout, doctor.stderr
    # the task's own queue: the app was loaded, not a bare one
    assert sql(db_env, "SELECT task, queue FROM jobs") == [("cwd.mail", "mail")]


@pytest.mark.parametrize(
    ("path", "message"),
    [
        ("jobs", "--app ('jobs') must look like 'module:attribute'"),
        ("nowhere:app", "--app ('nowhere:app'): no module 'nowhere' in the current directory"),
        ("jobs:apq", "--app ('jobs:apq'): module 'jobs' has no 'apq'"),
        ("jobs:App", "--app ('jobs:App'): 'App' is a type, not a tickwork App"),
    ],
)
def test_a_bad_app_is_one_line(
    db_env: dict[str, str], project: Path, path: str, message: str
) -> None:
    done = console_script(db_env, project, "queues", "list", "--app", path)
    assert one_line_error(done).startswith(f"error: {message}")


def test_an_app_module_that_fails_to_import_shows_where_then_one_line_and_exit_2(
    db_env: dict[str, str], project: Path
) -> None:
    (project / "broken.py").write_text('raise RuntimeError("the config file is missing")\n')
    done = console_script(db_env, project, "doctor", "--app", "broken:app")
    assert done.returncode == 2  # not doctor's 1 (warnings): a script can tell them apart
    lines = done.stderr.strip().splitlines()
    assert 'broken.py", line 1' in done.stderr  # the traceback points into the module
    assert lines[-1] == (
        "error: --app ('broken:app'): importing 'broken' failed: RuntimeError: the config file"
        " is missing (the traceback above shows where)"
    )


# -- output -------------------------------------------------------------------------------


def test_output_to_a_pipe_is_whole_and_json_is_offered(db_env: dict[str, str], clean: None) -> None:
    sql(
        db_env,
        "INSERT INTO schedules (name, task, cron, timezone, next_run_at)"
        " VALUES (%s, 'some.task', '0 3 * * *', 'Europe/Amsterdam', now())",
        LONG_NAME,
    )
    listed = tickwork(db_env, "schedules", "list")  # captured: stdout is a pipe
    assert listed.returncode == 0, listed.stderr
    assert LONG_NAME in listed.stdout and "Europe/Amsterdam" in listed.stdout, listed.stdout
    [stored] = json.loads(tickwork(db_env, "schedules", "list", "--json").stdout)
    assert (stored["name"], stored["cron"], stored["paused"]) == (LONG_NAME, "0 3 * * *", False)

    doctor = tickwork(db_env, "doctor")
    assert doctor.returncode in (0, 1), doctor.stderr
    indexes = [
        name
        for (name,) in sql(
            db_env, "SELECT indexname FROM pg_indexes WHERE schemaname = current_schema()"
        )
    ]
    assert indexes and all(name in doctor.stdout for name in indexes), doctor.stdout
    report = tickwork(db_env, "doctor", "--json")
    assert report.returncode == doctor.returncode, report.stderr
    health = json.loads(report.stdout)
    assert set(health) == {"tables", "indexes", "xmin_holders", "warnings"}
    assert sorted(i["name"] for i in health["indexes"]) == sorted(indexes)
    assert "schedules" in {t["name"] for t in health["tables"]}


# -- help and version ---------------------------------------------------------------------


def every_command(group: Any, path: tuple[str, ...] = ()) -> Iterator[tuple[str, ...]]:
    yield path
    for name, sub in group.commands.items():
        if isinstance(sub, typer.core.TyperGroup):
            yield from every_command(sub, (*path, name))
        else:
            yield (*path, name)


def test_help_shows_no_value_hint_on_flags_and_serve_names_every_role() -> None:
    runner = CliRunner()
    seen = 0
    for path in every_command(typer.main.get_command(cli)):
        shown = runner.invoke(cli, [*path, "--help"])
        assert shown.exit_code == 0, (path, shown.output)
        assert "<bool>" not in shown.output, (path, shown.output)
        seen += 1
    assert seen > 30
    disable = runner.invoke(cli, ["users", "disable", "--help"]).output
    assert "--enable " in disable and "<str>" in disable  # value hints stay on the rest
    serve = runner.invoke(cli, ["serve", "--help"]).output
    words = " ".join(serve.replace("│", " ").split())  # the help as wrapped in its box
    assert f"--roles <str> Comma-separated: {', '.join(ROLES)} (default: all)." in words, serve
    assert "signals" in ROLES


def test_version() -> None:
    shown = CliRunner().invoke(cli, ["--version"])
    assert (shown.exit_code, shown.output) == (0, f"tickwork {version('tickwork')}\n")


# -- jobs enqueue -------------------------------------------------------------------------


def test_jobs_enqueue_a_task_this_process_does_not_define(
    db_env: dict[str, str], clean: None
) -> None:
    made = tickwork(
        db_env,
        "jobs",
        "enqueue",
        "billing.invoice",
        "--args",
        '{"customer": 7, "lines": [1, 2]}',
        "--queue",
        "billing",
        "--priority",
        "5",
        "--run-at",
        "2031-02-03T04:05:06Z",
        "--unique-key",
        "invoice-7",
        "--max-attempts",
        "3",
        "--any-task",
        "--json",
    )
    assert made.returncode == 0, made.stderr
    job = json.loads(made.stdout)
    [row] = sql(
        db_env,
        "SELECT task, queue, args, priority, run_at, unique_key, max_attempts, state, created_by"
        " FROM jobs WHERE id = %s",
        job["id"],
    )
    assert row[:8] == (
        "billing.invoice",
        "billing",
        {"customer": 7, "lines": [1, 2]},
        5,
        datetime(2031, 2, 3, 4, 5, 6, tzinfo=UTC),
        "invoice-7",
        3,
        "PENDING",
    )
    assert row[8].startswith("cli:") and job["created_by"] == row[8]
    assert (job["task"], job["queue"], job["duplicate"]) == ("billing.invoice", "billing", False)
    assert sql(
        db_env, "SELECT actor, event_type FROM audit_events WHERE target_id = %s", str(job["id"])
    ) == [(row[8], "job.enqueued")]

    again = tickwork(
        db_env,
        "jobs",
        "enqueue",
        "billing.invoice",
        "-q",
        "billing",
        "--unique-key",
        "invoice-7",
        "--any-task",
    )
    assert again.returncode == 0, again.stderr
    assert again.stdout == f"job {job['id']} already holds unique key invoice-7 (PENDING)\n"

    typo = tickwork(db_env, "jobs", "enqueue", "billing.remnder")  # no app or worker has it
    assert one_line_error(typo).startswith("error: task ('billing.remnder') is not a registered")
    assert "--any-task" in typo.stderr
    plain = tickwork(db_env, "jobs", "enqueue", "billing.reminder", "--any-task")
    assert plain.returncode == 0, plain.stderr
    [(job_id, queue)] = sql(db_env, "SELECT id, queue FROM jobs WHERE task = 'billing.reminder'")
    assert plain.stdout == f"enqueued job {job_id}: billing.reminder on queue default\n"
    assert queue == "default"


@pytest.mark.parametrize(
    ("option", "value", "message"),
    [
        ("--args", "{customer: 7}", "error: --args ('{customer: 7}') is not JSON: "),
        ("--args", "[7]", "error: --args ('[7]') must be a JSON object"),
        ("--run-at", "2031-02-03", "error: --run-at ('2031-02-03') needs a time zone"),
        ("--run-at", "soon", "error: --run-at ('soon') must be an ISO 8601 time"),
        ("--priority", "500", "error: priority (500) must be"),
    ],
)
def test_jobs_enqueue_refuses_bad_input_in_one_line(
    db_env: dict[str, str], clean: None, option: str, value: str, message: str
) -> None:
    done = tickwork(db_env, "jobs", "enqueue", "billing.invoice", "--any-task", option, value)
    assert one_line_error(done).startswith(message)
    assert sql(db_env, "SELECT count(*) FROM jobs") == [(0,)]


# -- users set-password -------------------------------------------------------------------


async def test_users_set_password_reads_stdin_and_ends_sessions(
    db_env: dict[str, str], app: App
) -> None:
    async def run(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
        return await asyncio.to_thread(tickwork, db_env, *args, stdin=stdin)

    old, new = "the old password, long enough", "a new password, long enough"
    created = await run(
        "users", "create", "ada@example.com", "--role", "ADMIN", "--password-stdin", stdin=old
    )
    assert created.returncode == 0, created.stderr
    auth = AuthService(await app.db.async_pool(), app.db.store, app.settings.auth)
    await auth.start()
    session = await auth.login("ada@example.com", old, "127.0.0.1")

    short = await run("users", "set-password", "ada@example.com", stdin="short\n")
    assert "must be at least" in one_line_error(short)
    changed = await run("users", "set-password", "ADA@example.com", stdin=f"{new}\nnot read\n")
    assert changed.returncode == 0, changed.stderr
    assert "sessions have ended" in changed.stdout

    with pytest.raises(AuthError):
        await auth.refresh(session.refresh_token)  # the session ended
    with pytest.raises(AuthError):
        await auth.login("ada@example.com", old, "127.0.0.1")
    assert (await auth.login("ada@example.com", new, "127.0.0.1")).user.email == "ada@example.com"
    [(actor,)] = sql(
        db_env,
        "SELECT actor FROM audit_events WHERE event_type = 'user.password_changed'"
        " AND target_id = %s",
        str(session.user.id),
    )
    assert actor.startswith("cli:")
    missing = await run("users", "set-password", "nobody@example.com", stdin=f"{new}\n")
    assert "nobody@example.com" in one_line_error(missing)
