"""What an outside test of a running API broke, each shown fixed: values too deep or too
large to serve, a demoted admin's still-valid token, unbounded bodies, secrets echoed in
errors, numbers read as dates, a wrong current password read as an expired token."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Any

import httpx
import psycopg
import psycopg.sql
import pytest

from tickwork import App, JobState
from tickwork.api import create_api
from tickwork.auth import AuthService, Role
from tickwork.errors import AuthError, EnqueueError, SignalError
from tickwork.limits import MAX_JSON_BYTES, MAX_JSON_DEPTH

from .api_support import PASSWORD, Api, email, problem, start_api

CANARY = "canary-Zq8v7Lw2"
"""A secret planted in inputs; it must never come back in an answer."""


def nested(depth: int) -> Any:
    """A value ``depth`` containers deep (the outermost counts as one)."""
    value: list[Any] = []
    for _ in range(depth - 1):
        value = [value]
    return value


def deep_body(depth: int) -> bytes:
    """An enqueue body whose ``args`` are ``depth`` levels deep (args itself is level 1)."""
    inner = depth - 1
    return ('{"task":"tests.echo","args":{"d":' + "[" * inner + "]" * inner + "}}").encode()


@pytest.fixture
async def api(app: App) -> AsyncIterator[Api]:
    @app.task(name="tests.echo", queue="hardening")
    def echo(word: str = "hi", d: Any = None) -> str:
        return word

    async for found in start_api(app):
        yield found


def as_json(api: Api, role: Role) -> dict[str, str]:
    return api.headers(role) | {"content-type": "application/json"}


# -- 1. values too deep or too large to be served back ----------------------------------


async def test_too_deep_args_are_refused_at_every_entry_point(api: Api, sql: Any) -> None:
    answer = await api.client.post(
        "/api/jobs", content=deep_body(300), headers=as_json(api, Role.OPERATOR)
    )
    body = problem(answer, 400)
    assert body["field"] == "args" and f"deeper than {MAX_JSON_DEPTH}" in body["detail"]
    at_limit = await api.client.post(
        "/api/jobs", content=deep_body(MAX_JSON_DEPTH), headers=as_json(api, Role.OPERATOR)
    )
    assert at_limit.status_code == 201, at_limit.text

    with pytest.raises(EnqueueError) as caught:
        api.app.enqueue("tests.echo", {"d": nested(MAX_JSON_DEPTH)})
    assert caught.value.field == "args" and "deeper than" in str(caught.value)
    with pytest.raises(EnqueueError):  # one bad job in a batch is found and named
        api.app.enqueue_many(
            [{"task": "tests.echo"}] * 100
            + [{"task": "tests.echo", "args": {"d": nested(MAX_JSON_DEPTH)}}]
        )
    with pytest.raises(EnqueueError):
        await api.app.enqueue_async("tests.echo", {"d": nested(5000)})  # beyond recursion
    with pytest.raises(SignalError) as signal_refused:
        api.app.signals.emit("THING_CHANGED", payload={"d": nested(MAX_JSON_DEPTH)})
    assert signal_refused.value.field == "payload"
    with pytest.raises(EnqueueError):  # a schedule defined in code, refused when defined
        api.app.add_schedule("deep-in-code", "tests.echo", "0 3 * * *", args={"d": nested(100)})
    schedule = await api.client.post(
        "/api/schedules",
        content=(
            '{"name":"deep","task":"tests.echo","cron":"* * * * *","args":{"d":'
            + "[" * 300
            + "]" * 300
            + "}}"
        ).encode(),
        headers=as_json(api, Role.ADMIN),
    )
    assert problem(schedule, 400)["field"] == "args"
    [(count,)] = sql.execute("SELECT count(*) FROM jobs")
    assert count == 1  # only the job at the limit


async def test_rows_stored_too_deep_before_the_limit_are_still_served(api: Api, sql: Any) -> None:
    """A row from before the limits (written here straight into the table) no longer
    poisons the listing nor its own page: the value is left out and named."""
    deep = json.dumps({"d": nested(300)})
    [(job_id,)] = sql.execute(
        "INSERT INTO jobs (queue, task, args, max_attempts, created_by, result, state)"
        " VALUES ('hardening', 'tests.echo', %s, 1, 'test', %s, 'SUCCEEDED') RETURNING id",
        (deep, deep),
    ).fetchall()
    headers = api.headers(Role.VIEWER)
    listing = await api.client.get("/api/jobs", headers=headers)
    assert listing.status_code == 200, listing.text
    [item] = listing.json()["items"]
    assert item["args"] == {} and item["result"] is None
    assert sorted(item["omitted"]) == ["args", "result"]
    detail = await api.client.get(f"/api/jobs/{job_id}", headers=headers)
    assert detail.status_code == 200, detail.text
    assert sorted(detail.json()["omitted"]) == ["args", "result"]

    made = await api.client.post(
        "/api/schedules",
        json={"name": "old", "task": "tests.echo", "cron": "0 3 * * *"},
        headers=api.headers(Role.ADMIN),
    )
    assert made.status_code == 201, made.text
    sql.execute("UPDATE schedules SET args = %s WHERE name = 'old'", (deep,))
    schedules = await api.client.get("/api/schedules", headers=headers)
    assert schedules.status_code == 200, schedules.text
    assert schedules.json()[0]["omitted"] == ["args"]
    one = await api.client.get("/api/schedules/old", headers=headers)
    assert one.status_code == 200 and one.json()["omitted"] == ["args"]
    [(stored,)] = sql.execute("SELECT args FROM schedules WHERE name = 'old'").fetchall()
    assert stored == json.loads(deep)  # shown in part; never changed


async def test_large_values_are_left_out_of_listings_only(api: Api) -> None:
    big = "x" * 200_000
    made = await api.client.post(
        "/api/jobs",
        json={"task": "tests.echo", "args": {"word": big}},
        headers=api.headers(Role.OPERATOR),
    )
    assert made.status_code == 201, made.text
    assert len(made.content) < 10_000  # the answer to an enqueue does not echo it back
    assert made.json()["omitted"] == ["args"]
    small = await api.client.post(
        "/api/jobs", json={"task": "tests.echo"}, headers=api.headers(Role.OPERATOR)
    )
    listing = (await api.client.get("/api/jobs", headers=api.headers(Role.VIEWER))).json()
    by_id = {item["id"]: item for item in listing["items"]}
    assert by_id[made.json()["id"]]["omitted"] == ["args"]
    assert by_id[made.json()["id"]]["args"] == {}
    assert by_id[small.json()["id"]]["omitted"] == []
    detail = await api.client.get(
        f"/api/jobs/{made.json()['id']}", headers=api.headers(Role.VIEWER)
    )
    assert detail.json()["args"] == {"word": big} and detail.json()["omitted"] == []


async def test_args_over_the_size_limit_are_refused(api: Api) -> None:
    too_big = {"word": "x" * (MAX_JSON_BYTES + 1)}
    with pytest.raises(EnqueueError) as caught:
        api.app.enqueue("tests.echo", too_big)
    assert caught.value.field == "args" and "bytes of JSON" in str(caught.value)
    assert len(str(caught.value)) < 500  # the value is summarised, never echoed whole
    with pytest.raises(EnqueueError):
        api.app.enqueue_many([{"task": "tests.echo"}, {"task": "tests.echo", "args": too_big}])


async def test_a_result_too_deep_to_serve_fails_the_attempt(app: App, background: Any) -> None:
    @app.task(name="tests.deep_result", max_attempts=1)
    def deep_result() -> Any:
        return nested(MAX_JSON_DEPTH + 1)

    job = app.enqueue("tests.deep_result")
    async with background(app) as (_, outcomes):
        outcome = await outcomes.for_job(job.id)
    assert outcome.job_state is JobState.DEAD_LETTER
    stored = app.get_job(job.id)
    assert stored.error is not None and stored.error.type == "tickwork.ResultNotSerialisable"
    assert "deeper than" in stored.error.message


async def test_a_text_result_over_the_size_limit_fails_the_attempt(
    app: App, background: Any
) -> None:
    @app.task(name="tests.big_result", max_attempts=1)
    def big_result() -> str:
        return "x" * (MAX_JSON_BYTES + 1)

    job = app.enqueue("tests.big_result")
    async with background(app) as (_, outcomes):
        await outcomes.for_job(job.id)
    stored = app.get_job(job.id)
    assert stored.state is JobState.DEAD_LETTER and stored.result is None
    assert stored.error is not None and "bytes of JSON" in stored.error.message


async def test_a_huge_error_message_is_cut_when_stored(app: App, background: Any) -> None:
    @app.task(name="tests.loud", max_attempts=1)
    def loud() -> None:
        raise ValueError("x" * 5_000_000)

    job = app.enqueue("tests.loud")
    async with background(app) as (_, outcomes):
        await outcomes.for_job(job.id)
    stored = app.get_job(job.id)
    assert stored.error is not None
    assert len(stored.error.message) < 70_000 and "5,000,000 characters" in stored.error.message
    assert len(stored.error.traceback) < 70_000


# -- 2. a demoted, disabled admin's token ---------------------------------------------------


async def test_a_demoted_disabled_admin_cannot_undo_it(api: Api) -> None:
    admin_b = await api.auth.create_user("b@example.com", PASSWORD, Role.ADMIN)
    token_b = (await api.login("b@example.com")).json()["access_token"]
    b_headers = {"Authorization": f"Bearer {token_b}"}
    assert (await api.client.get("/api/users", headers=b_headers)).status_code == 200

    demoted = await api.client.patch(
        f"/api/users/{admin_b.id}",
        json={"role": "VIEWER", "disabled": True},
        headers=api.headers(Role.ADMIN),
    )
    assert demoted.status_code == 200, demoted.text
    undo = await api.client.patch(
        f"/api/users/{admin_b.id}", json={"role": "ADMIN", "disabled": False}, headers=b_headers
    )
    problem(undo, 401)
    viewer = (await api.client.get("/api/me", headers=api.headers(Role.VIEWER))).json()
    promote = await api.client.patch(
        f"/api/users/{viewer['id']}", json={"role": "ADMIN"}, headers=b_headers
    )
    problem(promote, 401)
    assert (await api.auth.get_user(admin_b.id)).role is Role.VIEWER
    assert (await api.auth.get_user(viewer["id"])).role is Role.VIEWER


async def test_logout_and_password_change_end_the_access_token(api: Api) -> None:
    await api.auth.create_user("c@example.com", PASSWORD, Role.OPERATOR)
    first = (await api.login("c@example.com")).json()
    second = (await api.login("c@example.com")).json()
    first_headers = {"Authorization": f"Bearer {first['access_token']}"}
    second_headers = {"Authorization": f"Bearer {second['access_token']}"}
    assert (await api.client.get("/api/me", headers=first_headers)).status_code == 200

    out = await api.client.post("/api/auth/logout", json={"refresh_token": first["refresh_token"]})
    assert out.status_code == 204
    problem(await api.client.get("/api/me", headers=first_headers), 401)
    assert (await api.client.get("/api/me", headers=second_headers)).status_code == 200  # its own

    changed = await api.client.post(
        "/api/me/password",
        json={"current_password": PASSWORD, "new_password": "a brand new passphrase"},
        headers=second_headers,
    )
    assert changed.status_code == 204, changed.text
    problem(await api.client.get("/api/me", headers=second_headers), 401)


async def test_refresh_reuse_ends_the_access_tokens_of_its_session(api: Api) -> None:
    await api.auth.create_user("d@example.com", PASSWORD, Role.VIEWER)
    pair = (await api.login("d@example.com")).json()
    rotated = await api.client.post(
        "/api/auth/refresh", json={"refresh_token": pair["refresh_token"]}
    )
    new_headers = {"Authorization": f"Bearer {rotated.json()['access_token']}"}
    assert (await api.client.get("/api/me", headers=new_headers)).status_code == 200
    replay = await api.client.post(
        "/api/auth/refresh", json={"refresh_token": pair["refresh_token"]}
    )
    problem(replay, 401)
    problem(await api.client.get("/api/me", headers=new_headers), 401)


async def test_another_process_hears_of_a_revocation_at_once(app: App) -> None:
    """Two API processes (two identity services): a disable made through one is honoured by
    the other on its next request, through NOTIFY, with its cache set to keep answers for an
    hour (so the one-second expiry cannot be what ends the token)."""
    pool = await app.db.async_pool()
    here = AuthService(pool, app.db.store, app.settings.auth)
    there = AuthService(pool, app.db.store, app.settings.auth)
    await here.start()
    await there.start()
    there._sessions.ttl = 3600.0
    heard = asyncio.Event()
    forget = there._sessions.forget

    def forget_and_tell(user_id: int) -> None:
        forget(user_id)
        heard.set()

    there._sessions.forget = forget_and_tell  # type: ignore[method-assign]
    stop = asyncio.Event()
    watching = asyncio.create_task(there.watch_sessions(stop))
    try:
        await asyncio.wait_for(there.listening.wait(), 60)
        channel = app.db.store.channel("sessions")
        async with pool.connection() as conn:  # a payload not of ours does not stop it
            await conn.execute(
                psycopg.sql.SQL("NOTIFY {}, '\u00b2'").format(psycopg.sql.Identifier(channel))
            )
        user = await here.create_user("e@example.com", PASSWORD, Role.OPERATOR)
        await here.create_user("keeper@example.com", PASSWORD, Role.ADMIN)
        pair = await here.login("e@example.com", PASSWORD, "192.0.2.1")
        assert (await there.authenticate(pair.access_token)).role is Role.OPERATOR  # cached
        await here.disable(user.id, "user:keeper@example.com")
        await asyncio.wait_for(heard.wait(), 60)
        with pytest.raises(AuthError):
            await there.authenticate(pair.access_token)
    finally:
        stop.set()
        await asyncio.wait_for(watching, 60)


# -- 4. bounded bodies, anonymous bodies unread --------------------------------------------


async def test_a_body_over_the_limit_is_refused_before_it_is_read(api: Api) -> None:
    limit = api.app.settings.api.max_body_bytes
    over = await api.client.post(
        "/api/jobs",
        content=b"{" + b" " * limit + b"}",
        headers=as_json(api, Role.OPERATOR),
    )
    assert problem(over, 413)["title"] == "Request body too large"


async def _call_raw(
    api: Api, method: str, path: str, headers: list[tuple[bytes, bytes]]
) -> tuple[int, int]:
    """Call the ASGI app directly with a body it must not read: (status, receive calls)."""
    calls = 0
    sent: list[dict[str, Any]] = []

    async def receive() -> dict[str, Any]:
        nonlocal calls
        calls += 1
        return {"type": "http.request", "body": b"{}" * 10, "more_body": True}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": method,
        "scheme": "http",
        "path": path,
        "raw_path": path.encode(),
        "query_string": b"",
        "root_path": "",
        "headers": headers,
        "client": ("192.0.2.7", 1234),
        "server": ("testserver", 80),
    }
    await api.api(scope, receive, send)
    return sent[0]["status"], calls


async def test_anonymous_and_oversized_bodies_are_answered_unread(api: Api) -> None:
    huge = [(b"content-type", b"application/json"), (b"content-length", b"52000000")]
    status, reads = await _call_raw(api, "POST", "/api/jobs", huge)
    assert (status, reads) == (413, 0)
    anonymous = [(b"content-type", b"application/json"), (b"transfer-encoding", b"chunked")]
    status, reads = await _call_raw(api, "POST", "/api/jobs", anonymous)
    assert (status, reads) == (401, 0)
    bogus = [*anonymous, (b"authorization", b"Basic eDp5")]
    assert (await _call_raw(api, "PUT", "/api/variables/x", bogus)) == (401, 0)


# -- 5. secrets never echoed ---------------------------------------------------------------


@pytest.mark.parametrize("content_type", ["text/plain", None, "application/x-www-form-urlencoded"])
async def test_bodies_of_other_content_types_are_never_echoed(
    api: Api, content_type: str | None
) -> None:
    headers = {} if content_type is None else {"content-type": content_type}
    secret_bodies = {
        "/api/auth/login": {"email": "viewer@example.com", "password": CANARY},
        "/api/invites/accept": {"token": CANARY, "password": CANARY},
        "/api/auth/refresh": {"refresh_token": CANARY},
    }
    for path, body in secret_bodies.items():
        answer = await api.client.post(path, content=json.dumps(body).encode(), headers=headers)
        assert answer.status_code in (400, 401, 415), (path, answer.text)
        assert CANARY not in answer.text, (path, answer.text)
    authed = [
        ("POST", "/api/me/password", {"current_password": CANARY, "new_password": CANARY + "!!"}),
        ("PUT", "/api/variables/api_key", {"value": CANARY, "secret": True}),
    ]
    for method, path, body in authed:
        answer = await api.client.request(
            method,
            path,
            content=json.dumps(body).encode(),
            headers=headers | api.headers(Role.ADMIN),
        )
        assert 400 <= answer.status_code < 500, (path, answer.text)
        assert CANARY not in answer.text, (path, answer.text)


async def test_long_values_are_summarised_in_errors(api: Api) -> None:
    answer = await api.client.post(
        "/api/jobs",
        json={"task": "tests.echo", "queue": "q" * 5000},
        headers=api.headers(Role.OPERATOR),
    )
    body = problem(answer, 400)
    assert body["field"] == "queue" and len(answer.text) < 1000
    unknown = await api.client.post(
        "/api/jobs", json={"task": "t" * 5000}, headers=api.headers(Role.OPERATOR)
    )
    assert unknown.status_code == 400 and len(unknown.text) < 1500


# -- 7. numbers as dates, the wrong current password -----------------------------------------


async def test_run_at_must_be_a_date_time_text(api: Api) -> None:
    for value in (253402300800, 1.5, "253402300800"):
        answer = await api.client.post(
            "/api/jobs",
            json={"task": "tests.echo", "run_at": value},
            headers=api.headers(Role.OPERATOR),
        )
        assert problem(answer, 400)["field"] == "run_at", value
    listed = await api.client.get(
        "/api/jobs", params={"created_from": "1700000000"}, headers=api.headers(Role.VIEWER)
    )
    assert problem(listed, 400)["field"] == "created_from"
    fine = await api.client.post(
        "/api/jobs",
        json={"task": "tests.echo", "run_at": "2030-01-01T00:00:00Z"},
        headers=api.headers(Role.OPERATOR),
    )
    assert fine.status_code == 201 and fine.json()["run_at"].startswith("2030-01-01")


async def test_a_wrong_current_password_is_bad_input_not_an_expired_token(api: Api) -> None:
    answer = await api.client.post(
        "/api/me/password",
        json={"current_password": "not it at all", "new_password": "a brand new passphrase"},
        headers=api.headers(Role.VIEWER),
    )
    body = problem(answer, 400)
    assert body["field"] == "current_password"
    assert "www-authenticate" not in answer.headers


# -- the API's own errors are problems -------------------------------------------------------


async def test_an_unexpected_error_is_a_problem_not_text(app: App) -> None:
    pool = await app.db.async_pool()
    auth = AuthService(pool, app.db.store, app.settings.auth)
    await auth.start()
    api = create_api(app, auth, pool)

    @api.get("/boom", include_in_schema=False)
    async def boom() -> None:
        raise RuntimeError("kaboom " + CANARY)

    # ahead of the dashboard's catch-all, which answers every other GET with its page
    api.router.routes.insert(0, api.router.routes.pop())

    from tickwork.api.security import ROUTE_ROLES

    transport = httpx.ASGITransport(app=api, raise_app_exceptions=False)
    async with httpx.AsyncClient(transport=transport, base_url="http://testserver") as client:
        ROUTE_ROLES[("GET", "/boom")] = None
        try:
            answer = await client.get("/boom")
        finally:
            del ROUTE_ROLES[("GET", "/boom")]
    body = problem(answer, 500)
    assert CANARY not in answer.text and body["title"] == "Internal error"


# -- what a red team found against a running serve ------------------------------------------


async def test_a_bad_token_is_refused_before_its_body_is_read(api: Api) -> None:
    forged = [(b"content-type", b"application/json"), (b"authorization", b"Bearer x.y.z")]
    assert (await _call_raw(api, "POST", "/api/jobs", forged)) == (401, 0)
    # an API token is only known to the database: it passes the gate, and is refused after
    answer = await api.client.post(
        "/api/jobs", json={"task": "tests.echo"}, headers={"Authorization": "Bearer twk_nope"}
    )
    problem(answer, 401)


async def test_bodies_of_public_routes_are_small(api: Api) -> None:
    answer = await api.client.post(
        "/api/auth/login",
        content=b'{"email": "a@b.c", "password": "' + b"x" * 100_000 + b'"}',
        headers={"content-type": "application/json"},
    )
    assert problem(answer, 413)["detail"].startswith("this request's body may be at most 65,536")


async def test_bodies_being_read_share_one_budget(api: Api) -> None:
    """Many stalled uploads cannot fill memory: past the budget a request is answered 503
    at once (the budget is set small here; its default is 64 MiB)."""
    from tickwork.api.gate import Gate

    gate = api.api.middleware_stack
    while not isinstance(gate, Gate):
        gate = gate.app  # type: ignore[attr-defined]
    gate.budget = 10
    try:
        status, _ = await _call_raw(
            api,
            "POST",
            "/api/jobs",
            [(b"content-type", b"application/json"), *_bearer(api, Role.OPERATOR)],
        )
    finally:
        gate.budget = 64 * 1024 * 1024
    assert status == 503
    assert gate.reading == 0  # what it held is given back


def _bearer(api: Api, role: Role) -> list[tuple[bytes, bytes]]:
    return [(b"authorization", f"Bearer {api.tokens[role]}".encode())]


async def test_a_huge_list_for_a_text_field_is_refused_without_a_walk(api: Api) -> None:
    body = b'{"refresh_token": [' + b",".join([b"[]"] * 20_000) + b"]}"
    answer = await api.client.post(
        "/api/auth/refresh", content=body, headers={"content-type": "application/json"}
    )
    assert problem(answer, 400)["field"] == "refresh_token"


async def test_arguments_that_do_not_fit_are_named_not_echoed(api: Api) -> None:
    answer = await api.client.post(
        "/api/jobs",
        json={"task": "tests.echo", "args": {"password": CANARY}},
        headers=api.headers(Role.OPERATOR),
    )
    body = problem(answer, 400)
    assert "password" in body["detail"] and CANARY not in answer.text
    unknown = await api.client.post(
        "/api/auth/login", json={"email": "a@b.c", "password": "x" * 12, "passwd": CANARY}
    )
    assert problem(unknown, 400)["field"] == "passwd" and CANARY not in unknown.text
    setting = await api.client.put(
        "/api/settings/retention.finished_after",
        json={"value": CANARY},
        headers=api.headers(Role.ADMIN),
    )
    assert setting.status_code == 400 and CANARY not in setting.text


async def test_schedule_names_are_plain(api: Api) -> None:
    for name in ("a/b", "../x", "evil\nERROR forged line", " padded", "\u202ertl"):
        answer = await api.client.post(
            "/api/schedules",
            json={"name": name, "task": "tests.echo", "cron": "0 3 * * *"},
            headers=api.headers(Role.ADMIN),
        )
        assert answer.status_code == 400, (name, answer.text)
        assert answer.json()["field"] == "name"
    long = await api.client.get("/api/schedules/" + "n" * 10_000, headers=api.headers(Role.VIEWER))
    assert problem(long, 404) and len(long.text) < 1000


async def test_no_redirect_names_the_client_s_host(api: Api) -> None:
    answer = await api.client.get(
        "/api/jobs/", headers=api.headers(Role.VIEWER) | {"Host": "evil.example"}
    )
    assert answer.status_code == 404
    assert "location" not in answer.headers


async def test_a_right_login_the_database_failed_is_not_counted(
    api: Api, sql: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The password was right and the database failed while the session was being stored:
    the attempt is forgiven once the database answers, not left to count as a failure."""
    auth = api.auth
    real = auth.store.user_login_succeeded
    failures = 1

    async def flaky(conn: Any, **params: Any) -> Any:
        nonlocal failures
        if failures:
            failures -= 1
            raise psycopg.OperationalError("the connection was lost")
        return await real(conn, **params)

    monkeypatch.setattr(auth.store, "user_login_succeeded", flaky)
    with pytest.raises(psycopg.OperationalError):
        await auth.login(email(Role.VIEWER), PASSWORD, "192.0.2.9")
    await asyncio.wait_for(asyncio.gather(*auth._settling), 60)
    [(left,)] = sql.execute("SELECT count(*) FROM login_failures").fetchall()
    assert left == 0  # forgiven (deleted), not left to count after a minute


