"""The security claims of docs/security.md, attacked and measured: forged access tokens,
replayed refresh tokens, the role matrix, login timing and throttling, the refresh cookie and
its origin check, a corpus of bad inputs in every parameter of every operation, and a canary
secret that must never come back. Each test asserts its invariant (0 forged tokens accepted,
0 answers of 5xx, 0 canary sightings) and records what it measured with ``record()``."""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
import random
import statistics
import time
import traceback
from collections import Counter
from collections.abc import AsyncIterator
from typing import Any
from urllib.parse import urlencode

import httpx
import jwt
import psycopg
import pytest
from psycopg.conninfo import make_conninfo

from tickwork import App
from tickwork.api.security import ROUTE_ROLES, api_routes
from tickwork.auth import Role
from tickwork.auth.tokens import REQUIRED_CLAIMS
from tickwork.config import load_settings
from tickwork.errors import ConfigError, DatabaseUnavailable
from tickwork.signals import Reactor, ReactorContext, Signal

from ..figures import record, scale
from .api_support import BASE_URL, PASSWORD, Api, email, start_api
from .security_support import (
    CORPUS,
    WHOLE_BODIES,
    Answer,
    Bad,
    Operation,
    Param,
    as_text,
    asgi_call,
    b64url,
    encode_body,
    encode_path,
    encode_query,
    every_log_record,
    generic,
    hs_token,
    operations,
    raw_token,
    segment,
    served,
)

DOC = "security"
PROBLEM = "application/problem+json"
OTHER_PASSWORD = "not the password at all"
NO_SUCH_ID = "987654321"


@pytest.fixture
async def api(app: App) -> AsyncIterator[Api]:
    register_echo(app)
    async for found in start_api(app):
        yield found


def register_echo(app: App) -> None:
    @app.task(name="tests.echo", queue="fuzz-queue")
    def echo(word: str = "hi") -> str:
        return word


def client_of(api: Any, **options: Any) -> httpx.AsyncClient:
    """A client of ``api`` that gets a 500 as an answer rather than the app's exception."""
    transport = httpx.ASGITransport(app=api, raise_app_exceptions=False)
    return httpx.AsyncClient(transport=transport, base_url=BASE_URL, **options)


@pytest.fixture
async def client(api: Api) -> AsyncIterator[httpx.AsyncClient]:
    async with client_of(api.api) as found:
        yield found


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def claims_of(token: str) -> dict[str, Any]:
    found: dict[str, Any] = jwt.decode(token, options={"verify_signature": False})
    return found


def is_problem(answer: httpx.Response, status: int) -> bool:
    """``answer`` is a problem (RFC 9457) of ``status``."""
    if answer.status_code != status:
        return False
    if not answer.headers.get("content-type", "").startswith(PROBLEM):
        return False
    body = answer.json()
    return bool(body.get("status") == status and body.get("detail"))


def refused_401(answer: httpx.Response) -> bool:
    """The one answer to a bad token: 401, a problem, ``WWW-Authenticate: Bearer``."""
    return is_problem(answer, 401) and answer.headers.get("www-authenticate") == "Bearer"


# -- 1. forged access tokens ---------------------------------------------------------------

ATTACK_TARGETS = (
    ("GET", "/api/me"),  # VIEWER
    ("POST", "/api/queues/jwt-attack/pause"),  # OPERATOR, mutating
    ("GET", "/api/users"),  # ADMIN
)


