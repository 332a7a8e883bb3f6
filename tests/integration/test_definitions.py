"""Definitions: operator-stored HTTP and script jobs, run on the job path by their runtime's
worker (issue 16). Each run is a real call or a real process; the SSRF corpus is refused
before any connection is made."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import threading
import time
from collections.abc import AsyncIterator, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
import psycopg
import pytest

from tickwork import App
from tickwork.auth import Role
from tickwork.config import HttpRuntimeSettings, ScriptRuntimeSettings
from tickwork.definitions import admin
from tickwork.definitions.templates import Variables
from tickwork.errors import (
    AddressRefused,
    ConfigError,
    InvalidInput,
    RunFailed,
    RuntimeMissing,
    ScheduleError,
    TaskDefinitionError,
)
from tickwork.ops.metrics import REGISTRY
from tickwork.queue.retention import Retention
from tickwork.runtimes import http
from tickwork.runtimes import script as script_runtime
from tickwork.runtimes.available import check, runtime_of
from tickwork.runtimes.netguard import networks
from tickwork.types import JobState

from ..processes import kill_marked, marked
from .api_support import Api, start_api

ESBUILD = os.environ.get("TICKWORK_RUNTIMES__SCRIPTS__TYPESCRIPT") or shutil.which("esbuild")
CANARY = "TICKWORK_TEST_CANARY"


class Target(BaseHTTPRequestHandler):
    """A local service: /ok answers 200 with the request's Host, /fail 500, /hop redirects
    to the cloud metadata address, /loop to itself."""

    def do_GET(self) -> None:
        path = self.path.split("?", 1)[0]
        if path == "/ok":
            self._answer(200, f"hello from {self.headers['Host']}".encode())
        elif path == "/fail":
            self._answer(500, f"the service is down ({self.path})".encode())
        elif path == "/hop":
            self._redirect("http://169.254.169.254/latest/meta-data/")
        elif path == "/echo":
            seen = {"path": self.path, "headers": dict(self.headers)}
            self._answer(200, json.dumps(seen).encode())
        elif path == "/elsewhere":  # the same server under another origin (127.0.0.2)
            port = self.server.server_address[1]
            self._redirect(f"http://127.0.0.2:{port}/echo")
        elif path == "/to-file":
            self._redirect("file:///etc/passwd")
        else:
            self._redirect("/loop")

    def _answer(self, status: int, body: bytes) -> None:
        self.send_response(status)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def _redirect(self, location: str) -> None:
        self.send_response(302)
        self.send_header("Location", location)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, format: str, *args: Any) -> None:
        pass


@pytest.fixture(scope="module")
def target() -> Iterator[str]:
    server = ThreadingHTTPServer(("0.0.0.0", 0), Target)  # 127.0.0.2 is another origin
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


@pytest.fixture
def marker() -> Iterator[str]:
    """A word only this test's script processes carry in their command line."""
    made = f"tickwork-left-{os.getpid()}-{time.monotonic_ns()}"
    yield made
    kill_marked(made)


@pytest.fixture
async def runner(database_url: str, schema: str, clean: None) -> AsyncIterator[App]:
    """An app whose HTTP runtime may reach this machine's loopback (the test's service)."""
    scripts: dict[str, Any] = {"kill_grace": 0.5}
    if ESBUILD:
        scripts["typescript"] = ESBUILD
    the_app = App(
        database_url=database_url,
        schema=schema,
        runtimes={"http": {"allow_networks": ["127.0.0.1/32"]}, "scripts": scripts},
    )
    yield the_app
    await the_app.aclose()


async def define(app: App, **fields: Any) -> int:
    pool = await app.db.async_pool()
    created = await admin.create(pool, app.db.store, fields, actor="test")
    return created.id


async def run(app: App, definition_id: int) -> int:
    """Run the definition now on its runtime's worker; the job's id."""
    pool = await app.db.async_pool()
    job_id = await admin.run_now(pool, app.db.store, definition_id, actor="test")
    job = await app.get_job_async(job_id)
    async with app.worker(runtime=runtime_of(job.queue), concurrency=1) as worker:
        assert len((await worker.run_once()).outcomes) == 1
    return job_id


def script(language: str, source: str, **fields: Any) -> dict[str, Any]:
    return {
        "name": f"{language}-{abs(hash(source))}",
        "kind": "script",
        "script": {"language": language, "source": source},
    } | fields


# --- HTTP ---------------------------------------------------------------------------------


async def test_an_http_definition_calls_its_url_and_keeps_the_answer(
    runner: App, target: str
) -> None:
    found = await define(runner, name="ping", kind="http", http={"url": f"{target}/ok"})
    job = await runner.get_job_async(await run(runner, found))
    assert job.state is JobState.SUCCEEDED
    assert job.queue == "http" and job.task == "tickwork.http"
    assert job.result["status"] == 200
    assert job.result["body"] == f"hello from {target.removeprefix('http://')}"


async def test_an_unexpected_status_fails_the_attempt_retries_then_dead_letters(
    runner: App, target: str
) -> None:
    found = await define(
        runner,
        name="down",
        kind="http",
        http={"url": f"{target}/fail"},
        retry={"max_attempts": 2, "backoff_base": 0},
    )
    first = await runner.get_job_async(await run(runner, found))
    assert first.state is JobState.FAILED and first.attempts == 1  # a retry is due
    async with runner.worker(runtime="http") as worker:
        assert len((await worker.run_once()).outcomes) == 1
    job = await runner.get_job_async(first.id)
    assert job.state is JobState.DEAD_LETTER and job.attempts == 2
    assert job.error is not None
    assert "answered 500" in job.error.message and "the service is down" in job.error.message


