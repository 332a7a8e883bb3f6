"""The REST API on real PostgreSQL: the route table, problem details, jobs, queues,
schedules, users, invites, settings, variables, metrics."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import httpx
import jwt
import pytest

from tickwork import App, JobState
from tickwork.api import create_api
from tickwork.api.security import ROUTE_ROLES, api_routes
from tickwork.auth import AuthService, Role
from tickwork.errors import ConfigError

from .api_support import BASE_URL, PASSWORD, Api, email, problem, start_api


@pytest.fixture
async def api(app: App) -> AsyncIterator[Api]:
    @app.task(name="tests.echo", queue="api-tests")
    def echo(word: str = "hi") -> str:
        return word

    async for found in start_api(app):
        yield found


# -- the role matrix --------------------------------------------------------------------


def test_every_route_is_in_the_role_table(api: Api) -> None:
    assert api_routes(api.api) == set(ROUTE_ROLES)


# The role matrix over every route is in test_security_figures.py (sessions and API
# tokens of every role, generated from ROUTE_ROLES).


async def test_forged_tokens_are_refused(api: Api) -> None:
    claims = jwt.decode(api.tokens[Role.ADMIN], options={"verify_signature": False})
    forged = {
        "alg none": jwt.encode(claims, key="", algorithm="none"),
        "other key": jwt.encode(claims, key="x" * 40, algorithm="HS256"),
        "garbage": "not-a-token",
    }
    for label, token in forged.items():
        answer = await api.client.get("/api/me", headers={"Authorization": f"Bearer {token}"})
        assert problem(answer, 401), label
        assert answer.headers["www-authenticate"] == "Bearer"


# -- jobs and queues ----------------------------------------------------------------------


async def test_the_api_enqueues_for_tasks_its_workers_define_and_names_unknown_ones(
    api: Api, database_url: str, schema: str
) -> None:
    operator = api.headers(Role.OPERATOR)
    body = {"task": "only.on.workers", "args": {"n": 1}}
    unknown = problem(await api.client.post("/api/jobs", json=body, headers=operator), 400)
    assert "only.on.workers" in unknown["detail"] and "tests.echo" in unknown["detail"]
    assert "tickwork worker --app" in unknown["detail"]  # what to do about it

    fleet = App(database_url=database_url, schema=schema)  # a worker process's app

    @fleet.task(name="only.on.workers", queue="far", max_attempts=7, timeout=9.0)
    def far(n: int) -> int:
        return n

    try:
        async with fleet.worker(queues=["far"]):  # registered: its tasks are known
            made = await api.client.post("/api/jobs", json=body, headers=operator)
            assert made.status_code == 201, made.text
            job = made.json()  # the options the worker's task gives its jobs
            assert (job["queue"], job["max_attempts"], job["timeout"]) == ("far", 7, 9.0)
            scheduled = await api.client.post(
                "/api/schedules",
                json={"name": "far-nightly", "task": "only.on.workers", "cron": "0 3 * * *"},
                headers=api.headers(Role.ADMIN),
            )
            assert scheduled.status_code == 201, scheduled.text
        async with fleet.worker(queues=["far"]) as worker:
            (outcome,) = (await worker.run_once()).outcomes
        assert outcome.job_id == job["id"] and outcome.job_state is JobState.SUCCEEDED
        fired = await api.client.post("/api/schedules/far-nightly/trigger", headers=operator)
        assert fired.status_code in (200, 201), fired.text
        assert fired.json()["queue"] == "far"  # the schedule took the worker's task options
    finally:
        await fleet.aclose()


async def test_what_a_worker_recorded_cannot_break_an_enqueue_or_a_schedule(
    api: Api, sql: Any
) -> None:
    """A workers row of another release (other limits), or written by hand: the values an
    enqueue refuses are ignored, the rest are taken."""
    recorded = {
        "odd.one": {"queue": "ok", "priority": 500, "max_attempts": 0, "timeout": -1},
        "odd.two": "not an object",
    }
    sql.execute(
        "INSERT INTO workers (id, host, pid, queues, concurrency, tasks, task_options)"
        " VALUES (gen_random_uuid(), 'h', 1, '{ok}', 1, '{odd.one,odd.two}', %s)",
        [json.dumps(recorded)],
    )
    operator, admin = api.headers(Role.OPERATOR), api.headers(Role.ADMIN)
    one = await api.client.post("/api/jobs", json={"task": "odd.one"}, headers=operator)
    assert one.status_code == 201, one.text
    assert (one.json()["queue"], one.json()["priority"], one.json()["max_attempts"]) == (
        "ok",
        0,
        5,
    )
    two = await api.client.post("/api/jobs", json={"task": "odd.two"}, headers=operator)
    assert two.status_code == 201 and two.json()["queue"] == "default", two.text
    made = await api.client.post(
        "/api/schedules",
        json={"name": "odd-nightly", "task": "odd.one", "cron": "0 3 * * *"},
        headers=admin,
    )
    assert made.status_code == 201, made.text
    fired = await api.client.post("/api/schedules/odd-nightly/trigger", headers=operator)
    assert fired.status_code in (200, 201) and fired.json()["priority"] == 0, fired.text


async def test_enqueue_list_detail_cancel_retry(api: Api) -> None:
    operator, viewer = api.headers(Role.OPERATOR), api.headers(Role.VIEWER)
    made = await api.client.post(
        "/api/jobs", json={"task": "tests.echo", "args": {"word": "yo"}}, headers=operator
    )
    assert made.status_code == 201, made.text
    job = made.json()
    assert job["state"] == "PENDING" and job["created_by"] == f"user:{email(Role.OPERATOR)}"

    listed = await api.client.get(
        "/api/jobs", params={"state": "PENDING", "queue": "api-tests"}, headers=viewer
    )
    assert [j["id"] for j in listed.json()["items"]] == [job["id"]]
    assert listed.json()["next_cursor"] is None

    result = await api.app.worker(queues=["api-tests"]).run_once()
    assert result.claimed == 1
    detail = (await api.client.get(f"/api/jobs/{job['id']}", headers=viewer)).json()
    assert detail["state"] == "SUCCEEDED" and detail["result"] == "yo"
    assert [e["state"] for e in detail["executions"]] == ["SUCCEEDED"]
    timeline = (await api.client.get(f"/api/jobs/{job['id']}/timeline", headers=viewer)).json()
    worker = f"worker:{detail['executions'][0]['worker_id']}"
    assert [(t["event"], t["actor"], t["attempt"]) for t in timeline] == [
        ("job.created", f"user:{email(Role.OPERATOR)}", None),  # with its audit event, at once
        ("job.enqueued", f"user:{email(Role.OPERATOR)}", None),
        ("attempt.claimed", worker, 1),
        ("attempt.succeeded", worker, 1),
    ]
    problem(await api.client.get("/api/jobs/987654321/timeline", headers=viewer), 404)

    conflict = problem(await api.client.post(f"/api/jobs/{job['id']}/retry", headers=operator), 409)
    assert "SUCCEEDED" in conflict["detail"]
    problem(await api.client.post("/api/jobs/987654321/cancel", headers=operator), 404)

    second = (
        await api.client.post("/api/jobs", json={"task": "tests.echo"}, headers=operator)
    ).json()
    cancelled = await api.client.post(f"/api/jobs/{second['id']}/cancel", headers=operator)
    assert cancelled.json()["state"] == "CANCELLED"
    retried = await api.client.post(f"/api/jobs/{second['id']}/retry", headers=operator)
    assert problem(retried, 409)


async def test_unknown_filter_values_are_refused_not_ignored(api: Api) -> None:
    viewer = api.headers(Role.VIEWER)
    body = problem(await api.client.get("/api/jobs", params={"state": "DONE"}, headers=viewer), 400)
    assert body["field"] == "state" and "'DONE'" in body["detail"]
    bad_queue = await api.client.get("/api/jobs", params={"queue": "no spaces"}, headers=viewer)
    assert problem(bad_queue, 400)["field"] == "queue"
    naive = await api.client.get(
        "/api/jobs", params={"created_from": "2026-01-01T00:00:00"}, headers=viewer
    )
    assert problem(naive, 400)["field"] == "created_from"
    limit = await api.client.get("/api/jobs", params={"limit": 0}, headers=viewer)
    assert problem(limit, 400)["field"] == "limit"
    unknown_task = await api.client.post(
        "/api/jobs", json={"task": "nope"}, headers=api.headers(Role.OPERATOR)
    )
    assert "not a registered task" in problem(unknown_task, 400)["detail"]


async def test_pages_follow_the_cursor(api: Api) -> None:
    api.app.enqueue_many([{"task": "tests.echo"} for _ in range(5)])
    seen: list[int] = []
    cursor = None
    while True:
        params: dict[str, Any] = {"limit": 2} | ({"before_id": cursor} if cursor else {})
        page = (
            await api.client.get("/api/jobs", params=params, headers=api.headers(Role.VIEWER))
        ).json()
        seen += [j["id"] for j in page["items"]]
        cursor = page["next_cursor"]
        if cursor is None:
            break
    assert seen == sorted(seen, reverse=True) and len(seen) == len(set(seen)) == 5


async def test_bulk_retry_and_cancel_by_filter(api: Api) -> None:
    jobs = api.app.enqueue_many([{"task": "tests.echo"} for _ in range(3)])
    operator = api.headers(Role.OPERATOR)
    done = await api.client.post(
        "/api/jobs/bulk/cancel", json={"state": ["PENDING"], "queue": "api-tests"}, headers=operator
    )
    assert done.json() == {"matched": 3, "changed": sorted(j.id for j in jobs), "refused": []}
    assert all(api.app.get_job(j.id).state is JobState.CANCELLED for j in jobs)
    again = await api.client.post(
        "/api/jobs/bulk/retry", json={"state": ["CANCELLED"]}, headers=operator
    )
    assert again.json() == {"matched": 3, "changed": [], "refused": []}  # not from CANCELLED
    extra = await api.client.post("/api/jobs/bulk/retry", json={"colour": "red"}, headers=operator)
    assert problem(extra, 400)["field"] == "colour"


async def test_bulk_actions_refuse_an_empty_filter_unless_all_is_said(api: Api) -> None:
    jobs = api.app.enqueue_many([{"task": "tests.echo"} for _ in range(2)])
    operator = api.headers(Role.OPERATOR)
    # red team: `{}` (or a filter lost on the way: nulls, an empty state list) cancelled every job
    for body in ({}, {"state": None, "queue": None}, {"state": []}, {"all": False}):
        for operation in ("cancel", "retry"):
            refused = await api.client.post(
                f"/api/jobs/bulk/{operation}", json=body, headers=operator
            )
            assert problem(refused, 400)["field"] == "all", (operation, body)
            assert "all: true" in refused.json()["detail"]
    assert all(api.app.get_job(j.id).state is JobState.PENDING for j in jobs)
    done = await api.client.post("/api/jobs/bulk/cancel", json={"all": True}, headers=operator)
    assert done.json() == {"matched": 2, "changed": sorted(j.id for j in jobs), "refused": []}


async def test_paused_queue_is_not_claimed_and_the_pause_is_stored(api: Api) -> None:
    job = api.app.enqueue("tests.echo")
    operator = api.headers(Role.OPERATOR)
    assert (
        await api.client.post("/api/queues/api-tests/pause", headers=operator)
    ).status_code == 204
    assert (await api.app.worker(queues=["api-tests"]).run_once()).claimed == 0
    queues = (await api.client.get("/api/queues", headers=api.headers(Role.VIEWER))).json()
    assert {"name": "api-tests", "paused": True, "pending": 1}.items() <= queues[0].items()
    assert (
        await api.client.post("/api/queues/api-tests/resume", headers=operator)
    ).status_code == 204
    assert (await api.app.worker(queues=["api-tests"]).run_once()).claimed == 1
    assert api.app.get_job(job.id).state is JobState.SUCCEEDED
    events = (
        await api.client.get("/api/audit", params={"target_type": "queue"}, headers=operator)
    ).json()
    assert [e["event_type"] for e in events["items"]] == ["queue.resumed", "queue.paused"]
    assert events["items"][0]["actor"] == f"user:{email(Role.OPERATOR)}"


# -- schedules ----------------------------------------------------------------------------


async def test_schedule_lifecycle(api: Api, sql: Any) -> None:
    sql.execute("TRUNCATE schedules")
    admin, operator = api.headers(Role.ADMIN), api.headers(Role.OPERATOR)
    definition = {
        "name": "nightly",
        "task": "tests.echo",
        "cron": "0 3 * * *",
        "timezone": "Europe/Berlin",
    }
    made = await api.client.post("/api/schedules", json=definition, headers=admin)
    assert made.status_code == 201, made.text
    assert made.json()["origin"] == "api"
    problem(await api.client.post("/api/schedules", json=definition, headers=admin), 409)
    bad = await api.client.post(
        "/api/schedules", json=definition | {"name": "x", "cron": "61 * * * *"}, headers=admin
    )
    assert problem(bad, 400)
    bad_zone = await api.client.post(
        "/api/schedules", json=definition | {"name": "y", "timezone": "Mars/Base"}, headers=admin
    )
    assert problem(bad_zone, 400)

    edited = await api.client.patch(
        "/api/schedules/nightly", json={"cron": "30 4 * * *"}, headers=admin
    )
    assert edited.status_code == 200, edited.text
    assert edited.json()["cron"] == "30 4 * * *"
    assert edited.json()["next_run_at"] != made.json()["next_run_at"]

    paused = await api.client.post("/api/schedules/nightly/pause", headers=operator)
    assert paused.json()["paused"] is True
    triggered = await api.client.post("/api/schedules/nightly/trigger", headers=operator)
    assert triggered.status_code == 201 and triggered.json()["task"] == "tests.echo"
    listed = await api.client.get("/api/jobs", params={"schedule": "nightly"}, headers=operator)
    assert [j["id"] for j in listed.json()["items"]] == [triggered.json()["id"]]

    assert (await api.client.delete("/api/schedules/nightly", headers=admin)).status_code == 204
    problem(await api.client.get("/api/schedules/nightly", headers=operator), 404)
    events = (
        await api.client.get("/api/audit", params={"target_id": "nightly"}, headers=admin)
    ).json()
    assert [e["event_type"] for e in reversed(events["items"])] == [
        "schedule.created",
        "schedule.edited",
        "schedule.paused",
        "schedule.triggered",
        "schedule.deleted",
    ]


async def test_a_schedule_defined_in_code_is_not_edited_through_the_api(api: Api, sql: Any) -> None:
    sql.execute("TRUNCATE schedules")
    api.app.add_schedule("from-code", "tests.echo", "* * * * *")
    pool = await api.app.db.async_pool()
    definer = api.app.worker(queues=["none"])
    await definer.open()  # a live worker whose code defines the schedule
    await api.app.scheduler_service(pool).scheduler.sync(
        list(api.app.schedules.values()), defined_by=definer.id
    )
    answer = await api.client.patch(
        "/api/schedules/from-code", json={"cron": "5 * * * *"}, headers=api.headers(Role.ADMIN)
    )
    assert "defined in code" in problem(answer, 409)["detail"]
    refused = await api.client.delete("/api/schedules/from-code", headers=api.headers(Role.ADMIN))
    assert "remove it from that code" in problem(refused, 409)["detail"]
    await definer.close()  # its code is gone: the schedule is the operator's to delete
    gone = await api.client.delete("/api/schedules/from-code", headers=api.headers(Role.ADMIN))
    assert gone.status_code == 204, gone.text


# -- identity -----------------------------------------------------------------------------


async def test_role_change_takes_effect_and_revokes_refresh_tokens(api: Api) -> None:
    me = (await api.client.get("/api/me", headers=api.headers(Role.VIEWER))).json()
    assert me["role"] == "VIEWER"
    changed = await api.client.patch(
        f"/api/users/{me['id']}", json={"role": "OPERATOR"}, headers=api.headers(Role.ADMIN)
    )
    assert changed.json()["role"] == "OPERATOR"
    stale = await api.client.post(
        "/api/auth/refresh", json={"refresh_token": api.refresh[Role.VIEWER]}
    )
    problem(stale, 401)
    fresh = await api.login(email(Role.VIEWER))
    claims = jwt.decode(fresh.json()["access_token"], options={"verify_signature": False})
    assert claims["roles"] == ["OPERATOR"]


async def test_unknown_and_wrong_logins_answer_alike(api: Api) -> None:
    unknown = problem(await api.login("nobody@example.com"), 401)
    wrong = problem(await api.login(email(Role.VIEWER), "not the password at all"), 401)
    assert unknown["detail"] == wrong["detail"]
    assert PASSWORD not in unknown["detail"]


async def test_invite_accept_login(api: Api) -> None:
    admin = api.headers(Role.ADMIN)
    made = await api.client.post(
        "/api/invites", json={"email": "new@example.com", "role": "OPERATOR"}, headers=admin
    )
    assert made.status_code == 201, made.text
    token = made.json()["token"]
    tampered = await api.client.post(
        "/api/invites/accept", json={"token": token, "password": PASSWORD, "role": "ADMIN"}
    )
    assert problem(tampered, 400)["field"] == "role"
    accepted = await api.client.post(
        "/api/invites/accept", json={"token": token, "name": "New", "password": PASSWORD}
    )
    assert accepted.status_code == 201 and accepted.json()["role"] == "OPERATOR"
    again = await api.client.post(
        "/api/invites/accept", json={"token": token, "password": PASSWORD}
    )
    problem(again, 401)
    assert (await api.login("new@example.com")).status_code == 200
    listed = (await api.client.get("/api/invites", headers=admin)).json()
    assert listed[0]["accepted_at"] is not None and "token" not in listed[0]


async def test_personal_api_token_is_shown_once_and_capped(api: Api) -> None:
    operator = api.headers(Role.OPERATOR)
    above = await api.client.post(
        "/api/me/tokens", json={"name": "ci", "role": "ADMIN"}, headers=operator
    )
    problem(above, 403)
    made = await api.client.post("/api/me/tokens", json={"name": "ci"}, headers=operator)
    assert made.status_code == 201 and made.json()["api_token"]["role"] == "OPERATOR"
    secret = made.json()["token"]
    auth = {"Authorization": f"Bearer {secret}"}
    assert (await api.client.post("/api/queues/x/pause", headers=auth)).status_code == 204
    listed = (await api.client.get("/api/me/tokens", headers=operator)).text
    assert secret not in listed
    token_id = made.json()["api_token"]["id"]
    assert (
        await api.client.delete(f"/api/me/tokens/{token_id}", headers=operator)
    ).status_code == 204
    problem(await api.client.get("/api/queues", headers=auth), 401)


async def test_an_api_token_cannot_mint_a_stronger_one(api: Api) -> None:
    """An ADMIN's VIEWER-scoped token (handed to a dashboard, say) asking for an ADMIN
    token is refused: a token's role is capped by the credential that makes it, not only
    by its owner's role."""
    made = await api.client.post(
        "/api/me/tokens",
        json={"name": "read-only", "role": "VIEWER"},
        headers=api.headers(Role.ADMIN),
    )
    scoped = {"Authorization": f"Bearer {made.json()['token']}"}
    problem(await api.client.get("/api/users", headers=scoped), 403)
    escalated = await api.client.post(
        "/api/me/tokens", json={"name": "up", "role": "ADMIN"}, headers=scoped
    )
    assert "VIEWER" in problem(escalated, 403)["detail"]
    same = await api.client.post("/api/me/tokens", json={"name": "same"}, headers=scoped)
    assert same.status_code == 201 and same.json()["api_token"]["role"] == "VIEWER"