async def test_forged_access_tokens_are_refused(api: Api, client: httpx.AsyncClient) -> None:
    """Every forgery of an access token (another algorithm, another key, altered claims,
    header injection, another user's session, a user disabled since) answers 401 with
    ``WWW-Authenticate: Bearer`` on a VIEWER, an OPERATOR and an ADMIN route. Forgeries
    signed with the real key check the session check's own defences (a leaked key)."""
    key = api.auth._signing_key.encode()
    now = int(time.time())
    viewer_token = api.tokens[Role.VIEWER]
    viewer = claims_of(viewer_token)
    admin = claims_of(api.tokens[Role.ADMIN])
    operator = claims_of(api.tokens[Role.OPERATOR])
    header_part, payload_part, viewer_signature = viewer_token.split(".")
    admin_header, admin_payload, _ = api.tokens[Role.ADMIN].split(".")
    elevated = viewer | {"roles": ["ADMIN"]}
    hs256 = {"alg": "HS256", "typ": "JWT"}
    attacker = b"an attacker's own key, long enough for HS256"

    def right(claims: dict[str, Any], header: dict[str, Any] = hs256) -> str:
        return hs_token(header, claims, key, hashlib.sha256)

    def without(claim: str) -> dict[str, Any]:
        return {k: v for k, v in viewer.items() if k != claim}

    attacks: dict[str, str] = {}
    for alg in ("none", "None", "NONE", "nOnE"):
        attacks[f"alg {alg}, no signature"] = raw_token({"alg": alg, "typ": "JWT"}, elevated, "")
        attacks[f"alg {alg}, the real signature kept"] = raw_token(
            {"alg": alg, "typ": "JWT"}, viewer, viewer_signature
        )
    attacks["HS512 with the right key"] = hs_token(
        {"alg": "HS512", "typ": "JWT"}, viewer, key, hashlib.sha512
    )
    attacks["HS384 with the right key"] = hs_token(
        {"alg": "HS384", "typ": "JWT"}, viewer, key, hashlib.sha384
    )
    attacks["HS256 with another key"] = hs_token(hs256, viewer, attacker, hashlib.sha256)
    attacks["HS256 with an empty key"] = hs_token(hs256, viewer, b"", hashlib.sha256)
    attacks["RS256 header, garbage signature"] = raw_token(
        {"alg": "RS256", "typ": "JWT"}, viewer, b64url(b"\x01garbage" * 32)
    )
    attacks["ES256 header, garbage signature"] = raw_token(
        {"alg": "ES256", "typ": "JWT"}, viewer, b64url(bytes(range(64)))
    )
    attacks["RS256 header, HMAC by the right key (algorithm confusion)"] = right(
        viewer, {"alg": "RS256", "typ": "JWT"}
    )
    attacks["wrong iss"] = right(viewer | {"iss": "https://evil.example"})
    attacks["wrong aud"] = right(viewer | {"aud": "another-service"})
    attacks["expired"] = right(viewer | {"iat": now - 3600, "exp": now - 60})
    attacks["iat far in the future"] = right(viewer | {"iat": now + 10**7, "exp": now + 10**7})
    attacks["nbf far in the future"] = right(viewer | {"nbf": now + 10**7})
    attacks["exp not a number"] = right(viewer | {"exp": "never"})
    for claim in (*REQUIRED_CLAIMS, "email", "roles"):
        attacks[f"no {claim} claim"] = right(without(claim))
    attacks["roles elevated, payload re-encoded, the real signature kept"] = (
        f"{header_part}.{segment(elevated)}.{viewer_signature}"
    )
    attacks["the admin's header and claims with the viewer's signature"] = (
        f"{admin_header}.{admin_payload}.{viewer_signature}"
    )
    attacks["roles as a string"] = right(viewer | {"roles": "ADMIN"})
    attacks["two roles"] = right(viewer | {"roles": ["VIEWER", "ADMIN"]})
    attacks["no role"] = right(viewer | {"roles": []})
    attacks["an unknown role"] = right(viewer | {"roles": ["ROOT"]})
    attacks["a lower-case role"] = right(viewer | {"roles": ["admin"]})
    attacks["kid path traversal, signed with an empty key"] = hs_token(
        hs256 | {"kid": "../../../../../../dev/null"}, elevated, b"", hashlib.sha256
    )
    attacks["kid SQL injection naming the attacker's key"] = hs_token(
        hs256 | {"kid": "x' UNION SELECT 'attacker' --"}, elevated, b"attacker", hashlib.sha256
    )
    attacks["jku pointing at the attacker's keys"] = hs_token(
        hs256 | {"jku": "https://evil.example/jwks.json"}, elevated, attacker, hashlib.sha256
    )
    attacks["jwk header with the attacker's oct key"] = hs_token(
        hs256 | {"jwk": {"kty": "oct", "k": b64url(attacker)}}, elevated, attacker, hashlib.sha256
    )
    attacks["jwk header with an RSA key, RS256"] = raw_token(
        {"alg": "RS256", "jwk": {"kty": "RSA", "e": "AQAB", "n": b64url(bytes(range(256)))}},
        elevated,
        b64url(bytes(range(256))),
    )
    attacks["x5u pointing at the attacker's certificate"] = hs_token(
        hs256 | {"x5u": "https://evil.example/cert.pem"}, elevated, attacker, hashlib.sha256
    )
    attacks["100 KB token, another key"] = hs_token(
        hs256, viewer | {"pad": "x" * 100_000}, attacker, hashlib.sha256
    )
    attacks["100 KB of base64"] = "eyJ" + "A" * 100_000 + ".e30.AAAA"
    attacks["header and claims, no signature part"] = f"{header_part}.{payload_part}"
    attacks["empty signature"] = f"{header_part}.{payload_part}."
    attacks["five parts (JWE shape)"] = f"{header_part}.{payload_part}.{viewer_signature}.a.b"
    attacks["not base64"] = "!!!.???.***"
    attacks["garbage"] = "not-a-token"
    attacks["another user's session id, right key"] = right(viewer | {"sid": operator["sid"]})
    attacks["the admin's user id in the viewer's session, right key"] = right(
        viewer | {"sub": admin["sub"], "email": admin["email"], "roles": ["ADMIN"]}
    )
    attacks["an unknown session, right key"] = right(
        viewer | {"sid": "00000000-0000-4000-8000-000000000000"}
    )
    attacks["session id not a UUID, right key"] = right(viewer | {"sid": "' OR 1=1 --"})
    attacks["sub not a user id, right key"] = right(viewer | {"sub": "1 OR 1=1"})
    attacks["sub as a JSON number, right key"] = right(viewer | {"sub": int(viewer["sub"])})
    attacks["sub a superscript digit, right key"] = right(viewer | {"sub": "\u00b2"})
    attacks["sub beyond bigint, right key"] = right(viewer | {"sub": "9" * 30})
    attacks["roles elevated, re-signed with the right key"] = right(elevated)
    attacks["a refresh token as a bearer"] = api.refresh[Role.VIEWER]
    attacks["an unknown API token"] = "twk_" + "A" * 43
    attacks["an API token of SQL"] = "twk_' OR 1=1 --"

    admin_headers = api.headers(Role.ADMIN)
    invite = await client.post(
        "/api/invites",
        json={"email": "invited@example.com", "role": "ADMIN"},
        headers=admin_headers,
    )
    attacks["an invite token as a bearer"] = invite.json()["token"]

    # tokens that were good until something happened to their user or session
    for label, role in (("disabled", Role.OPERATOR), ("demoted", Role.ADMIN)):
        await api.auth.create_user(f"{label}@example.com", PASSWORD, role)
    await api.auth.create_user("loggedout@example.com", PASSWORD, Role.OPERATOR)
    disabled_pair = (await api.login("disabled@example.com")).json()
    demoted_pair = (await api.login("demoted@example.com")).json()
    out_pair = (await api.login("loggedout@example.com")).json()
    made = await client.post(
        "/api/me/tokens",
        json={"name": "owner disabled"},
        headers=bearer(disabled_pair["access_token"]),
    )
    revoked = await client.post(
        "/api/me/tokens", json={"name": "revoked"}, headers=bearer(out_pair["access_token"])
    )
    for pair in (disabled_pair, demoted_pair):
        assert (
            await client.get("/api/me", headers=bearer(pair["access_token"]))
        ).status_code == 200
    users = {
        u["email"]: u["id"] for u in (await client.get("/api/users", headers=admin_headers)).json()
    }
    edits = [
        ("disabled@example.com", {"disabled": True}),
        ("demoted@example.com", {"role": "VIEWER"}),
    ]
    for who, edit in edits:
        done = await client.patch(f"/api/users/{users[who]}", json=edit, headers=admin_headers)
        assert done.status_code == 200, done.text
    out = await client.post("/api/auth/logout", json={"refresh_token": out_pair["refresh_token"]})
    assert out.status_code == 204
    token_id = revoked.json()["api_token"]["id"]
    assert (
        await client.delete(f"/api/me/tokens/{token_id}", headers=bearer(revoked.json()["token"]))
    ).status_code == 204
    attacks["a valid token after its user was disabled"] = disabled_pair["access_token"]
    attacks["a valid token after its user was demoted"] = demoted_pair["access_token"]
    attacks["a valid token after its logout"] = out_pair["access_token"]
    attacks["an API token of a disabled owner"] = made.json()["token"]
    attacks["a revoked API token"] = revoked.json()["token"]

    accepted: list[str] = []  # attack: route -> status, for each route that let it in
    misshapen: list[str] = []
    requests = 0
    for label, token in attacks.items():
        for method, path in ATTACK_TARGETS:
            # the viewer's own session was just checked (and is cached): a forgery riding
            # on it must still be refused
            primed = await client.get("/api/me", headers=bearer(viewer_token))
            assert primed.status_code == 200, primed.text
            answer = await client.request(method, path, headers=bearer(token))
            requests += 1
            if answer.status_code != 401:
                accepted.append(f"{label}: {method} {path} -> {answer.status_code}")
            elif not refused_401(answer):
                misshapen.append(f"{label}: {method} {path} -> {answer.headers} {answer.text}")

    # a good token outside the Authorization header's Bearer scheme
    elsewhere = {
        "a valid token under the Basic scheme": {"Authorization": f"Basic {viewer_token}"},
        "a valid token under a Token scheme": {"Authorization": f"Token {viewer_token}"},
        "a valid token in a cookie": {"Cookie": f"access_token={viewer_token}"},
    }
    for label, headers in elsewhere.items():
        answer = await client.get("/api/me", headers=headers)
        requests += 1
        if answer.status_code != 401:
            accepted.append(f"{label} -> {answer.status_code}")
        elif not refused_401(answer):
            misshapen.append(f"{label} -> {answer.headers} {answer.text}")
    in_query = await client.get("/api/me", params={"access_token": viewer_token})
    requests += 1
    if not refused_401(in_query):
        accepted.append(f"a valid token in the query string -> {in_query.status_code}")

    check = "forged access tokens"
    tried = len(attacks) + len(elsewhere) + 1
    let_in = sorted({line.split(":")[0].split(" -> ")[0] for line in accepted})
    record(DOC, check, "attacks tried", tried, targets=[f"{m} {p}" for m, p in ATTACK_TARGETS])
    record(DOC, check, "requests", requests)
    record(DOC, check, "attacks accepted", len(let_in), attacks=let_in, answers=accepted)
    record(DOC, check, "refusals not a 401 problem with WWW-Authenticate", len(misshapen))
    assert not accepted, "\n".join(accepted)
    assert not misshapen, "\n".join(misshapen)