async def test_a_redirect_to_an_internal_address_is_refused_at_the_hop(
    runner: App, target: str
) -> None:
    found = await define(
        runner,
        name="hop",
        kind="http",
        http={"url": f"{target}/hop", "follow_redirects": True},
        retry={"max_attempts": 1},
    )
    job = await runner.get_job_async(await run(runner, found))
    assert job.state is JobState.DEAD_LETTER and job.error is not None
    assert "refused to connect to 169.254.169.254" in job.error.message
    # the refusal names the setting that would allow the network
    assert "runtimes.http.allow_networks" in job.error.message


async def call(
    url: str,
    *,
    allow: tuple[str, ...] = (),
    transport: httpx.AsyncBaseTransport | None = None,
    **settings: Any,
) -> dict[str, Any]:
    """One HTTP run of ``GET url`` (redirects followed) with the guard allowing ``allow``."""
    spec = {"method": "GET", "url": url, "headers": {}, "follow_redirects": True}
    return await http.call(
        spec,
        exec_timeout=5,
        variables=Variables({}),
        settings=HttpRuntimeSettings(**settings),
        allow=networks(list(allow)),
        transport=transport,
    )


SSRF = (
    ("http://127.0.0.1/", "127.0.0.1"),
    ("http://localhost:8080/", "127.0.0.1"),
    ("http://10.1.2.3/", "10.1.2.3"),
    ("http://192.168.0.1/", "192.168.0.1"),
    ("http://169.254.169.254/latest/meta-data/", "169.254.169.254"),
    ("http://[::1]/", "::1"),
    ("http://[fc00::1]/", "fc00::1"),
    ("http://[fe80::1]/", "fe80::1"),
    ("http://[::ffff:127.0.0.1]/", "::ffff:127.0.0.1"),
    ("http://[64:ff9b::a00:1]/", "64:ff9b::a00:1"),
    ("http://[::127.0.0.1]/", "::127.0.0.1"),  # IPv4-compatible: reserved ::/8
    ("http://[::8.8.8.8]/", "::8.8.8.8"),  # reserved, whatever IPv4 address it carries
    ("http://2130706433/", "127.0.0.1"),
    ("http://0.0.0.0/", "0.0.0.0"),
    ("http://100.64.0.1/", "100.64.0.1"),
    ("http://224.0.0.1/", "224.0.0.1"),
)


@pytest.mark.parametrize(("url", "address"), SSRF)
async def test_the_ssrf_guard_refuses_internal_targets_naming_the_address(
    url: str, address: str
) -> None:
    with pytest.raises(AddressRefused) as refused:
        await call(url)
    assert refused.value.address == address, refused.value


@pytest.mark.parametrize("url", ["http://0177.0.0.1/", "http://0x7f.0.0.1/"])
async def test_odd_spellings_of_an_address_are_refused_as_invalid(url: str) -> None:
    with pytest.raises(RunFailed, match=r"(is not valid|refused to connect to 127\.0\.0\.1)"):
        await call(url)


async def test_a_redirect_to_another_scheme_is_refused(target: str) -> None:
    with pytest.raises(AddressRefused, match="scheme 'file'"):
        await call(f"{target}/to-file", allow=("127.0.0.1/32",))


async def test_redirects_past_the_limit_fail(target: str) -> None:
    with pytest.raises(RunFailed, match="more than 2 redirects"):
        await call(f"{target}/loop", allow=("127.0.0.1/32",), max_redirects=2)


async def test_secret_variables_are_masked_in_a_failed_calls_error(
    runner: App, target: str, sql: psycopg.Connection[Any]
) -> None:
    sql.execute(
        "INSERT INTO variables (name, value, secret, updated_by)"
        " VALUES ('token', 'hunter2-xyz', true, 't')"
    )
    found = await define(
        runner,
        name="leaky",
        kind="http",
        http={"url": f"{target}/fail?key={{{{ vars.token }}}}"},
        retry={"max_attempts": 1},
    )
    job = await runner.get_job_async(await run(runner, found))
    assert job.error is not None and "answered 500" in job.error.message
    # the URL and the body the service echoed it in are both masked
    assert "hunter2-xyz" not in job.error.message and "key=***" in job.error.message
    assert "hunter2-xyz" not in job.error.traceback


# --- scripts ------------------------------------------------------------------------------


async def test_a_failed_scripts_error_keeps_the_end_of_stdout_and_of_stderr_masked(
    runner: App, sql: psycopg.Connection[Any]
) -> None:
    sql.execute(
        "INSERT INTO variables (name, value, secret, updated_by)"
        " VALUES ('tok', 'hunter2-xyz', true, 't')"
    )
    source = (
        "echo first-line-of-stdout\n"
        "head -c 5000 /dev/zero | tr '\\0' a; echo\n"  # more than the error keeps
        'echo "the token was $tok"; echo last-line-of-stdout\n'
        'echo "stderr says $tok" >&2\n'
        "exit 3\n"
    )
    found = await define(
        runner,
        name="failing",
        kind="script",
        script={"language": "bash", "source": source, "variables": ["tok"]},
        retry={"max_attempts": 1},
    )
    job = await runner.get_job_async(await run(runner, found))
    assert job.state is JobState.DEAD_LETTER and job.error is not None
    message = job.error.message
    assert "exited with status 3" in message, message
    assert "last-line-of-stdout" in message and "the token was ***" in message, message
    assert "stderr says ***" in message, message
    assert "hunter2-xyz" not in message and "hunter2-xyz" not in job.error.traceback
    assert "first-line-of-stdout" not in message  # the end only, bounded
    assert message.count("a") < 2100 + 200, len(message)