async def test_metrics_statements_setting_chooses_the_reported_statement_times(
    app: App,
) -> None:
    pool = await app.db.async_pool()
    auth = AuthService(pool, app.db.store, app.settings.auth)
    await auth.start()
    for setting, shown in (("all", True), ("none", False), (["queue_stats"], True)):
        app.settings.metrics.statement_times = setting
        api = create_api(app, auth, pool)
        transport = httpx.ASGITransport(app=api)
        async with httpx.AsyncClient(transport=transport, base_url=BASE_URL) as client:
            await client.get("/metrics")  # runs queue_stats once at least
            text = (await client.get("/metrics")).text
        assert ('statement="queue_stats"' in text) is shown, setting
        assert "tickwork_statement_seconds" in text  # the family itself, even when empty
    app.settings.metrics.statement_times = ["job_claim", "no_such_statement"]
    with pytest.raises(ConfigError, match="no_such_statement"):
        create_api(app, auth, pool)


async def test_readyz_on_an_unmigrated_schema_is_503_not_500(api: Api, database_url: str) -> None:
    bare = App(database_url=database_url, schema="tickwork_never_migrated")
    try:
        pool = await bare.db.async_pool()
        served = create_api(bare, AuthService(pool, bare.db.store, bare.settings.auth), pool)
        transport = httpx.ASGITransport(app=served)
        async with httpx.AsyncClient(transport=transport, base_url=BASE_URL) as client:
            answer = await client.get("/readyz")
        assert problem(answer, 503)["title"] == "Database unavailable"
        assert answer.headers["retry-after"].isdigit()
    finally:
        await bare.aclose()