# -- 2. refresh token reuse ----------------------------------------------------------------

REPLAYS = scale(20, 200)
RACERS = scale(8, 50)


async def test_a_replayed_refresh_token_ends_its_whole_family(
    api: Api, client: httpx.AsyncClient, sql: psycopg.Connection[Any]
) -> None:
    """A refresh token used once and presented again (one after another, then all at once)
    is refused every time, and the family it belongs to is revoked: the successor it was
    exchanged for and the access tokens of the session answer 401. Of concurrent first uses
    of one token exactly one wins, and the losers count as reuse."""
    await api.auth.create_user("reuse@example.com", PASSWORD, Role.OPERATOR)
    first = (await api.login("reuse@example.com")).json()
    rotated = await client.post("/api/auth/refresh", json={"refresh_token": first["refresh_token"]})
    assert rotated.status_code == 200, rotated.text
    successor = rotated.json()
    assert successor["refresh_token"] != first["refresh_token"]
    assert (
        await client.get("/api/me", headers=bearer(successor["access_token"]))
    ).status_code == 200

    def replay() -> Any:
        return client.post("/api/auth/refresh", json={"refresh_token": first["refresh_token"]})

    sequential = [await replay() for _ in range(REPLAYS)]
    concurrent = await asyncio.gather(*(replay() for _ in range(REPLAYS)))
    answers = [*sequential, *concurrent]
    accepted = [a.status_code for a in answers if a.status_code != 401]
    misshapen = [a.text for a in answers if a.status_code == 401 and not refused_401(a)]
    successor_refresh = await client.post(
        "/api/auth/refresh", json={"refresh_token": successor["refresh_token"]}
    )
    successor_access = await client.get("/api/me", headers=bearer(successor["access_token"]))
    first_access = await client.get("/api/me", headers=bearer(first["access_token"]))
    [(reuse_events,)] = sql.execute(
        "SELECT count(*) FROM audit_events WHERE event_type = 'auth.refresh_reuse'"
    ).fetchall()

    # concurrent first uses of one fresh token: one wins, the rest are reuse
    fresh = (await api.login("reuse@example.com")).json()
    race = await asyncio.gather(
        *(
            client.post("/api/auth/refresh", json={"refresh_token": fresh["refresh_token"]})
            for _ in range(RACERS)
        )
    )
    winners = [a.json() for a in race if a.status_code == 200]
    losers = [a for a in race if a.status_code != 200]
    winner_refused = [
        await client.post("/api/auth/refresh", json={"refresh_token": w["refresh_token"]})
        for w in winners
    ] + [await client.get("/api/me", headers=bearer(w["access_token"])) for w in winners]

    check = "refresh token reuse"
    record(DOC, check, "replays", len(answers), sequential=REPLAYS, concurrent=REPLAYS)
    record(DOC, check, "replays accepted", len(accepted))
    record(DOC, check, "successor refresh token refused", successor_refresh.status_code == 401)
    record(DOC, check, "the session's access tokens refused", successor_access.status_code == 401)
    record(DOC, check, "reuse events in the audit trail", reuse_events)
    record(DOC, check, "concurrent first uses", RACERS)
    record(DOC, check, "concurrent first uses accepted", len(winners))
    record(
        DOC,
        check,
        "winner's tokens refused after the race",
        all(refused_401(a) for a in winner_refused),
    )

    assert accepted == [] and misshapen == []
    assert refused_401(successor_refresh), successor_refresh.text
    assert refused_401(successor_access), successor_access.text
    assert refused_401(first_access), first_access.text
    assert reuse_events >= 1
    assert len(winners) == 1, [a.status_code for a in race]
    assert all(refused_401(a) for a in losers), [a.text for a in losers]
    assert all(refused_401(a) for a in winner_refused), [a.text for a in winner_refused]


# -- 3. the role matrix --------------------------------------------------------------------

PATH_VALUES = {"key": "no.such.setting"}
"""Path parameters by name; the rest are filled by their schema (an id, a name that does not
exist), so a route added later is called without changing this file."""


def concrete(api: Api, method: str, path: str) -> str:
    # the docs' routes are not in the document: their parameters keep their names
    spec = api.api.openapi()["paths"].get(path, {}).get(method.lower(), {})
    for parameter in spec.get("parameters", []):
        if parameter["in"] != "path":
            continue
        name = parameter["name"]
        integer = "integer" in json.dumps(parameter.get("schema", {}))
        value = PATH_VALUES.get(name, NO_SUCH_ID if integer else "no-such-thing")
        path = path.replace("{" + name + "}", value)
    return path


HANG_GUARD = 60.0  # not a timing assertion: only stops a broken route from hanging the run
STREAMS = {("GET", "/api/events")}
"""Routes whose answer is a stream that lasts as long as the client stays."""


async def stream_status(app: Any, path: str, headers: dict[str, str]) -> int:
    """The status a streaming route answers, read from the ASGI app directly (the test
    client would wait for a body that never ends); then the client goes away."""
    started: asyncio.Future[int] = asyncio.get_running_loop().create_future()
    requested = False

    async def receive() -> dict[str, Any]:
        nonlocal requested
        if not requested:
            requested = True
            return {"type": "http.request", "body": b"", "more_body": False}
        await started
        return {"type": "http.disconnect"}

    async def send(message: dict[str, Any]) -> None:
        if message["type"] == "http.response.start" and not started.done():
            started.set_result(message["status"])

    scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": "GET",
        "scheme": "http",
        "path": path,
        "raw_path": path.encode(),
        "query_string": b"",
        "root_path": "",
        "headers": [(k.lower().encode(), v.encode()) for k, v in headers.items()],
        "client": ("127.0.0.1", 50000),
        "server": ("testserver", 80),
    }
    served = asyncio.create_task(app(scope, receive, send))
    status = await asyncio.wait_for(started, HANG_GUARD)
    await asyncio.wait_for(served, HANG_GUARD)  # the disconnect ends the stream
    return status