async def test_only_a_runtimes_executor_claims_its_queue(
    database_url: str, schema: str, clean: None
) -> None:
    app = App(database_url=database_url, schema=schema)
    try:
        for queues in (["default", "scripts-groovy"], ["http"]):
            with pytest.raises(ConfigError, match=r"worker\.queues \('(scripts-groovy|http)'\)"):
                app.worker(queues=queues)
        with pytest.raises(ConfigError, match="tickwork worker --runtime bash"):
            App(
                database_url=database_url, schema=schema, worker={"queues": ["scripts-bash"]}
            ).worker()
        with pytest.raises(ConfigError, match="claims its queue"):
            app.worker(runtime="bash", queues=["default"])
        missing = App(
            database_url=database_url,
            schema=schema,
            runtimes={"scripts": {"groovy": "/nowhere/groovy", "concurrency": 3}},
        )
        with pytest.raises(RuntimeMissing, match="groovy"):
            missing.worker(runtime="groovy")
        bash = missing.worker(runtime="bash")
        assert (bash.queues, bash.concurrency, bash.task_names) == (
            ["scripts-bash"],
            3,
            ["tickwork.script"],
        )
        plain = app.worker()
        assert "tickwork.script" not in plain.task_names
        assert "tickwork.http" not in plain.task_names
        with pytest.raises(TaskDefinitionError, match="queue 'scripts-node' is the node runtime's"):
            app.task(queue="scripts-node")(lambda: None)
    finally:
        app.close()


HELLO = {
    "bash": 'echo "hello from bash $BASH_VERSION" | cut -c1-15',
    "python": "print('hello from python')",
    "node": "console.log('hello from node')",
    "typescript": "const who: string = 'typescript'; console.log(`hello from ${who}`)",
    "groovy": "println 'hello from groovy'",
}


@pytest.mark.parametrize("language", list(HELLO))
async def test_each_language_runs_and_its_output_is_kept(runner: App, language: str) -> None:
    runtime = "node" if language == "typescript" else language
    try:
        check(runtime, runner.settings.runtimes)
    except Exception as missing:
        pytest.skip(str(missing))
    if language == "typescript" and not ESBUILD:
        pytest.skip("esbuild is not installed")
    found = await define(runner, **script(language, HELLO[language], exec_timeout=120))
    job = await runner.get_job_async(await run(runner, found))
    assert job.state is JobState.SUCCEEDED, job.error
    assert job.result["exit_code"] == 0
    assert job.result["stdout"].strip() == f"hello from {language}"


async def test_a_script_sees_only_the_allowed_environment_and_its_variables(
    runner: App, monkeypatch: pytest.MonkeyPatch, sql: psycopg.Connection[Any]
) -> None:
    monkeypatch.setenv(CANARY, "must-not-leak")
    sql.execute(
        "INSERT INTO variables (name, value, updated_by) VALUES ('region.name', 'eu-1', 't')"
    )
    source = "env | sort; id -u"
    found = await define(
        runner,
        name="env",
        kind="script",
        script={"language": "bash", "source": source, "variables": ["region.name"]},
    )
    job = await runner.get_job_async(await run(runner, found))
    assert job.state is JobState.SUCCEEDED, job.error
    out = job.result["stdout"]
    written = REGISTRY.get_sample_value(
        "tickwork_script_output_bytes_total", {"language": "bash", "stream": "stdout"}
    )
    assert written is not None and written >= len(out)
    assert CANARY not in out and "must-not-leak" not in out
    assert "TICKWORK_DATABASE_URL" not in out
    assert "region_name=eu-1" in out
    if os.geteuid() == 0:  # as root, scripts run as the unprivileged user
        assert out.strip().splitlines()[-1] == str(runner.settings.runtimes.scripts.uid)


async def test_a_script_past_its_timeout_is_killed_with_what_it_started(
    runner: App, marker: str
) -> None:
    source = f"(exec -a {marker} sleep 300) &\nsleep 300\n"
    found = await define(
        runner, **script("bash", source, exec_timeout=1, retry={"max_attempts": 1})
    )
    job = await runner.get_job_async(await run(runner, found))
    assert job.state is JobState.DEAD_LETTER and job.error is not None
    assert "longer than exec_timeout" in job.error.message
    assert marked(marker) == []


async def test_output_postgresql_cannot_store_is_kept_as_replacement_characters(
    runner: App, target: str
) -> None:
    found = await define(runner, **script("bash", "printf 'a\\0b'; printf 'c\\0d' >&2"))
    job = await runner.get_job_async(await run(runner, found))
    assert job.state is JobState.SUCCEEDED, job.error
    assert (job.result["stdout"], job.result["stderr"]) == ("a\ufffdb", "c\ufffdd")


async def test_what_a_script_leaves_running_ends_with_it_and_never_holds_the_run(
    runner: App, shared_dir: Path, marker: str
) -> None:
    """A background process keeps the script's output pipes open: the run ends when the
    script does, and what it left ends with it: in its group, or out of it (setsid)."""
    source = (
        f"(sleep 30; touch {shared_dir}/finished) &\n"
        f"setsid sh -c 'touch {shared_dir}/escaped; sleep 300; : {marker}' &\n"
        f"while [ ! -e {shared_dir}/escaped ]; do sleep 0.01; done\n"
        "echo started\n"
    )
    found = await define(runner, **script("bash", source, exec_timeout=120))
    job = await runner.get_job_async(await run(runner, found))
    assert job.state is JobState.SUCCEEDED, job.error
    assert job.result["stdout"] == "started\n"
    if script_runtime.sandbox.containment(runner.settings.runtimes.scripts).namespaces:
        assert marked(marker) == []  # the one that left the group ended with the run
    assert not (shared_dir / "finished").exists()  # the group's sleep was killed