async def test_refresh_cookie_is_http_only_strict_and_checks_origin(api: Api) -> None:
    answer = await api.client.post(
        "/api/auth/login",
        json={"email": email(Role.VIEWER), "password": PASSWORD, "cookie": True},
    )
    assert answer.status_code == 200 and answer.json()["refresh_token"] is None
    cookie = answer.headers["set-cookie"].lower()
    assert "httponly" in cookie and "samesite=strict" in cookie and "path=/api/auth" in cookie
    assert "secure" not in cookie  # served over plain http here
    foreign = await api.client.post("/api/auth/refresh", headers={"Origin": "https://evil.example"})
    problem(foreign, 403)
    missing = await api.client.post("/api/auth/refresh")
    problem(missing, 403)
    same = await api.client.post("/api/auth/refresh", headers={"Origin": BASE_URL})
    assert same.status_code == 200, same.text
    assert same.json()["refresh_token"] is None and "set-cookie" in same.headers


async def test_refresh_cookie_is_secure_behind_an_https_public_url(
    database_url: str, schema: str, clean: None
) -> None:
    app = App(database_url=database_url, schema=schema, api={"public_url": "https://jobs.example"})
    async for api in start_api(app):
        answer = await api.client.post(
            "/api/auth/login",
            json={"email": email(Role.VIEWER), "password": PASSWORD, "cookie": True},
        )
        set_cookie = answer.headers["set-cookie"]
        assert "; secure" in set_cookie.lower()
        # A client only sends a Secure cookie over https: hand it over as the browser would.
        pair = set_cookie.split(";", 1)[0]
        public = await api.client.post(
            "/api/auth/refresh", headers={"Origin": "https://jobs.example", "Cookie": pair}
        )
        assert public.status_code == 200, public.text  # the public origin is this server too
    await app.aclose()