async def test_role_matrix_from_the_route_table(api: Api, client: httpx.AsyncClient) -> None:
    """Every route of ROUTE_ROLES x {anonymous, VIEWER, OPERATOR, ADMIN}, each by an access
    token and by a personal API token: 401 for anonymous on a guarded route, 403 below the
    route's role, never 401/403 at or above it, never a 5xx."""
    assert api_routes(api.api) == set(ROUTE_ROLES)
    users = {u.email: u.id for u in await api.auth.list_users()}
    callers: list[tuple[str, Role | None, dict[str, str]]] = [("anonymous", None, {})]
    for role in Role:
        callers.append((f"{role.name} session", role, api.headers(role)))
    for role in Role:
        _, secret = await api.auth.create_api_token(users[email(role)], "matrix", role, None)
        callers.append((f"{role.name} API token", role, bearer(secret)))

    wrong: list[str] = []
    cells = 0
    for (method, path), needed in sorted(ROUTE_ROLES.items(), key=lambda i: (i[0][1], i[0][0])):
        target = concrete(api, method, path)
        for label, caller, headers in callers:
            if (method, path) in STREAMS:  # a granted call never ends: only its status counts
                status = await stream_status(api.api, target, headers)
                cells += 1
                expected = 401 if caller is None else 403 if needed and caller < needed else 200
                if status != expected:
                    wrong.append(f"{method} {path} as {label}: {status}, not {expected}")
                continue
            body: dict[str, Any] | None = None if method in ("GET", "DELETE") else {}
            answer = await client.request(method, target, json=body, headers=headers)
            cells += 1
            status = answer.status_code
            if needed is None:
                ok = status < 500 and status != 403 and (status != 401 or "/auth/" in path)
            elif caller is None:
                ok = refused_401(answer)
            elif caller < needed:
                ok = status == 403 and f"needs role {needed.name}" in answer.json()["detail"]
            else:
                ok = status < 500 and status not in (401, 403)
            if not ok:
                wrong.append(f"{method} {path} as {label}: {status} {answer.text[:160]}")

    check = "role matrix"
    record(DOC, check, "routes", len(ROUTE_ROLES))
    record(DOC, check, "callers", len(callers), callers=[c[0] for c in callers])
    record(DOC, check, "cells", cells)
    record(DOC, check, "mismatches", len(wrong), wrong=wrong)
    assert not wrong, "\n".join(wrong)


# -- 4. login timing and throttling --------------------------------------------------------

TIMED = scale(10, 100)
GUESSES = scale(12, 50)
BIG = 1_000_000


def quantile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


async def test_login_timing_and_throttling(app: App) -> None:
    """Unknown emails, wrong passwords and disabled users get byte-identical answers, and an
    unknown email costs a password check too (the times are figures only, never asserted).
    Wrong passwords for one account: exactly ``login_max_per_account`` are checked (401), the
    rest answer 429 with Retry-After, one after another or all at once, and even the right
    password is refused until the window passes; likewise per client address."""
    check = "login timing"
    async with served(
        app, address="192.0.2.10", login_max_per_address=BIG, login_max_per_account=BIG
    ) as timed:
        await timed.auth.create_user("timed@example.com", PASSWORD, Role.VIEWER)
        off = await timed.auth.create_user("off@example.com", PASSWORD, Role.VIEWER)
        await timed.auth.disable(off.id, "test")

        async def login(who: str, password: str) -> tuple[float, httpx.Response]:
            started = time.perf_counter()
            answer = await timed.client.post(
                "/api/auth/login", json={"email": who, "password": password}
            )
            return time.perf_counter() - started, answer

        await login("warm-up@example.com", OTHER_PASSWORD)  # the dummy hash is made once
        await login("timed@example.com", OTHER_PASSWORD)
        unknown: list[float] = []
        wrong: list[float] = []
        answers: list[httpx.Response] = []
        for n in range(TIMED):  # interleaved, so drift affects both alike
            took, answer = await login(f"nobody-{n}@example.com", OTHER_PASSWORD)
            unknown.append(took)
            answers.append(answer)
            took, answer = await login("timed@example.com", f"{OTHER_PASSWORD} {n}")
            wrong.append(took)
            answers.append(answer)
        answers.append((await login("off@example.com", PASSWORD))[1])
        answers.append((await login("off@example.com", OTHER_PASSWORD))[1])

    bodies = {a.content for a in answers}
    statuses = {a.status_code for a in answers}
    challenge = {a.headers.get("www-authenticate") for a in answers}
    ms = 1000.0
    record(DOC, check, "logins timed", 2 * TIMED, each=TIMED)
    record(DOC, check, "unknown email, median ms", round(statistics.median(unknown) * ms, 1))
    record(DOC, check, "unknown email, p90 ms", round(quantile(unknown, 0.9) * ms, 1))
    record(DOC, check, "wrong password, median ms", round(statistics.median(wrong) * ms, 1))
    record(DOC, check, "wrong password, p90 ms", round(quantile(wrong, 0.9) * ms, 1))
    record(
        DOC,
        check,
        "median ratio unknown/wrong",
        round(statistics.median(unknown) / statistics.median(wrong), 2),
    )
    record(DOC, check, "distinct answer bodies", len(bodies), disabled_user_included=True)
    assert statuses == {401} and len(bodies) == 1 and challenge == {"Bearer"}, (statuses, bodies)

    check = "login throttling"
    async with served(app, address="192.0.2.20", login_max_per_address=BIG) as one:
        limit = one.auth.settings.login_max_per_account
        await one.auth.create_user("guessed@example.com", PASSWORD, Role.VIEWER)
        await one.auth.create_user("rushed@example.com", PASSWORD, Role.VIEWER)

        def guess(who: str, n: int) -> Any:
            return one.client.post(
                "/api/auth/login", json={"email": who, "password": f"guess number {n:04d}"}
            )

        sequential = [await guess("guessed@example.com", n) for n in range(GUESSES)]
        right_during = await one.client.post(
            "/api/auth/login", json={"email": "guessed@example.com", "password": PASSWORD}
        )
        parallel = await asyncio.gather(*(guess("rushed@example.com", n) for n in range(GUESSES)))

    async with served(app, address="192.0.2.30") as many:
        per_address = many.auth.settings.login_max_per_address
        spread = await asyncio.gather(  # all at once, each claiming another address
            *(
                many.client.post(
                    "/api/auth/login",
                    json={"email": f"spread-{n}@example.com", "password": OTHER_PASSWORD},
                    headers={"X-Forwarded-For": f"203.0.113.{n}", "X-Real-IP": f"203.0.113.{n}"},
                )
                for n in range(per_address + scale(3, 20))
            )
        )

    def throttled(answer: httpx.Response) -> bool:
        retry = answer.headers.get("retry-after", "")
        return is_problem(answer, 429) and retry.isdigit() and int(retry) >= 1

    seq_statuses = [a.status_code for a in sequential]
    record(DOC, check, "per-account limit", limit, default=True)
    record(DOC, check, "guesses, one at a time", GUESSES)
    record(DOC, check, "guesses let through, one at a time", seq_statuses.count(401))
    record(DOC, check, "right password while throttled: refused", right_during.status_code == 429)
    record(DOC, check, "guesses, all at once", GUESSES)
    record(
        DOC,
        check,
        "guesses let through, all at once",
        [a.status_code for a in parallel].count(401),
    )
    record(DOC, check, "per-address limit", per_address, default=True)
    record(
        DOC, check, "guesses from one address, all at once", len(spread), forwarded_for="each new"
    )
    record(DOC, check, "let through from one address", [a.status_code for a in spread].count(401))
    assert seq_statuses == [401] * limit + [429] * (GUESSES - limit), seq_statuses
    assert all(throttled(a) for a in sequential[limit:])
    assert throttled(right_during), right_during.text
    parallel_statuses = sorted(a.status_code for a in parallel)
    assert parallel_statuses == [401] * limit + [429] * (GUESSES - limit), parallel_statuses
    assert all(throttled(a) for a in parallel if a.status_code == 429)
    spread_statuses = sorted(a.status_code for a in spread)
    expected = [401] * per_address + [429] * (len(spread) - per_address)
    assert spread_statuses == expected, spread_statuses
    assert all(throttled(a) for a in spread if a.status_code == 429)