async def test_a_memory_hog_is_stopped_by_its_limit(runner: App) -> None:
    source = "blob = bytearray(8 * 1024 ** 3)\nprint('allocated')"
    found = await define(
        runner, **script("python", source, retry={"max_attempts": 1}, exec_timeout=60)
    )
    job = await runner.get_job_async(await run(runner, found))
    assert job.state is JobState.DEAD_LETTER and job.error is not None
    assert "MemoryError" in job.error.message


@pytest.mark.skipif(os.geteuid() != 0, reason="the process limit counts the script user's")
async def test_a_fork_bomb_is_stopped_by_its_limits(
    database_url: str, schema: str, clean: None
) -> None:
    # RLIMIT_NPROC counts every process of the user, on the whole machine: with the shared
    # script user, another test run's scripts (its own fork bomb above all) filled the 64
    # and the run failed to start (`timeout` could not fork: exit 125) or to go on. A user
    # of this run's own (a uid no other running pytest can pick: it holds the pid) counts
    # the bomb's processes alone.
    bombed = App(
        database_url=database_url,
        schema=schema,
        runtimes={"scripts": {"processes": 64, "kill_grace": 0.5, "uid": 1_000_000 + os.getpid()}},
    )
    try:
        found = await define(
            bombed,
            **script("bash", "bomb() { bomb | bomb & }; bomb; sleep 1; echo survived",
                     exec_timeout=30, retry={"max_attempts": 1}),
        )  # fmt: skip
        job = await bombed.get_job_async(await run(bombed, found))
    finally:
        await bombed.aclose()
    # the run ends (its `sleep` may fail to fork: then so does the run), its bomb with it
    said = job.result["stderr"] if job.result else job.error.message if job.error else ""
    assert "fork: retry" in said or "Resource temporarily" in said, job


async def test_a_script_runs_only_on_its_languages_queue(runner: App) -> None:
    found = await define(runner, **script("python", "print(1)"))
    pool = await runner.db.async_pool()
    job_id = await admin.run_now(pool, runner.db.store, found, actor="test")
    assert (await runner.get_job_async(job_id)).queue == "scripts-python"
    for other_runtime in ("bash", "http"):
        async with runner.worker(runtime=other_runtime) as other:
            assert (await other.run_once()).outcomes == []
    assert (await runner.get_job_async(job_id)).state is JobState.PENDING


async def test_a_scheduled_run_after_an_edit_uses_the_edit(runner: App) -> None:
    found = await define(runner, **script("bash", "echo one", name="nightly", cron="0 3 * * *"))
    pool = await runner.db.async_pool()
    await admin.edit(pool, runner.db.store, found, {"script": {"language": "bash",
                     "source": "echo two"}}, actor="test")  # fmt: skip
    job = await asyncio.to_thread(runner.trigger_schedule, f"definition:{found}", actor="test")
    assert job.args["definition"]["version"] == 2
    assert job.args["spec"]["source"] == "echo two"
    async with runner.worker(runtime=runtime_of(job.queue)) as worker:
        await worker.run_once()
    assert (await runner.get_job_async(job.id)).result["stdout"] == "two\n"


async def test_a_loop_rule_enqueues_the_next_run_after_a_success(
    runner: App, sql: psycopg.Connection[Any]
) -> None:
    found = await define(runner, **script("bash", "echo tick", loop={"every": 3600, "times": 2}))
    first = await run(runner, found)
    rows = sql.execute(
        "SELECT unique_key, state FROM jobs WHERE task = 'tickwork.script' ORDER BY id"
    ).fetchall()
    assert rows[0] == (None, "SUCCEEDED")
    assert rows[1] == (f"definition:{found}:loop:{first}:1", "PENDING")


async def test_bad_definitions_are_refused_naming_the_field(runner: App) -> None:
    cases = (
        ({"name": "x", "kind": "script", "script": {"language": "cobol", "source": "x"}},
         "script.language"),
        ({"name": "x", "kind": "http", "http": {"url": "ftp://example.com/"}}, "http.url"),
        ({"name": "x", "kind": "http", "script": {"language": "bash", "source": "x"}},
         "definition"),
        ({"name": "x", "kind": "script", "script": {"language": "bash", "source": "x",
          "variables": ["PATH"]}}, "script.variables"),
        ({"name": "x", "kind": "http", "http": {"url": "https://a.example/"}, "cron": "nope"},
         "cron"),
        ({"name": "x", "kind": "http", "http": {"url": "https://a.example/"},
          "exec_timeout": 100000}, "exec_timeout"),
    )  # fmt: skip
    pool = await runner.db.async_pool()
    for given, field in cases:
        with pytest.raises((InvalidInput, ScheduleError)) as refused:
            await admin.create(pool, runner.db.store, given, actor="test")
        assert refused.value.field == field, (given, refused.value)


# --- the API ------------------------------------------------------------------------------


@pytest.fixture
async def api(runner: App) -> AsyncIterator[Api]:
    async for started in start_api(runner):
        yield started