# -- settings, variables, metrics, health -------------------------------------------------


async def test_settings_are_validated_and_audited(api: Api) -> None:
    admin = api.headers(Role.ADMIN)
    unknown = await api.client.put("/api/settings/colour", json={"value": 1}, headers=admin)
    assert problem(unknown, 400)["field"] == "key"
    negative = await api.client.put(
        "/api/settings/retention.finished_after", json={"value": -5}, headers=admin
    )
    assert problem(negative, 400)
    done = await api.client.put(
        "/api/settings/retention.finished_after", json={"value": 3600}, headers=admin
    )
    assert done.json()["value"] == 3600 and done.json()["default"] == 86400
    listed = {s["key"]: s for s in (await api.client.get("/api/settings", headers=admin)).json()}
    assert listed["retention.finished_after"]["value"] == 3600


async def test_secret_variable_value_is_never_returned(api: Api) -> None:
    admin = api.headers(Role.ADMIN)
    stored = await api.client.put(
        "/api/variables/API_KEY", json={"value": "s3cr3t-value", "secret": True}, headers=admin
    )
    assert stored.status_code == 200 and stored.json()["value"] is None
    plain = await api.client.put("/api/variables/REGION", json={"value": "eu-west"}, headers=admin)
    assert plain.json()["value"] == "eu-west"
    listing = await api.client.get("/api/variables", headers=api.headers(Role.VIEWER))
    assert "s3cr3t-value" not in listing.text
    audit = await api.client.get("/api/audit", params={"target_type": "variable"}, headers=admin)
    assert "s3cr3t-value" not in audit.text and len(audit.json()["items"]) == 2
    bad = await api.client.put("/api/variables/has space", json={"value": "x"}, headers=admin)
    assert problem(bad, 400)["field"] == "name"