# -- 5. the refresh cookie and its origin check ----------------------------------------------

FOREIGN_ORIGINS = (
    None,
    "https://evil.example",
    "null",
    "http://testserver.evil.example",
    "https://testserver",
    "http://testserver:8080",
    "http://evil.example/http://testserver",
)


def cookie_flags(set_cookie: str) -> dict[str, bool]:
    attributes = [part.strip().lower() for part in set_cookie.split(";")[1:]]
    return {
        "HttpOnly": "httponly" in attributes,
        "SameSite=Strict": "samesite=strict" in attributes,
        "Path=/api/auth": "path=/api/auth" in attributes,
    }


async def test_refresh_cookie_flags_and_cross_origin_refreshes(
    api: Api, client: httpx.AsyncClient
) -> None:
    """A login asking for the cookie gets it HttpOnly, SameSite=Strict, Path=/api/auth, and
    no refresh token in the body; a refresh or logout by cookie without an Origin or from
    another origin is 403 (and uses nothing up); from this server's origin it is 200."""
    login = await client.post(
        "/api/auth/login",
        json={"email": email(Role.VIEWER), "password": PASSWORD, "cookie": True},
    )
    assert login.status_code == 200, login.text
    set_cookie = login.headers["set-cookie"]
    name, _, value = set_cookie.split(";", 1)[0].partition("=")
    flags = cookie_flags(set_cookie)
    in_body = value in login.text or login.json().get("refresh_token") is not None
    client.cookies.clear()

    def with_cookie(cookie: str, origin: str | None) -> dict[str, str]:
        headers = {"Cookie": f"{name}={cookie}"}
        return headers | ({} if origin is None else {"Origin": origin})

    cross: list[httpx.Response] = []
    as_form: list[httpx.Response] = []  # what a cross-site <form> can send without a preflight
    for origin in FOREIGN_ORIGINS:
        cross.append(await client.post("/api/auth/refresh", headers=with_cookie(value, origin)))
        for content_type in ("text/plain", "application/x-www-form-urlencoded"):
            as_form.append(
                await client.post(
                    "/api/auth/refresh",
                    content=b'{"refresh_token": null}',
                    headers=with_cookie(value, origin) | {"content-type": content_type},
                )
            )
        client.cookies.clear()
    logouts = [
        await client.post("/api/auth/logout", headers=with_cookie(value, origin))
        for origin in FOREIGN_ORIGINS
    ]
    client.cookies.clear()
    same = await client.post("/api/auth/refresh", headers=with_cookie(value, BASE_URL))
    client.cookies.clear()
    renewed = same.headers.get("set-cookie", "")
    renewed_flags = cookie_flags(renewed)
    renewed_value = renewed.split(";", 1)[0].partition("=")[2]
    foreign_logout = await client.post(
        "/api/auth/logout", headers=with_cookie(renewed_value, "https://evil.example")
    )
    still = await client.post(
        "/api/auth/refresh", headers=with_cookie(renewed_value, BASE_URL + "/")
    )

    check = "refresh cookie"
    accepted = [a for a in (*cross, *as_form) if a.status_code < 400]
    record(DOC, check, "flags present", sum(flags.values()), of=len(flags), flags=flags)
    record(DOC, check, "Secure over plain http", "secure" in set_cookie.lower())
    record(DOC, check, "refresh token in the body", in_body)
    record(
        DOC,
        check,
        "cross-origin refreshes tried",
        len(cross) + len(as_form),
        origins=list(FOREIGN_ORIGINS),
        form_bodies=len(as_form),
    )
    record(DOC, check, "cross-origin refreshes accepted", len(accepted))
    record(DOC, check, "cross-origin logouts accepted", sum(a.status_code < 400 for a in logouts))
    record(DOC, check, "same-origin refresh accepted", same.status_code == 200)
    assert all(flags.values()) and all(renewed_flags.values()), (set_cookie, renewed)
    assert not in_body
    assert accepted == [], [a.text for a in accepted]
    assert all(is_problem(a, 403) for a in cross), [a.text for a in cross]
    assert all(a.status_code in (403, 400, 415) for a in as_form), [a.text for a in as_form]
    assert all(is_problem(a, 403) for a in logouts), [a.text for a in logouts]
    assert same.status_code == 200, same.text
    assert same.json()["refresh_token"] is None and renewed_value not in same.text
    assert is_problem(foreign_logout, 403), foreign_logout.text
    assert still.status_code == 200, still.text  # the foreign logout ended nothing


# -- 6. a corpus of bad input in every parameter --------------------------------------------


class Tally(Reactor):
    name = "tally"
    handles = frozenset({"ORDER_PAID"})
    sweep_cron = "0 * * * *"

    async def handle_signal(self, signal: Signal, ctx: ReactorContext) -> None:
        return None

    async def sweep(self, ctx: ReactorContext) -> None:
        return None


@pytest.fixture
async def fuzzed(database_url: str, schema: str, clean: None) -> AsyncIterator[Api]:
    app = App(
        database_url=database_url,
        schema=schema,
        signals={"reactors": {"tally": {"enabled": True, "organisations": ["1"]}}},
    )
    register_echo(app)
    app.add_reactor(Tally())
    runtime = app.signal_runtime(await app.db.async_pool(), holder_id="fuzz-holder")
    await runtime.leases.run_once()
    async for api in start_api(app, runtime):
        yield api
    await app.aclose()