async def test_the_api_gives_each_role_its_part(api: Api) -> None:
    c = api.client
    body = {"name": "probe", "kind": "http", "http": {"url": "https://example.com/"}}
    for role in (Role.VIEWER, Role.OPERATOR):
        answer = await c.post("/api/definitions", json=body, headers=api.headers(role))
        assert answer.status_code == 403, (role, answer.text)
    created = await c.post("/api/definitions", json=body, headers=api.headers(Role.ADMIN))
    assert created.status_code == 201, created.text
    one = f"/api/definitions/{created.json()['id']}"
    viewer, operator = api.headers(Role.VIEWER), api.headers(Role.OPERATOR)
    assert (await c.get(one, headers=viewer)).json()["queue"] == "http"
    listed = await c.get("/api/definitions", params={"name": "PRO"}, headers=viewer)
    assert [d["name"] for d in listed.json()["items"]] == ["probe"]
    assert (await c.post(f"{one}/run", headers=viewer)).status_code == 403
    assert (await c.patch(one, json={"enabled": False}, headers=operator)).status_code == 403
    assert (await c.delete(one, headers=operator)).status_code == 403
    paused = await c.post(f"{one}/pause", headers=operator)
    assert paused.status_code == 200 and paused.json()["enabled"] is False
    ran = await c.post(f"{one}/run", headers=operator)
    assert ran.status_code == 202
    job = (await c.get(f"/api/jobs/{ran.json()['job_id']}", headers=viewer)).json()
    assert job["task"] == "tickwork.http" and job["queue"] == "http"
    assert (await c.delete(one, headers=api.headers(Role.ADMIN))).status_code == 204
    assert (await c.get(one, headers=viewer)).status_code == 404


async def test_the_api_answers_400_naming_each_bad_field(api: Api) -> None:
    c, admin_headers = api.client, api.headers(Role.ADMIN)
    answer = await c.post(
        "/api/definitions",
        json={"name": "x", "kind": "script", "script": {"language": "cobol", "source": ""}},
        headers=admin_headers,
    )
    assert answer.status_code == 400, answer.text
    assert answer.json()["field"] == "script.language", answer.text
    assert "(and 1 more)" in answer.json()["detail"]
    secret = await c.post(
        "/api/definitions",
        json={"name": "z", "kind": "http", "http": {"url": "https://x.example/",
              "headers": {"Authorization": "Bearer s3cr3t\n"}}},
        headers=admin_headers,
    )  # fmt: skip
    assert secret.status_code == 400 and "s3cr3t" not in secret.text, secret.text
    created = await c.post(
        "/api/definitions",
        json={"name": "y", "kind": "http", "http": {"url": "https://example.com/"}},
        headers=admin_headers,
    )
    one = f"/api/definitions/{created.json()['id']}"
    for edit, field in (
        ({"enabled": "yes"}, "enabled"),
        ({"name": None}, "name"),
        ({"script": {"language": "bash", "source": "x"}}, "script"),
    ):
        answer = await c.patch(one, json=edit, headers=admin_headers)
        assert answer.status_code == 400, (edit, answer.text)
        assert field in answer.text, (edit, answer.text)


async def test_a_schedule_of_a_definition_is_changed_through_its_definition(api: Api) -> None:
    c, admin_headers = api.client, api.headers(Role.ADMIN)
    created = await c.post(
        "/api/definitions",
        json={
            "name": "nightly",
            "kind": "http",
            "http": {"url": "https://example.com/"},
            "cron": "0 3 * * *",
        },
        headers=admin_headers,
    )
    schedule = f"/api/schedules/definition:{created.json()['id']}"
    assert (await c.get(schedule, headers=admin_headers)).status_code == 200
    assert (await c.delete(schedule, headers=admin_headers)).status_code == 409
    answer = await c.patch(schedule, json={"cron": "0 4 * * *"}, headers=admin_headers)
    assert answer.status_code == 409
    taken = await c.post(
        "/api/schedules",
        json={"name": "definition:999", "task": "tickwork.http", "cron": "0 3 * * *"},
        headers=admin_headers,
    )
    assert taken.status_code == 400
    await c.patch(
        f"/api/definitions/{created.json()['id']}", json={"cron": None}, headers=admin_headers
    )
    assert (await c.get(schedule, headers=admin_headers)).status_code == 404


async def test_a_refused_target_is_sent_no_request(runner: App) -> None:
    """The runtime refuses before sending: no connection is attempted to the refused host."""
    sent: list[httpx.Request] = []

    async def record(request: httpx.Request) -> httpx.Response:
        sent.append(request)
        return httpx.Response(200)

    with pytest.raises(AddressRefused):
        await call("http://10.0.0.1/", transport=httpx.MockTransport(record))
    assert sent == []


# --- webhooks -----------------------------------------------------------------------------