async def test_metrics_health_and_openapi(api: Api) -> None:
    api.app.enqueue("tests.echo")
    # one slot (and so one thread): the plain job_claim, not the capped one
    await api.app.worker(queues=["api-tests"], concurrency=1).run_once()
    text = (await api.client.get("/metrics")).text
    assert 'tickwork_jobs{queue="api-tests",state="SUCCEEDED"} 1.0' in text
    assert 'tickwork_attempts_finished_total{outcome="SUCCEEDED",task="tests.echo"}' in text
    assert "tickwork_pickup_latency_seconds_bucket" in text
    # the job path's statements are timed under their names (metrics.statement_times = job_path)
    assert 'tickwork_statement_seconds_count{statement="job_claim"}' in text
    assert 'tickwork_statement_seconds_bucket{le="+Inf",statement="job_complete_many"}' in text
    assert 'statement="queue_stats"' not in text  # ran for this scrape, not on the job path
    # every state of a known queue reads, 0 included: an alert on `== 0` can fire
    for state in JobState:
        if state is not JobState.SUCCEEDED:
            assert f'tickwork_jobs{{queue="api-tests",state="{state.value}"}} 0.0' in text
    # no series names a process (a pid or start time per restart), none ends in _created
    assert "_created" not in text
    assert [line for line in text.splitlines() if line.startswith("tickwork_lease_held{")] == [
        line for line in text.splitlines() if line.startswith("tickwork_lease_held{lease=")
    ]
    assert "holder=" not in "".join(
        line for line in text.splitlines() if line.startswith("tickwork_lease_held")
    )
    assert (await api.client.get("/healthz")).json() == {"status": "ok"}
    ready = (await api.client.get("/readyz")).json()
    assert ready["status"] == "ready" and ready["schema_version"] >= 4
    document = (await api.client.get("/api/openapi.json")).json()
    assert "Problem" in document["components"]["schemas"]
    # one record, one name: FastAPI names two models of one name after their modules
    assert [name for name in document["components"]["schemas"] if "__" in name] == []
    assert "/api/jobs/{job_id}/retry" in document["paths"]
    queue = document["components"]["schemas"]["QueueStats"]  # the record itself, not a copy
    assert {"unserved", "oldest_pending_seconds"} <= set(queue["properties"])
    assert "tasks" in document["components"]["schemas"]["WorkerInfo"]["properties"]