async def test_text_postgresql_cannot_store_fails_the_attempt_and_never_the_batch(
    app: App,
) -> None:
    """A NUL or a lone surrogate in a result fails its attempt with a clear error; in an
    error's text it is replaced. Either once failed the whole outcome batch: the jobs stayed
    RUNNING until reclaimed, and ran again, for ever."""

    @app.task(name="tests.nul_result", max_attempts=1)
    def nul_result() -> Any:
        return {"out": ["fine", "a\x00b"]}

    @app.task(name="tests.surrogate_result", max_attempts=1)
    def surrogate_result() -> Any:
        return "half a pair: \ud800"

    @app.task(name="tests.nul_error", max_attempts=1)
    def nul_error() -> Any:
        raise ValueError("bad byte: \x00 here")

    @app.task(name="tests.fine", max_attempts=1)
    def fine() -> Any:
        return "ok"

    jobs = [app.enqueue(name) for name in ("tests.nul_result", "tests.surrogate_result",
                                           "tests.nul_error", "tests.fine")]  # fmt: skip
    async with app.worker(concurrency=4) as worker:
        while len((await worker.run_once()).outcomes) > 0:
            pass
    nul, surrogate, error, ok = (app.get_job(j.id) for j in jobs)
    assert nul.state is JobState.DEAD_LETTER and nul.error is not None
    assert "NUL" in nul.error.message and "value.out[1]" in nul.error.message
    assert surrogate.state is JobState.DEAD_LETTER and surrogate.error is not None
    assert "surrogate" in surrogate.error.message
    assert error.state is JobState.DEAD_LETTER and error.error is not None
    assert error.error.message == "bad byte: \ufffd here"
    assert ok.state is JobState.SUCCEEDED and ok.result == "ok"