async def test_a_webhook_runs_its_definition_with_the_body_as_the_payload(
    api: Api, runner: App
) -> None:
    c, admin_headers = api.client, api.headers(Role.ADMIN)
    source = 'cat "$TICKWORK_TRIGGER"'
    created = await c.post(
        "/api/definitions",
        json={"name": "hooked", "kind": "script", "script": {"language": "bash", "source": source}},
        headers=admin_headers,
    )
    one = f"/api/definitions/{created.json()['id']}"
    for role in (Role.VIEWER, Role.OPERATOR):
        assert (await c.post(f"{one}/webhook", headers=api.headers(role))).status_code == 403
    hook = await c.post(f"{one}/webhook", headers=admin_headers)
    assert hook.status_code == 201, hook.text
    path, token = hook.json()["path"], hook.json()["token"]
    assert path.endswith(f"/{token}") and token.startswith("twh_")
    shown = (await c.get(one, headers=admin_headers)).text
    assert '"webhook":true' in shown and token not in shown

    sent = {
        "content-type": "x/y",
        "x-event": "push",
        "authorization": "Bearer not-for-the-script",
        "cookie": "session=not-for-the-script",
        "x-forwarded-for": "10.0.0.1",
    }
    called = await c.post(path, content=b'{"ref": "main"}', headers=sent)
    assert called.status_code == 202, called.text
    job = await runner.get_job_async(called.json()["job_id"])
    trigger = job.args["trigger"]
    assert (trigger["via"], trigger["payload"], trigger["content_type"]) == (
        "webhook",
        '{"ref": "main"}',
        "x/y",
    )
    assert trigger["headers"]["x-event"] == "push"
    assert "not-for-the-script" not in json.dumps(trigger) and "10.0.0.1" not in json.dumps(trigger)
    async with runner.worker(runtime=runtime_of(job.queue)) as worker:
        await worker.run_once()
    ran = await runner.get_job_async(job.id)
    assert json.loads(ran.result["stdout"])["payload"] == '{"ref": "main"}'

    # a wrong token, an unknown definition: the same 404
    wrong = await c.post(path.replace(token, token[:-2] + "xx"), json={})
    unknown = await c.post(path.replace(f"/{created.json()['id']}/", "/987654/"), json={})
    assert wrong.status_code == unknown.status_code == 404
    assert wrong.json()["detail"].replace("987654", "") == wrong.json()["detail"]
    # a body that is not text, one too large
    assert (await c.post(path, content=b"\xff\xfe")).status_code == 400
    assert (await c.post(path, content=b"x" * (64 * 1024 + 1))).status_code == 413
    # paused: 409; a new token replaces the old one; removed: 404
    await c.post(f"{one}/pause", headers=api.headers(Role.OPERATOR))
    assert (await c.post(path, json={})).status_code == 409
    await c.post(f"{one}/resume", headers=api.headers(Role.OPERATOR))
    rotated = (await c.post(f"{one}/webhook", headers=admin_headers)).json()["path"]
    assert (await c.post(path, json={})).status_code == 404
    assert (await c.post(rotated, json={})).status_code == 202
    assert (await c.delete(f"{one}/webhook", headers=admin_headers)).status_code == 204
    assert (await c.post(rotated, json={})).status_code == 404
    audit = await c.get("/api/audit", params={"target_type": "definition"}, headers=admin_headers)
    events = {e["event_type"] for e in audit.json()["items"]}
    assert {"definition.webhook_set", "definition.webhook", "definition.webhook_removed"} <= events


# --- activity -----------------------------------------------------------------------------


async def test_activity_counts_each_attempt_and_retention_ages_it_out(
    api: Api, runner: App, target: str, sql: psycopg.Connection[Any]
) -> None:
    ok = await define(runner, name="fine", kind="http", http={"url": f"{target}/ok"})
    bad = await define(
        runner,
        name="broken",
        kind="http",
        http={"url": f"{target}/fail"},
        retry={"max_attempts": 1},
    )
    await run(runner, ok)
    await run(runner, ok)
    await run(runner, bad)
    c, viewer = api.client, api.headers(Role.VIEWER)
    fine = (await c.get(f"/api/definitions/{ok}/activity", headers=viewer)).json()
    assert (fine["runs"], fine["succeeded"], fine["failed"]) == (2, 2, 0)
    assert fine["bucket"] == "hour" and sum(b["runs"] for b in fine["buckets"]) == 2
    by_minute = await c.get(
        f"/api/definitions/{bad}/activity", params={"bucket": "minute"}, headers=viewer
    )
    broken = by_minute.json()
    assert (broken["runs"], broken["succeeded"], broken["failed"]) == (1, 0, 1)
    exposed = (await c.get("/metrics")).text
    assert 'tickwork_definition_runs_total{kind="http",language="-",outcome="failed"}' in exposed
    assert "tickwork_definition_run_duration_seconds_bucket" in exposed
    one = (await c.get(f"/api/definitions/{bad}", headers=viewer)).json()
    assert (one["runs"], one["failures"], one["last_outcome"]) == (1, 1, "failed")
    assert one["last_run_at"] is not None
    # the counts are by when the attempts ended: a window before them holds none
    before = await c.get(
        f"/api/definitions/{ok}/activity",
        params={"from": "2020-01-01T00:00:00Z", "to": "2020-01-02T00:00:00Z"},
        headers=viewer,
    )
    assert before.json()["runs"] == 0 and before.json()["buckets"] == []
    for params, field in (
        ({"bucket": "week"}, "bucket"),
        ({"from": "2020-01-01T00:00:00Z", "to": "2021-01-01T00:00:00Z", "bucket": "minute"},
         "from"),
        ({"from": "2021-01-01T00:00:00Z", "to": "2020-01-01T00:00:00Z"}, "to"),
        ({"from": "2021-01-01T00:00:00"}, "from"),  # no zone: refused, as everywhere
    ):  # fmt: skip
        refused = await c.get(f"/api/definitions/{ok}/activity", params=params, headers=viewer)
        assert refused.status_code == 400 and refused.json()["field"] == field, refused.text

    sql.execute(
        "INSERT INTO definition_activity (definition_id, bucket, runs, succeeded)"
        " VALUES (%s, now() - interval '40 days', 5, 5)",
        [ok],
    )
    pool = await runner.db.async_pool()
    await Retention(pool, runner.db.store, runner.settings.retention).run_once()
    left = sql.execute(
        "SELECT sum(runs), min(bucket) > now() - interval '1 day' FROM definition_activity"
    ).fetchone()
    assert left == (3, True)  # the old bucket went; today's stayed