FIELDS: dict[str, Any] = {
    "task": "tests.echo",
    "cron": "0 3 * * *",
    "timezone": "UTC",
    "args": {"word": "hi"},
    "queue": "fuzz-queue",
    "priority": 0,
    "max_attempts": 3,
    "run_at": "2030-01-01T00:00:00Z",
    "timeout": 30.0,
    "unique_key": "fuzz-key",
    "schedule": "fuzzed",
    "state": ["PENDING"],
    "created_from": "2020-01-01T00:00:00Z",
    "created_to": "2030-01-01T00:00:00Z",
    "finished_from": "2020-01-01T00:00:00Z",
    "finished_to": "2030-01-01T00:00:00Z",
    "from": "2020-01-01T00:00:00Z",
    "to": "2030-01-01T00:00:00Z",
    "limit": 10,
    "before_id": int(NO_SUCH_ID),
    "email": "invitee@example.com",
    "password": "a perfectly fine passphrase",
    "current_password": OTHER_PASSWORD,
    "new_password": "a brand new passphrase",
    "token": "twi_" + "0" * 43,
    "refresh_token": "twr_" + "0" * 43,
    "role": "VIEWER",
    "disabled": False,
    "expires_in": 3600,
    "name": "fuzz-new",
    "misfire": "ONCE",
    "misfire_limit": 5,
    "overlap": "ALLOW",
    "enabled": True,
    "dry_run": False,
    "organisations": ["1"],
    "secret": False,
    "cookie": False,
    "actor": "user:admin@example.com",
    "event_type": "job.enqueued",
    "target_type": "job",
    "target_id": "1",
    "status": ["PENDING"],
    "signal_type": "ORDER_PAID",
    "aggregate_key": "order:1",
    "organisation_id": "1",
    "older_than": 60,
}
"""A plausible value of each field, by name (generic() fills any other from its schema)."""

BY_OPERATION: dict[str, dict[str, Any]] = {
    "POST /api/auth/login": {"email": email(Role.ADMIN), "password": PASSWORD},
    "POST /api/me/tokens": {"name": "fuzz token"},
    "PUT /api/settings/{key}": {"value": 3600},
    "PUT /api/variables/{name}": {"value": "a plain value"},
    "GET /api/jobs": {"state": "PENDING"},
    "GET /api/admin/signals": {"status": "PENDING"},
}