async def test_wrong_tokens_never_use_up_a_webhooks_rate(api: Api) -> None:
    c, admin_headers = api.client, api.headers(Role.ADMIN)
    created = await c.post(
        "/api/definitions",
        json={"name": "target", "kind": "http", "http": {"url": "https://example.com/"}},
        headers=admin_headers,
    )
    hook = await c.post(f"/api/definitions/{created.json()['id']}/webhook", headers=admin_headers)
    path = hook.json()["path"]
    wrong = path.rsplit("/", 1)[0] + "/twh_wrong"
    answers = [(await c.post(wrong, json={})).status_code for _ in range(40)]
    assert answers == [404] * 30 + [429] * 10  # the flooding address is refused...
    elsewhere = httpx.ASGITransport(app=api.api, client=("192.0.2.7", 40000))
    async with httpx.AsyncClient(transport=elsewhere, base_url="http://testserver") as other:
        assert (await other.post(path, json={})).status_code == 202  # ...not the definition


# --- what the red team found ----------------------------------------------------------------


async def test_an_operator_cannot_run_code_by_enqueueing_a_runtime_task(api: Api) -> None:
    c, operator = api.client, api.headers(Role.OPERATOR)
    args = {
        "definition": {"id": 1, "name": "x", "version": 1, "kind": "script"},
        "spec": {"language": "bash", "source": "id", "variables": []},
        "policy": {"exec_timeout": 10, "retry": {}, "loop": None},
        "trigger": {"via": "operator"},
    }
    for task in ("tickwork.script", "tickwork.http"):
        body = {"task": task, "queue": "scripts-bash", "args": args}
        answer = await c.post("/api/jobs", json=body, headers=operator)
        assert answer.status_code == 400 and answer.json()["field"] == "task", answer.text


async def test_a_script_off_its_languages_queue_is_refused(runner: App) -> None:
    job = await runner.enqueue_async(  # as only code (or the database) could make it
        "tickwork.script",
        {
            "definition": {"id": 1, "name": "x", "version": 1, "kind": "script"},
            "spec": {"language": "python", "source": "print(1)", "variables": []},
            "policy": {"exec_timeout": 10, "retry": {"max_attempts": 1}, "loop": None},
        },
        queue="scripts-bash",
        max_attempts=1,
    )
    async with runner.worker(runtime="bash") as worker:
        await worker.run_once()
    ran = await runner.get_job_async(job.id)
    assert ran.state is JobState.DEAD_LETTER and ran.error is not None
    assert "runs only from queue scripts-python" in ran.error.message


async def test_credentials_never_follow_a_redirect_to_another_origin(
    runner: App, target: str, sql: psycopg.Connection[Any]
) -> None:
    sql.execute(
        "INSERT INTO variables (name, value, secret, updated_by)"
        " VALUES ('tok', 's3cr3t-T0KEN-value', true, 't')"
    )
    headers = {"Authorization": "Bearer {{ vars.tok }}", "X-Api-Key": "{{ vars.tok }}",
               "X-Plain": "kept"}  # fmt: skip
    found = await define(
        runner,
        name="hop-away",
        kind="http",
        http={"url": f"{target}/elsewhere", "headers": headers, "follow_redirects": True},
    )
    local = App(
        database_url=runner.settings.database_url,  # the other origin is allowed too
        schema=runner.settings.schema_name,
        runtimes={"http": {"allow_networks": ["127.0.0.0/8"]}},
    )
    try:
        job = await local.get_job_async(await run(local, found))
    finally:
        await local.aclose()
    assert job.state is JobState.SUCCEEDED, job.error
    seen = json.loads(job.result["body"])["headers"]
    assert "Authorization" not in seen and "X-Api-Key" not in seen
    assert seen["X-Plain"] == "kept"


async def test_a_secret_is_masked_however_it_is_spelled_and_where_output_was_cut(
    runner: App, target: str, sql: psycopg.Connection[Any]
) -> None:
    sql.execute(
        "INSERT INTO variables (name, value, secret, updated_by) VALUES"
        " ('pw', 'pass word ünïcode', true, 't'), ('tok', 'SuperSecretToken12345', true, 't')"
    )
    found = await define(
        runner,
        name="encoded",
        kind="http",
        http={"url": f"{target}/echo?pw={{{{ vars.pw }}}}", "expect_status": [201]},
        retry={"max_attempts": 1},
    )
    job = await runner.get_job_async(await run(runner, found))
    assert job.error is not None and "answered 200" in job.error.message
    assert "pass%20word" not in job.error.message and "pass word" not in job.error.message
    cut = await define(
        runner,
        name="cut",
        kind="script",
        script={
            "language": "bash",
            "source": 'head -c 65526 /dev/zero | tr "\\0" x; printf "%s" "$tok"',
            "variables": ["tok"],
        },
    )
    ran = await runner.get_job_async(await run(runner, cut))
    assert ran.result["stdout_truncated"] is True
    assert ran.result["stdout"].endswith("x***") and "SuperSe" not in ran.result["stdout"]


async def test_a_running_scripts_output_shows_as_it_is_written_secrets_masked(
    runner: App, sql: psycopg.Connection[Any], shared_dir: Path
) -> None:
    """While the script waits (for the test's go), its progress holds the last 4 kB of what
    it wrote so far, a secret masked whole and where the tail cut it; the end keeps all."""
    sql.execute(
        "INSERT INTO variables (name, value, secret, updated_by)"
        " VALUES ('tok', 'SuperSecretToken12345', true, 't')"
    )
    source = (
        'printf "first %s\\n" "$tok"\n'
        'printf "%s" "$tok"; head -c 4061 /dev/zero | tr "\\0" y; echo\n'  # the tail cuts it
        'printf "last %s\\n" "$tok"; echo oops >&2\n'
        f"while [ ! -e {shared_dir}/go ]; do sleep 0.05; done\n"
        "echo done\n"
    )
    found = await define(
        runner,
        name="live",
        kind="script",
        script={"language": "bash", "source": source, "variables": ["tok"]},
        exec_timeout=120,
    )
    pool = await runner.db.async_pool()
    job_id = await admin.run_now(pool, runner.db.store, found, actor="test")
    async with runner.worker(runtime="bash", concurrency=1) as worker:
        ran = asyncio.create_task(worker.run_once())
        shown = None
        async with asyncio.timeout(60):  # the runtime reports twice a second
            while shown is None:
                await worker._write_progress()  # the periodic writer's pass (not in run_once)
                job = await runner.get_job_async(job_id)
                output = job.progress.output if job.progress else None
                if output and "last" in output["stdout"]:
                    shown = output
                else:
                    await asyncio.sleep(0.1)
        assert job.state is JobState.RUNNING and not ran.done()
        (shared_dir / "go").touch()
        assert len((await ran).outcomes) == 1
    stdout = shown["stdout"]
    assert stdout.endswith("last ***\n") and shown["stderr"] == "oops\n"
    assert "first" not in stdout and len(stdout.encode()) <= script_runtime.LIVE_TAIL
    assert stdout.startswith("***yyy"), stdout[:40]  # the token's end, where the tail began
    assert "Token" not in stdout and "12345" not in stdout and "done" not in stdout
    done = await runner.get_job_async(job_id)
    assert done.state is JobState.SUCCEEDED, done.error
    assert done.result["stdout"].startswith("first ***\n***yyy")
    assert done.result["stdout"].endswith("last ***\ndone\n")


def test_a_tail_masks_the_end_of_a_secret_it_cut() -> None:
    masker = Variables({}, ("SuperSecretToken12345",))
    assert masker.mask("en12345 then", cut_before=True) == "*** then"
    assert masker.mask("345 then", cut_before=True) == "345 then"  # under 4 characters
    assert masker.mask("then SuperSec", cut=True) == "then ***"
    assert masker.mask("12345 and Super", cut=True, cut_before=True) == "*** and ***"
    assert masker.mask("plain", cut=True, cut_before=True) == "plain"


async def test_odd_inputs_are_refused_when_stored_or_fail_the_run_plainly(runner: App) -> None:
    pool = await runner.db.async_pool()
    for fields, field in (
        ({"http": {"url": "https://a.example/", "headers": {"X-A": "literal-ü"}}}, "http.headers"),
        ({"http": {"url": "https://a.example/", "headers": {"sk_live_SECRET x": "v"}}},
         "http.headers"),
        ({"name": "two\u2028lines"}, "name"),
    ):  # fmt: skip
        given = {"name": "odd", "kind": "http", "http": {"url": "https://a.example/"}} | fields
        with pytest.raises(InvalidInput) as refused:
            await admin.create(pool, runner.db.store, given, actor="test")
        assert refused.value.field == field and "sk_live" not in str(refused.value)
    for url in ("http://xn--/", "http://127.0.0.1:99999/"):
        found = await define(
            runner, name=f"odd {url}", kind="http", http={"url": url}, retry={"max_attempts": 1}
        )
        job = await runner.get_job_async(await run(runner, found))
        assert job.state is JobState.DEAD_LETTER and job.error is not None
        assert job.error.type == "tickwork.RunFailed", job.error


async def test_an_empty_edit_changes_nothing(runner: App) -> None:
    found = await define(runner, **script("bash", "true"))
    pool = await runner.db.async_pool()
    same = await admin.edit(pool, runner.db.store, found, {}, actor="test")
    assert same.version == 1


async def test_a_work_directory_a_killed_worker_left_is_removed_by_a_later_run(
    shared_dir: Path,
) -> None:
    left = shared_dir / "tickwork-run-left"
    recent = shared_dir / "tickwork-run-recent"
    for made in (left, recent):
        made.mkdir()
        (made / "script.sh").write_text("echo left behind")
    old = time.time() - script_runtime.STALE_AFTER - 60
    os.utime(left, (old, old))
    settings = ScriptRuntimeSettings(workdir=shared_dir)
    spec = {"language": "bash", "source": "echo fresh", "variables": []}
    done = await script_runtime.run(
        spec, exec_timeout=30, variables=Variables({}), settings=settings
    )
    assert done["stdout"] == "fresh\n"
    assert not left.exists()  # older than any run can be
    assert recent.exists()  # may be a run of another worker, still going


async def test_drain_runs_a_definitions_run_on_its_runtimes_executor(runner: App) -> None:
    from tickwork.testing import drain_async

    found = await define(runner, **script("bash", "echo drained"))
    pool = await runner.db.async_pool()
    job_id = await admin.run_now(pool, runner.db.store, found, actor="test")
    outcomes = await drain_async(runner)  # every queue due, scripts-bash included
    assert [o.job_id for o in outcomes] == [job_id]
    job = await runner.get_job_async(job_id)
    assert job.state is JobState.SUCCEEDED and job.result["stdout"] == "drained\n"