def plausible_paths(api: Api, made: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Path parameters that name things that exist (a DELETE gets ones that do not, so
    nothing is taken away from the operations after it)."""
    return {
        "job_id": {"*": made["job"]},
        "token_id": {"*": made["token"]},
        "invite_id": {"*": made["invite"]},
        "user_id": {"*": made["viewer"]},
        "signal_id": {"*": made["signal"]},
        "key": {"*": "retention.finished_after"},
        "name": {
            "/api/queues": "fuzz-queue",
            "/api/schedules": "fuzzed",
            "/api/variables": "fuzz_var",
            "/api/admin/signals/reactors": "tally",
        },
    }


class Corpus:
    """Builds the requests: every operation with plausible values, one parameter at a time
    replaced by a bad value."""

    def __init__(self, api: Api, made: dict[str, Any]) -> None:
        self.api = api
        self.paths = plausible_paths(api, made)

    def value(self, op: Operation, param: Param) -> Any:
        found = BY_OPERATION.get(op.label, {})
        if param.name in found:
            return found[param.name]
        if param.where == "path":
            if op.method == "DELETE":
                return NO_SUCH_ID if param.schema.get("type") == "integer" else "no-such-thing"
            choices = self.paths.get(param.name, {})
            for prefix, value in choices.items():
                if prefix == "*" or op.path.startswith(prefix):
                    return value
        if param.name in FIELDS:
            return FIELDS[param.name]
        return generic(param.schema)

    def request(
        self,
        op: Operation,
        bad: tuple[Param, Bad] | None = None,
        *,
        nested: bool = False,
        filtered: bool = True,
    ) -> tuple[bytes, bytes, bytes | None]:
        """The path, query string and body of ``op``: plausible values, but for ``bad``'s
        parameter (``nested``: inside its object or array); ``filtered`` False leaves the
        query parameters out."""
        path: dict[str, bytes] = {}
        query: list[tuple[str, bytes]] = []
        body: dict[str, bytes] = {}
        for param in op.params:
            if bad is not None and bad[0] == param:
                value = bad[1]
                if param.where == "path":
                    path[param.name] = value.text
                elif param.where == "query":
                    query.append((param.name, value.text))
                    if value.repeat:
                        query.append((param.name, b"2"))
                elif not nested:
                    body[param.name] = value.json
                elif param.schema.get("type") == "array":
                    body[param.name] = b"[" + value.json + b"]"
                else:
                    body[param.name] = b'{"word": ' + value.json + b"}"
            elif param.where == "path":
                path[param.name] = as_text(self.value(op, param))
            elif param.where == "query":
                if filtered:
                    value = self.value(op, param)
                    for item in value if isinstance(value, list) else [value]:
                        query.append((param.name, as_text(item)))
            else:
                body[param.name] = json.dumps(self.value(op, param)).encode()
        raw_body = encode_body(body) if op.takes_body else None
        return encode_path(op.path, path), encode_query(query), raw_body

    def form(self, op: Operation) -> bytes:
        fields = [p for p in op.params if p.where == "body"]
        return urlencode({p.name: str(self.value(op, p)) for p in fields}).encode()


async def make_things(api: Api) -> dict[str, Any]:
    """What the plausible values name: a job, a schedule, an invite, an API token, a signal,
    a variable, and the viewer (whose edits harm no other caller)."""
    admin = api.headers(Role.ADMIN)
    job = await api.client.post("/api/jobs", json={"task": "tests.echo"}, headers=admin)
    schedule = await api.client.post(
        "/api/schedules",
        json={"name": "fuzzed", "task": "tests.echo", "cron": "0 3 * * *"},
        headers=admin,
    )
    invite = await api.client.post(
        "/api/invites", json={"email": "invited@example.com", "role": "VIEWER"}, headers=admin
    )
    token = await api.client.post("/api/me/tokens", json={"name": "fuzzed"}, headers=admin)
    variable = await api.client.put(
        "/api/variables/fuzz_var", json={"value": "plain"}, headers=admin
    )
    for made in (job, schedule, invite, token, variable):
        assert made.status_code in (200, 201), made.text
    signal = api.app.signals.emit("ORDER_PAID", "Order", 1, "order:1", 1, {"amount": 5})
    viewer = (await api.client.get("/api/me", headers=api.headers(Role.VIEWER))).json()
    return {
        "job": job.json()["id"],
        "invite": invite.json()["invite"]["id"],
        "token": token.json()["api_token"]["id"],
        "signal": signal.signal_id,
        "viewer": viewer["id"],
    }


async def test_bad_input_in_every_parameter_never_gives_a_5xx(fuzzed: Api) -> None:
    """Every operation of the OpenAPI document, as an ADMIN, with every corpus value in every
    path, query and top-level body parameter (the others plausible), every whole-body oddity,
    text/plain and form bodies, and once anonymously: no answer is a 5xx, every error is a
    problem, a body over the limit is 413, a guarded route refuses the anonymous call 401.
    Then every read still answers (nothing stored by the run poisons a listing)."""
    api = fuzzed
    corpus = Corpus(api, await make_things(api))
    ops = operations(api.api.openapi())
    admin = api.headers(Role.ADMIN)
    statuses: Counter[int] = Counter()
    sent: Counter[str] = Counter()
    failures: list[str] = []
    other_accepted: list[str] = []

    async def send(
        kind: str,
        op: Operation,
        label: str,
        request: tuple[bytes, bytes, bytes | None],
        headers: dict[str, str],
        expect: int | None = None,
    ) -> Answer:
        raw_path, query, body = request
        answer = await asgi_call(api.api, op.method, raw_path, query, headers=headers, body=body)
        statuses[answer.status] += 1
        sent[kind] += 1
        where = f"{op.label} [{label}]"
        if answer.status >= 500 or answer.error is not None:
            failures.append(f"{where}: {answer.status} {answer.error!r} {answer.text[:300]}")
        elif answer.status >= 400 and not answer.content_type.startswith(PROBLEM):
            failures.append(f"{where}: {answer.status} is not a problem: {answer.text[:200]}")
        elif expect is not None and answer.status != expect:
            failures.append(f"{where}: {answer.status}, expected {expect}: {answer.text[:200]}")
        elif answer.status == 401 and answer.headers.get("www-authenticate") != "Bearer":
            failures.append(f"{where}: 401 without WWW-Authenticate: Bearer")
        elif answer.status == 429 and not answer.headers.get("retry-after", "").isdigit():
            failures.append(f"{where}: 429 without Retry-After")
        if kind == "other content type" and op.takes_body and answer.status < 300:
            other_accepted.append(f"{where}: {answer.status}")
        return answer

    json_headers = admin | {"content-type": "application/json"}
    parameters = 0
    for op in ops:
        plain = corpus.request(op)
        for param in op.params:
            parameters += 1
            container = param.where == "body" and param.schema.get("type") in ("object", "array")
            for nested in (False, True) if container else (False,):
                for bad in CORPUS:
                    big = bad.label == "3 MB string" and param.where == "body"
                    await send(
                        f"{param.where} parameter" + (" (nested)" if nested else ""),
                        op,
                        f"{param.where} {param.name}{'[...]' if nested else ''} = {bad.label}",
                        corpus.request(op, (param, bad), nested=nested),
                        json_headers,
                        expect=413 if big else None,
                    )
        if op.method in ("POST", "PUT", "PATCH", "DELETE") and op.takes_body:
            for label, raw in WHOLE_BODIES:
                await send(
                    "whole body",
                    op,
                    f"body = {label}",
                    (plain[0], plain[1], raw),
                    json_headers,
                    expect=413 if label == "3 MB string" else None,
                )
        if op.method in ("POST", "PUT", "PATCH"):
            text_body = plain[2] if plain[2] is not None else b"{}"
            others = (
                ("text/plain", text_body),
                ("application/x-www-form-urlencoded", corpus.form(op)),
                ("multipart/form-data; boundary=x", b"--x\r\n\r\n--x--\r\n"),
            )
            for content_type, raw in others:
                await send(
                    "other content type",
                    op,
                    f"content-type {content_type}",
                    (plain[0], plain[1], raw),
                    admin | {"content-type": content_type},
                )
        anonymous = {"content-type": "application/json"}
        await send(
            "anonymous", op, "anonymous", plain, anonymous, expect=None if op.public else 401
        )
    for op in ops:  # what the run stored is still served, filtered or not
        if op.method == "GET":
            await send("read back", op, "read back", corpus.request(op), admin)
            unfiltered = corpus.request(op, filtered=False)
            await send("read back", op, "read back, unfiltered", unfiltered, admin)

    check = "bad-input corpus"
    requests = sum(sent.values())
    five = sum(n for status, n in statuses.items() if status >= 500)
    record(DOC, check, "operations", len(ops))
    record(DOC, check, "parameters", parameters)
    record(DOC, check, "corpus values", len(CORPUS), whole_bodies=len(WHOLE_BODIES))
    record(DOC, check, "requests sent", requests, by_kind=dict(sorted(sent.items())))
    record(DOC, check, "answers of 5xx", five)
    for status, count in sorted(statuses.items()):
        record(DOC, check, f"answers {status}", count)
    record(
        DOC,
        check,
        "text/plain, form or multipart bodies taken by a JSON operation",
        len(other_accepted),
        operations=other_accepted,
    )
    record(DOC, check, "failures", len(failures))
    assert not failures, f"{len(failures)} failures:\n" + "\n".join(failures[:60])


# -- 7. a canary secret ----------------------------------------------------------------------


async def test_a_canary_secret_never_comes_back(
    api: Api, sql: psycopg.Connection[Any], monkeypatch: pytest.MonkeyPatch, database_url: str
) -> None:
    """One random value planted in every secret place (passwords at login, invite accept and
    password change, a secret variable, a presented refresh token, an invite token, a bearer
    token, the password of a database URL and the signing key in configuration and connection
    errors) is found in no answer (body or headers), no log record of any logger, no error
    and no audit row."""
    canary = "canary-" + random.Random(20_260_301).randbytes(8).hex()
    places: list[str] = []
    texts: list[str] = []

    async def keep(response: httpx.Response) -> None:
        await response.aread()
        headers = " ".join(f"{k}: {v}" for k, v in response.headers.items())
        texts.append(f"{response.text} {headers}")

    admin = api.headers(Role.ADMIN)
    five: list[str] = []

    async def call(place: str | None, method: str, path: str, **request: Any) -> httpx.Response:
        """A request; ``place`` names the secret place it plants the canary in."""
        if place is not None:
            places.append(place)
        answer = await hooked.request(method, path, **request)
        hooked.cookies.clear()
        if answer.status_code >= 500:
            five.append(f"{place}: {answer.status_code} {answer.text}")
        return answer

    errors: list[str] = []
    hooks = {"response": [keep]}
    async with client_of(api.api, event_hooks=hooks) as hooked:
        with every_log_record() as logs:
            logging.getLogger("tickwork.test").debug("the capture hears debug records")
            login = "/api/auth/login"
            viewer = email(Role.VIEWER)
            for place, password in (
                ("login: a wrong password", canary),
                ("login: a password with NUL", canary + "\x00"),
                ("login: a password too long", canary * 60),
                ("login: a password of the wrong type", [canary]),
            ):
                await call(place, "POST", login, json={"email": viewer, "password": password})
            await call(
                "login: an unknown email's password",
                "POST",
                login,
                json={"email": "nobody@example.com", "password": canary},
            )
            for content_type in ("text/plain", "application/x-www-form-urlencoded"):
                await call(
                    f"login: a password in a {content_type} body",
                    "POST",
                    login,
                    content=json.dumps({"email": viewer, "password": canary}).encode(),
                    headers={"content-type": content_type},
                )
            invite = await call(
                None,
                "POST",
                "/api/invites",
                json={"email": "canary@example.com", "role": "OPERATOR"},
                headers=admin,
            )
            invite_token = invite.json()["token"]
            accept = "/api/invites/accept"
            await call(
                "accept: the invite token",
                "POST",
                accept,
                json={"token": canary, "password": canary},
            )
            await call(
                "accept: a password too long",
                "POST",
                accept,
                json={"token": invite_token, "password": canary * 60},
            )
            accepted = await call(
                "accept: the new user's password",
                "POST",
                accept,
                json={"token": invite_token, "name": "Canary", "password": canary},
            )
            assert accepted.status_code == 201, accepted.text
            logged_in = await call(
                "login: the right password",
                "POST",
                login,
                json={"email": "canary@example.com", "password": canary},
            )
            assert logged_in.status_code == 200, logged_in.text
            own = bearer(logged_in.json()["access_token"])
            for place, body in (
                (
                    "password change: a wrong current password",
                    {"current_password": canary + "-wrong", "new_password": canary + "-new"},
                ),
                (
                    "password change: a new password too long",
                    {"current_password": canary, "new_password": canary * 60},
                ),
                (
                    "password change: the current and the new password",
                    {"current_password": canary, "new_password": canary + "-2"},
                ),
            ):
                changed = await call(place, "POST", "/api/me/password", json=body, headers=own)
            assert changed.status_code == 204, changed.text
            variables: tuple[tuple[str, dict[str, Any]], ...] = (
                ("secret variable: its value", {"value": canary, "secret": True}),
                ("secret variable: beside a bad flag", {"value": canary, "secret": "yes"}),
                ("secret variable: with NUL", {"value": canary + "\x00", "secret": True}),
                ("secret variable: too long", {"value": canary * 5000, "secret": True}),
                ("secret variable: beside an unknown field", {"value": canary, "x": 1}),
            )
            for place, variable in variables:
                await call(place, "PUT", "/api/variables/api_key", json=variable, headers=admin)
            await call(None, "GET", "/api/variables", headers=admin)
            pair = (await api.login(email(Role.OPERATOR))).json()
            refresh = "/api/auth/refresh"
            own_origin = {"Cookie": f"tickwork_refresh={canary}", "Origin": BASE_URL}
            refreshes: tuple[tuple[str, dict[str, Any]], ...] = (
                ("refresh: in the body", {"json": {"refresh_token": canary}}),
                ("refresh: in the cookie", {"headers": own_origin}),
                (
                    "refresh: in a cookie from another origin",
                    {"headers": own_origin | {"Origin": "https://evil.example"}},
                ),
                ("refresh: of the wrong type", {"json": {"refresh_token": [canary]}}),
                (
                    "refresh: appended to a real token",
                    {"json": {"refresh_token": pair["refresh_token"] + canary}},
                ),
            )
            for place, request in refreshes:
                await call(place, "POST", refresh, **request)
            await call(
                "logout: the refresh token",
                "POST",
                "/api/auth/logout",
                json={"refresh_token": canary},
            )
            for place, token in (
                ("bearer: as it is", canary),
                ("bearer: as an API token", "twk_" + canary),
                ("bearer: as a JWT", f"{canary}.{canary}.{canary}"),
            ):
                await call(place, "GET", "/api/me", headers=bearer(token))
                await call(None, "PUT", "/api/variables/v", headers=bearer(token), json={})
            await call(None, "GET", "/api/audit", params={"limit": 500}, headers=admin)

            for place, overrides in (
                (
                    "config: a database URL of another scheme",
                    {"database_url": f"postgresq://u:{canary}@h/x"},
                ),
                (
                    "config: a database URL libpq cannot parse",
                    {"database_url": f"postgresql://u:{canary}@[h/d"},
                ),
                ("config: a signing key too short", {"auth": {"jwt_secret": canary}}),
                (
                    "config: the admin password beside a bad setting",
                    {"auth": {"admin_password": canary, "x": 1}},
                ),
            ):
                places.append(place)
                with pytest.raises(ConfigError) as caught:
                    load_settings(**overrides)
                errors.append("".join(traceback.format_exception(caught.value)))
            places.append("config: a database URL from the environment")
            with monkeypatch.context() as env:
                env.setenv("TICKWORK_DATABASE_URL", f"postgresq://u:{canary}@h/x")
                with pytest.raises(ConfigError) as from_env:
                    load_settings()
            errors.append("".join(traceback.format_exception(from_env.value)))
            for place, url in (
                ("connect: a bad port", f"postgresql://u:{canary}@127.0.0.1:x/d"),
                ("connect: a bad option", f"postgresql://u:{canary}@127.0.0.1/d?sslmode=bogus"),
                ("connect: nothing listening", f"postgresql://u:{canary}@127.0.0.1:1/d"),
                (  # the test database's server, which refuses the role
                    "connect: an unknown role",
                    make_conninfo(database_url, user="no_such_role", password=canary),
                ),
            ):
                places.append(place)
                with pytest.raises(DatabaseUnavailable) as refused:
                    App(database_url=url, schema="tw_canary", connect_timeout=5).migrate()
                errors.append("".join(traceback.format_exception(refused.value)))
            logging.getLogger("tickwork.test").debug("capture ends")

    audit_rows = [
        " ".join(str(v) for v in row)
        for row in sql.execute(
            "SELECT event_type, actor, target_type, target_id, metadata::text FROM audit_events"
        ).fetchall()
    ]
    found = [t for t in texts if canary in t]
    found_logs = [line for line in logs.lines if canary in line]
    found_errors = [e for e in errors if canary in e]
    found_audit = [row for row in audit_rows if canary in row]
    occurrences = len(found) + len(found_logs) + len(found_errors) + len(found_audit)

    check = "canary secret"
    record(DOC, check, "places planted", len(places), places=places)
    record(DOC, check, "responses searched", len(texts))
    record(DOC, check, "log lines searched", len(logs.lines))
    record(DOC, check, "errors searched (with their tracebacks)", len(errors))
    record(DOC, check, "audit rows searched", len(audit_rows))
    record(DOC, check, "occurrences found", occurrences)
    assert any("the capture hears debug records" in line for line in logs.lines)
    assert not five, five
    assert not found, found
    assert not found_logs, found_logs
    assert not found_errors, found_errors
    assert not found_audit, found_audit
