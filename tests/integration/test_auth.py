"""The identity library against the real database: tokens, sessions, throttling, invites,
API tokens and the audit trail they leave."""

from __future__ import annotations

import asyncio
import base64
import json
import threading
import time
from typing import Any

import jwt
import psycopg
import pytest
from argon2 import PasswordHasher
from psycopg.conninfo import make_conninfo

from tickwork import App
from tickwork.auth import (
    API_TOKEN_PREFIX,
    AuthService,
    Principal,
    Role,
    TokenPair,
    needs_rehash,
)
from tickwork.config import AuthSettings
from tickwork.errors import (
    AuthError,
    ConflictError,
    IncorrectPassword,
    InvalidInput,
    LoginThrottled,
    NotFoundError,
    PermissionDenied,
)

PASSWORD = "correct horse battery staple"
OTHER_PASSWORD = "another long passphrase"
ADDRESS = "192.0.2.10"
WAIT_GUARD = 100_000  # not a timing assertion: only stops a broken test from spinning
HANG_GUARD = 60.0  # not a timing assertion: only stops a broken test from hanging


async def service(app: App, **overrides: Any) -> AuthService:
    settings = AuthSettings.model_validate(app.settings.auth.model_dump() | overrides)
    auth = AuthService(await app.db.async_pool(), app.db.store, settings)
    await auth.start()
    return auth


async def login(auth: AuthService, email: str = "ada@example.com") -> TokenPair:
    return await auth.login(email, PASSWORD, ADDRESS)


async def guesses_checked(app: App, count: int) -> list[AuthError]:
    """Send ``count`` wrong passwords for ada at once, from as many addresses and through as
    many services (as if from as many processes: only the database lock orders them); the
    failures of those whose password was checked (the others were throttled)."""
    services = [await service(app, login_max_per_account=3, login_window=600) for _ in range(count)]

    async def guess(n: int) -> AuthError:
        try:
            await services[n].login(
                "ada@example.com", f"wrong password number {n}", f"198.51.100.{n}"
            )
        except AuthError as exc:
            return exc
        raise AssertionError("a wrong password logged in")

    outcomes = await asyncio.gather(*(guess(n) for n in range(count)))
    return [o for o in outcomes if not isinstance(o, LoginThrottled)]


def claims(auth: AuthService, **changes: Any) -> dict[str, Any]:
    now = int(time.time())
    base = {
        "iss": auth.settings.issuer,
        "aud": auth.settings.audience,
        "sub": "1",
        "email": "ada@example.com",
        "roles": ["ADMIN"],
        "iat": now,
        "exp": now + 60,
        "jti": "x",
        "sid": "6f1c1d34-5bb0-4b50-9a53-0f8b3f2a7e11",
    }
    base.update(changes)
    return {k: v for k, v in base.items() if v is not None}


def b64(data: dict[str, Any]) -> str:
    return base64.urlsafe_b64encode(json.dumps(data).encode()).rstrip(b"=").decode()


def audit_rows(sql: psycopg.Connection[Any]) -> list[tuple[Any, ...]]:
    return sql.execute(
        "SELECT event_type, actor, target_type, target_id, metadata::text FROM audit_events"
        " ORDER BY id"
    ).fetchall()


def event_types(sql: psycopg.Connection[Any]) -> list[str]:
    return [row[0] for row in audit_rows(sql)]


# -- roles and passwords ----------------------------------------------------------------------


def test_role_parse_names_field_and_value() -> None:
    assert Role.parse("operator") is Role.OPERATOR
    assert Role.parse(Role.ADMIN) is Role.ADMIN
    assert Role.VIEWER < Role.OPERATOR < Role.ADMIN
    with pytest.raises(InvalidInput) as caught:
        Role.parse("root", "body.role")
    assert caught.value.field == "body.role"
    assert caught.value.value == "root"


async def test_password_policy_never_echoes_the_password(app: App) -> None:
    auth = await service(app)
    for bad in ("short-pw", "x" * 1025):
        with pytest.raises(InvalidInput) as caught:
            await auth.create_user("ada@example.com", bad, Role.VIEWER)
        assert caught.value.field == "password"
        assert bad not in str(caught.value) and bad not in repr(caught.value)


# -- access tokens --------------------------------------------------------------------------


async def test_access_token_round_trip(app: App) -> None:
    auth = await service(app)
    user = await auth.create_user("ada@example.com", PASSWORD, Role.OPERATOR)
    pair = await login(auth)
    assert pair.expires_in == int(auth.settings.access_token_ttl)
    assert PASSWORD not in repr(pair) and pair.refresh_token not in repr(pair)
    principal = auth.verify_access(pair.access_token)
    session = principal.session  # the login's refresh token family (its `sid` claim)
    assert (
        session is not None
        and str(session)
        == jwt.decode(pair.access_token, options={"verify_signature": False})["sid"]
    )
    assert principal == Principal(
        user.id, "ada@example.com", Role.OPERATOR, "session", None, session=session
    )
    assert principal.actor == "user:ada@example.com"
    assert await auth.authenticate(pair.access_token) == principal
    decoded = jwt.decode(pair.access_token, options={"verify_signature": False})
    assert decoded["roles"] == ["OPERATOR"] and decoded["sub"] == str(user.id)


async def test_forged_or_stale_access_tokens_are_refused(app: App) -> None:
    auth = await service(app)
    key = auth._signing_key
    other_key = "another-key-that-is-long-enough-for-hs256!!"
    now = int(time.time())
    forged = {
        "alg none": b64({"alg": "none", "typ": "JWT"}) + "." + b64(claims(auth)) + ".",
        "other key": jwt.encode(claims(auth), other_key, algorithm="HS256"),
        "other alg": jwt.encode(claims(auth), key, algorithm="HS512"),
        "wrong issuer": jwt.encode(claims(auth, iss="someone-else"), key, algorithm="HS256"),
        "wrong audience": jwt.encode(claims(auth, aud="other-api"), key, algorithm="HS256"),
        "expired": jwt.encode(claims(auth, iat=now - 120, exp=now - 60), key, algorithm="HS256"),
        "no exp": jwt.encode(claims(auth, exp=None), key, algorithm="HS256"),
        "no sub": jwt.encode(claims(auth, sub=None), key, algorithm="HS256"),
        "unknown role": jwt.encode(claims(auth, roles=["ROOT"]), key, algorithm="HS256"),
        "two roles": jwt.encode(claims(auth, roles=["VIEWER", "ADMIN"]), key, algorithm="HS256"),
        "no session": jwt.encode(claims(auth, sid=None), key, algorithm="HS256"),
        "bad session": jwt.encode(claims(auth, sid="nope"), key, algorithm="HS256"),
        "garbage": "not.a.token",
        "empty": "",
    }
    assert auth.verify_access(jwt.encode(claims(auth), key, algorithm="HS256")).role is Role.ADMIN
    for case, token in forged.items():
        with pytest.raises(AuthError):
            auth.verify_access(token)
            pytest.fail(f"{case} was accepted")
        with pytest.raises(AuthError):
            await auth.authenticate(token)


# -- signing key ----------------------------------------------------------------------------


async def test_signing_key_generated_once_and_shared(
    app: App, sql: psycopg.Connection[Any]
) -> None:
    first, second = await asyncio.gather(service(app), service(app))  # concurrent starts agree
    third = await service(app)  # a later start (a restart) reuses it
    assert first._signing_key == second._signing_key == third._signing_key
    assert len(first._signing_key) >= 32
    [(count,)] = sql.execute("SELECT count(*) FROM secrets WHERE name = 'jwt_signing_key'")
    assert count == 1

    await first.create_user("ada@example.com", PASSWORD, Role.VIEWER)
    pair = await login(first)
    assert third.verify_access(pair.access_token).email == "ada@example.com"

    configured = await service(app, jwt_secret="k" * 40)
    assert configured._signing_key == "k" * 40
    with pytest.raises(AuthError):
        configured.verify_access(pair.access_token)


async def test_configured_key_is_not_stored(app: App, sql: psycopg.Connection[Any]) -> None:
    await service(app, jwt_secret="k" * 40)
    [(count,)] = sql.execute("SELECT count(*) FROM secrets")
    assert count == 0


# -- bootstrap and users --------------------------------------------------------------------


async def test_bootstrap_admin_is_idempotent(app: App, sql: psycopg.Connection[Any]) -> None:
    auth = await service(app)
    first = await auth.bootstrap_admin(None, None)
    assert first.created and first.email == "admin@localhost"
    assert first.generated_password is not None
    assert first.generated_password not in repr(first)
    again = await auth.bootstrap_admin("other@example.com", PASSWORD)
    assert not again.created and again.generated_password is None
    [(count,)] = sql.execute("SELECT count(*) FROM users")
    assert count == 1
    pair = await auth.login("admin@localhost", first.generated_password, ADDRESS)
    assert pair.user.role is Role.ADMIN


async def test_concurrent_bootstraps_create_one_admin(
    app: App, sql: psycopg.Connection[Any]
) -> None:
    one, two = await service(app), await service(app)
    results = await asyncio.gather(
        one.bootstrap_admin("root@example.com", PASSWORD),
        two.bootstrap_admin("root@example.com", PASSWORD),
    )
    assert sorted(r.created for r in results) == [False, True]
    assert sql.execute("SELECT email, role FROM users").fetchall() == [
        ("root@example.com", "ADMIN")
    ]


async def test_create_user_checks_email_and_duplicates(app: App) -> None:
    auth = await service(app)
    user = await auth.create_user("  Ada@Example.com ", PASSWORD, "viewer", name="Ada")
    assert (user.email, user.name, user.role) == ("Ada@Example.com", "Ada", Role.VIEWER)
    assert await auth.get_user(user.id) == user
    assert await auth.list_users() == [user]
    with pytest.raises(ConflictError):
        await auth.create_user("ada@EXAMPLE.com", PASSWORD, Role.VIEWER)
    for bad in ("no-at-sign", "a@b@c", "with space@example.com", "@example.com", "x" * 320 + "@a"):
        with pytest.raises(InvalidInput) as caught:
            await auth.create_user(bad, PASSWORD, Role.VIEWER)
        assert caught.value.field == "email"
    with pytest.raises(InvalidInput):
        await auth.create_user("bob@example.com", PASSWORD, "superuser")
    with pytest.raises(NotFoundError):
        await auth.get_user(999_999)


# -- login ----------------------------------------------------------------------------------


async def test_failed_logins_all_say_the_same(app: App, sql: psycopg.Connection[Any]) -> None:
    auth = await service(app)
    user = await auth.create_user("ada@example.com", PASSWORD, Role.VIEWER)
    await auth.create_user("off@example.com", PASSWORD, Role.VIEWER)
    await auth.disable((await auth.list_users())[1].id, "user:admin@example.com")
    messages = []
    for email, password in [
        ("nobody@example.com", PASSWORD),
        ("ada@example.com", "wrong password here"),
        ("off@example.com", PASSWORD),
    ]:
        with pytest.raises(AuthError) as caught:
            await auth.login(email, password, ADDRESS)
        assert not isinstance(caught.value, LoginThrottled)
        messages.append(str(caught.value))
    assert messages == ["invalid email or password"] * 3
    [(failures,)] = sql.execute("SELECT count(*) FROM login_failures WHERE NOT checking")
    assert failures == 3  # settled: no check is left running

    pair = await auth.login(" ADA@example.com ", PASSWORD, ADDRESS)
    assert pair.user.id == user.id and pair.user.last_login_at is not None
    assert event_types(sql).count("user.login_failed") == 3


async def test_a_failed_login_keeps_an_unknown_email_only_as_a_keyed_digest(
    app: App, sql: psycopg.Connection[Any]
) -> None:
    auth = await service(app)
    user = await auth.create_user("ada@example.com", PASSWORD, Role.VIEWER)
    typed = "Tr0ub4dor&3-typed-into-the-email-box"  # a password typed in the wrong field
    for email in (typed, f" {typed.upper()} ", "ada@example.com"):
        with pytest.raises(AuthError):
            await auth.login(email, OTHER_PASSWORD, ADDRESS)
    failed = [r for r in audit_rows(sql) if r[0] == "user.login_failed"]
    assert typed.casefold() not in json.dumps([[str(v) for v in r] for r in failed]).casefold()
    unknown = [r[3] for r in failed[:2]]
    assert unknown[0] == unknown[1] and unknown[0].startswith("unknown-email:")  # read alike
    assert failed[2][3] == str(user.id)  # a known account's failure names the account


async def test_login_throttled_per_account_even_with_the_right_password(app: App) -> None:
    auth = await service(app, login_max_per_account=2, login_window=600)
    await auth.create_user("ada@example.com", PASSWORD, Role.VIEWER)
    for address in ("198.51.100.1", "198.51.100.2"):  # per account, whatever the address
        with pytest.raises(AuthError):
            await auth.login("ada@example.com", "wrong password here", address)
    with pytest.raises(LoginThrottled) as caught:
        await auth.login("Ada@example.com", PASSWORD, "198.51.100.3")
    assert 0 < caught.value.retry_after <= 600
    assert await login(await service(app)) is not None  # the default limit is not reached


async def test_parallel_guesses_cannot_slip_under_the_login_limit(
    app: App, sql: psycopg.Connection[Any]
) -> None:
    # Each attempt is counted before its password is checked, one attempt per account at a
    # time: of twelve parallel guesses exactly the limit get a password check.
    auth = await service(app, login_max_per_account=3, login_window=600)
    await auth.create_user("ada@example.com", PASSWORD, Role.VIEWER)
    checked = await guesses_checked(app, 12)
    assert len(checked) == 3
    assert all(str(o) == "invalid email or password" for o in checked)
    [(failures,)] = sql.execute("SELECT count(*) FROM login_failures")
    assert failures == 3  # a throttled attempt is refused, not counted


async def test_parallel_guesses_are_counted_under_repeatable_read_too(
    database_url: str, schema: str, clean: None
) -> None:
    # the count must see the attempt that held the lock before: a server (or role) whose
    # default isolation is REPEATABLE READ would otherwise let every waiter count stale rows
    isolation = r"-c default_transaction_isolation=repeatable\ read"
    app = App(database_url=make_conninfo(database_url, options=isolation), schema=schema)
    try:
        auth = await service(app, login_max_per_account=3, login_window=600)
        await auth.create_user("ada@example.com", PASSWORD, Role.VIEWER)
        assert len(await guesses_checked(app, 12)) == 3
    finally:
        await app.aclose()


async def test_right_passwords_over_the_limit_in_parallel_are_told_to_retry_in_a_moment(
    app: App, sql: psycopg.Connection[Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    # An attempt is counted before its password is checked, so attempts whose checks are
    # still running fill the count; one over the limit only because of them may retry in a
    # second (they may all prove right), not after the whole window.
    from tickwork.auth import service as auth_module

    auth = await service(app, login_max_per_account=3, login_window=600)
    await auth.create_user("ada@example.com", PASSWORD, Role.VIEWER)
    loop = asyncio.get_running_loop()
    checking: list[int] = []
    all_checking = asyncio.Event()
    release = threading.Event()
    matches = auth_module._password_matches

    def held_check(password_hash: str | None, password: str) -> bool:  # in a thread
        checking.append(1)
        if len(checking) == 3:
            loop.call_soon_threadsafe(all_checking.set)
        release.wait(HANG_GUARD)
        return matches(password_hash, password)

    monkeypatch.setattr(auth_module, "_password_matches", held_check)
    logins = [asyncio.create_task(login(auth)) for _ in range(3)]
    await asyncio.wait_for(all_checking.wait(), HANG_GUARD)
    with pytest.raises(LoginThrottled) as caught:
        await login(auth)
    assert caught.value.retry_after == auth_module.LOGIN_CHECK_RETRY_AFTER
    release.set()
    assert all(pair.user.email == "ada@example.com" for pair in await asyncio.gather(*logins))
    [(failures,)] = sql.execute("SELECT count(*) FROM login_failures")
    assert failures == 0  # all three forgiven
    assert await login(auth) is not None


async def test_a_password_check_that_never_ended_counts_as_a_failure(
    app: App, sql: psycopg.Connection[Any]
) -> None:
    # its process died mid-check: after LOGIN_CHECK_TIMEOUT the reserved attempt is a failure
    auth = await service(app, login_max_per_account=2, login_window=600)
    await auth.create_user("ada@example.com", PASSWORD, Role.VIEWER)
    sql.execute(
        "INSERT INTO login_failures (email, address, checking, occurred_at)"
        " SELECT 'ada@example.com', %s, true, now() - interval '2 minutes'"
        " FROM generate_series(1, 2)",
        [ADDRESS],
    )
    with pytest.raises(LoginThrottled) as caught:
        await login(auth)
    assert 400 < caught.value.retry_after <= 480  # the window, not a moment


async def test_parallel_attempts_on_one_account_wait_without_holding_connections(
    app: App, monkeypatch: pytest.MonkeyPatch
) -> None:
    # attempts of one process take their turn in memory before the database lock, so a
    # flood on one account holds one pool connection at the throttle, not one per attempt
    auth = await service(app, login_max_per_account=3, login_window=600)
    await auth.create_user("ada@example.com", PASSWORD, Role.VIEWER)
    lock, reserve = auth.store.login_attempt_lock, auth.store.login_attempt_reserve
    at_the_lock = 0
    most = 0

    async def counting_lock(conn: Any, **params: Any) -> None:
        nonlocal at_the_lock, most
        at_the_lock += 1
        most = max(most, at_the_lock)
        await lock(conn, **params)

    async def counting_reserve(conn: Any, **params: Any) -> Any:
        nonlocal at_the_lock
        try:
            return await reserve(conn, **params)
        finally:
            at_the_lock -= 1

    monkeypatch.setattr(auth.store, "login_attempt_lock", counting_lock)
    monkeypatch.setattr(auth.store, "login_attempt_reserve", counting_reserve)
    await asyncio.gather(
        *(auth.login("ada@example.com", "wrong", f"198.51.100.{n}") for n in range(12)),
        return_exceptions=True,
    )
    assert most == 1


async def test_a_right_password_is_not_counted_as_a_failure(
    app: App, sql: psycopg.Connection[Any]
) -> None:
    auth = await service(app, login_max_per_account=2)
    user = await auth.create_user("ada@example.com", PASSWORD, Role.VIEWER)
    for _ in range(5):  # more than the limit, all right
        await login(auth)
    await auth.change_password(user.id, PASSWORD, OTHER_PASSWORD)
    [(failures,)] = sql.execute("SELECT count(*) FROM login_failures")
    assert failures == 0


async def test_wrong_current_passwords_are_throttled_like_logins(app: App) -> None:
    auth = await service(app, login_max_per_account=2, login_window=600)
    user = await auth.create_user("ada@example.com", PASSWORD, Role.VIEWER)
    for n in range(2):
        with pytest.raises(IncorrectPassword):  # bad input of a logged-in user: 400, not 401
            await auth.change_password(user.id, f"guess number {n}", OTHER_PASSWORD)
    with pytest.raises(LoginThrottled):  # even the right one, until the window moves on
        await auth.change_password(user.id, PASSWORD, OTHER_PASSWORD)
    with pytest.raises(LoginThrottled):  # they count against the account's logins too
        await login(auth)


async def test_login_throttled_per_address(app: App) -> None:
    auth = await service(app, login_max_per_address=2)
    await auth.create_user("ada@example.com", PASSWORD, Role.VIEWER)
    for email in ("x@example.com", "y@example.com"):
        with pytest.raises(AuthError):
            await auth.login(email, PASSWORD, ADDRESS)
    with pytest.raises(LoginThrottled):
        await login(auth)
    assert (await auth.login("ada@example.com", PASSWORD, "203.0.113.9")).user.email


async def test_login_rehashes_weaker_hashes(app: App, sql: psycopg.Connection[Any]) -> None:
    auth = await service(app)
    user = await auth.create_user("ada@example.com", PASSWORD, Role.VIEWER)
    weak = PasswordHasher(time_cost=1, memory_cost=1024, parallelism=1).hash(PASSWORD)
    assert needs_rehash(weak)
    sql.execute("UPDATE users SET password_hash = %s WHERE id = %s", [weak, user.id])
    await login(auth)
    [(stored,)] = sql.execute("SELECT password_hash FROM users WHERE id = %s", [user.id])
    assert stored != weak and stored.startswith("$argon2id$")
    assert not needs_rehash(stored)
    await login(auth)  # the new hash verifies


# -- refresh tokens -------------------------------------------------------------------------


async def test_refresh_rotates_and_reuse_revokes_the_family(
    app: App, sql: psycopg.Connection[Any]
) -> None:
    auth = await service(app)
    await auth.create_user("ada@example.com", PASSWORD, Role.OPERATOR)
    first = await login(auth)
    other_session = await login(auth)
    second = await auth.refresh(first.refresh_token)
    assert second.refresh_token != first.refresh_token
    assert auth.verify_access(second.access_token).role is Role.OPERATOR

    with pytest.raises(AuthError, match="already used"):
        await auth.refresh(first.refresh_token)  # replayed: the family is revoked
    with pytest.raises(AuthError):
        await auth.refresh(second.refresh_token)  # so its successor is dead too
    reasons = sql.execute(
        "SELECT DISTINCT revoked_reason FROM refresh_tokens WHERE family ="
        " (SELECT family FROM refresh_tokens WHERE used_at IS NOT NULL)"
    ).fetchall()
    assert reasons == [("reuse",)]
    assert "auth.refresh_reuse" in event_types(sql)
    assert await auth.refresh(other_session.refresh_token)  # other sessions are untouched

    for bad in ("twr_unknown", "", "garbage"):
        with pytest.raises(AuthError):
            await auth.refresh(bad)


async def test_concurrent_refreshes_have_one_winner(app: App, sql: psycopg.Connection[Any]) -> None:
    auth = await service(app)
    await auth.create_user("ada@example.com", PASSWORD, Role.VIEWER)
    pair = await login(auth)
    schema = app.settings.schema_name

    # Hold the token's row so both refreshes are inside their UPDATE, waiting, before
    # either can win: the race is forced, not hoped for.
    holder = await app.db.connect_async(autocommit=False)
    watcher = await app.db.connect_async()  # own transactions: pg_stat_activity is fresh
    try:
        await holder.execute(f"SELECT * FROM {schema}.refresh_tokens FOR UPDATE")
        racing = [asyncio.create_task(auth.refresh(pair.refresh_token)) for _ in range(2)]
        for _ in range(WAIT_GUARD):
            cur = await watcher.execute(
                "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock'"
                " AND query LIKE %s",
                [f"%{schema}.refresh_tokens%"],
            )
            row = await cur.fetchone()
            if row is not None and row[0] >= 2:
                break
        else:
            pytest.fail("the two refreshes never both waited on the row")
        await holder.commit()
    finally:
        await holder.close()
        await watcher.close()
    results = await asyncio.gather(*racing, return_exceptions=True)

    winners = [r for r in results if isinstance(r, TokenPair)]
    losers = [r for r in results if isinstance(r, AuthError)]
    assert all("already used" in str(r) for r in losers)  # the loser is treated as reuse
    assert len(winners) == 1 and len(losers) == 1
    [(successors, live)] = sql.execute(
        "SELECT count(*) FILTER (WHERE used_at IS NULL),"
        " count(*) FILTER (WHERE used_at IS NULL AND revoked_at IS NULL) FROM refresh_tokens"
    )
    assert successors == 1  # never two successors
    assert live == 0  # and the loser's reuse revoked the family, successor included
    with pytest.raises(AuthError):
        await auth.refresh(winners[0].refresh_token)


async def test_logout_and_credential_changes_end_sessions(
    app: App, sql: psycopg.Connection[Any]
) -> None:
    auth = await service(app)
    await auth.bootstrap_admin("root@example.com", PASSWORD)  # keeps an admin around
    user = await auth.create_user("ada@example.com", PASSWORD, Role.OPERATOR)

    pair = await login(auth)
    await auth.logout(pair.refresh_token)
    await auth.logout(pair.refresh_token)  # idempotent
    await auth.logout("twr_never-issued")  # unknown: no error
    with pytest.raises(AuthError):
        await auth.refresh(pair.refresh_token)

    pair = await login(auth)
    with pytest.raises(IncorrectPassword):
        await auth.change_password(user.id, "not the password!", OTHER_PASSWORD)
    with pytest.raises(InvalidInput):
        await auth.change_password(user.id, PASSWORD, "short")
    await auth.change_password(user.id, PASSWORD, OTHER_PASSWORD)
    with pytest.raises(AuthError):
        await auth.refresh(pair.refresh_token)
    with pytest.raises(AuthError):
        await login(auth)
    pair = await auth.login("ada@example.com", OTHER_PASSWORD, ADDRESS)

    changed = await auth.set_role(user.id, Role.VIEWER, "user:root@example.com")
    assert changed.role is Role.VIEWER
    with pytest.raises(AuthError):
        await auth.refresh(pair.refresh_token)
    pair = await auth.login("ada@example.com", OTHER_PASSWORD, ADDRESS)
    assert auth.verify_access(pair.access_token).role is Role.VIEWER

    assert (await auth.disable(user.id, "user:root@example.com")).disabled
    with pytest.raises(AuthError):
        await auth.refresh(pair.refresh_token)
    with pytest.raises(AuthError, match="invalid email or password"):
        await auth.login("ada@example.com", OTHER_PASSWORD, ADDRESS)
    assert not (await auth.disable(user.id, "user:root@example.com", disabled=False)).disabled
    await auth.login("ada@example.com", OTHER_PASSWORD, ADDRESS)

    reasons = {r for (r,) in sql.execute("SELECT revoked_reason FROM refresh_tokens")}
    assert {"logout", "password_changed", "role_changed", "disabled"} <= reasons
    events = event_types(sql)
    for event in ("user.logout", "user.password_changed", "user.role_changed", "user.disabled"):
        assert event in events
    with pytest.raises(NotFoundError):
        await auth.set_role(999_999, Role.VIEWER, "user:root@example.com")


async def test_the_last_enabled_admin_stays(app: App) -> None:
    auth = await service(app)
    await auth.bootstrap_admin("root@example.com", PASSWORD)
    [root] = await auth.list_users()
    with pytest.raises(ConflictError):
        await auth.set_role(root.id, Role.OPERATOR, "user:root@example.com")
    with pytest.raises(ConflictError):
        await auth.disable(root.id, "user:root@example.com")
    second = await auth.create_user("two@example.com", PASSWORD, Role.ADMIN)
    assert (await auth.set_role(root.id, Role.OPERATOR, "user:two@example.com")).role
    with pytest.raises(ConflictError):
        await auth.disable(second.id, "user:two@example.com")


# -- invites --------------------------------------------------------------------------------


async def test_invite_single_use_with_fixed_role(app: App, sql: psycopg.Connection[Any]) -> None:
    auth = await service(app)
    invite, token = await auth.create_invite("new@example.com", Role.OPERATOR, "user:root@x")
    assert token.startswith("twi_") and invite.role is Role.OPERATOR
    assert invite.expires_at > invite.created_at
    assert await auth.list_invites() == [invite]

    user = await auth.accept_invite(token, "New Person", PASSWORD)
    assert (user.email, user.name, user.role) == ("new@example.com", "New Person", Role.OPERATOR)
    with pytest.raises(AuthError):
        await auth.accept_invite(token, "Again", PASSWORD)
    [(count,)] = sql.execute("SELECT count(*) FROM users")
    assert count == 1
    [(linked,)] = sql.execute("SELECT user_id FROM invites WHERE id = %s", [invite.id])
    assert linked == user.id
    assert (await auth.list_invites())[0].accepted_at is not None
    assert (await login(auth, "new@example.com")).user.role is Role.OPERATOR
    with pytest.raises(ConflictError):
        await auth.revoke_invite(invite.id, "user:root@x")
    with pytest.raises(ConflictError):
        await auth.create_invite("NEW@example.com", Role.VIEWER, "user:root@x")


async def test_concurrent_accepts_create_one_user(app: App, sql: psycopg.Connection[Any]) -> None:
    auth = await service(app)
    _, token = await auth.create_invite("new@example.com", Role.VIEWER, "user:root@x")
    results = await asyncio.gather(
        auth.accept_invite(token, "A", PASSWORD),
        auth.accept_invite(token, "B", PASSWORD),
        return_exceptions=True,
    )
    assert sorted(type(r).__name__ for r in results) == ["AuthError", "User"]
    [(count,)] = sql.execute("SELECT count(*) FROM users")
    assert count == 1


async def test_expired_revoked_and_unknown_invites_are_refused(
    app: App, sql: psycopg.Connection[Any]
) -> None:
    auth = await service(app)
    expired, expired_token = await auth.create_invite("a@example.com", Role.VIEWER, "system")
    sql.execute(
        "UPDATE invites SET expires_at = now() - interval '1 second' WHERE id = %s", [expired.id]
    )
    revoked, revoked_token = await auth.create_invite("b@example.com", Role.VIEWER, "system")
    assert (await auth.revoke_invite(revoked.id, "system")).revoked_at is not None
    assert (await auth.revoke_invite(revoked.id, "system")).revoked_at is not None  # idempotent
    for token in (expired_token, revoked_token, "twi_never-issued"):
        with pytest.raises(AuthError):
            await auth.accept_invite(token, "", PASSWORD)
    with pytest.raises(NotFoundError):
        await auth.revoke_invite(999_999, "system")
    [(count,)] = sql.execute("SELECT count(*) FROM users")
    assert count == 0


# -- API tokens -----------------------------------------------------------------------------


async def test_api_token_role_capped_and_revocable(app: App, sql: psycopg.Connection[Any]) -> None:
    auth = await service(app)
    await auth.bootstrap_admin("root@example.com", PASSWORD)
    owner = await auth.create_user("ada@example.com", PASSWORD, Role.OPERATOR)
    other = await auth.create_user("bob@example.com", PASSWORD, Role.OPERATOR)

    with pytest.raises(PermissionDenied):
        await auth.create_api_token(owner.id, "ci", Role.ADMIN, None)
    with pytest.raises(InvalidInput):
        await auth.create_api_token(owner.id, "ci", Role.VIEWER, -5)
    api_token, secret = await auth.create_api_token(owner.id, "ci", Role.OPERATOR, 3600)
    assert secret.startswith(API_TOKEN_PREFIX) and api_token.expires_at is not None

    principal = await auth.authenticate(secret)
    assert principal == Principal(owner.id, owner.email, Role.OPERATOR, "api_token", api_token.id)
    assert principal.actor == f"api_token:{api_token.id}:ada@example.com"
    [listed] = await auth.list_api_tokens(owner.id)
    assert listed.last_used_at is not None

    await auth.set_role(owner.id, Role.VIEWER, "user:root@example.com")
    assert (await auth.authenticate(secret)).role is Role.VIEWER  # capped by the owner today

    with pytest.raises(NotFoundError):
        await auth.revoke_api_token(other.id, api_token.id)  # not bob's token
    assert (await auth.revoke_api_token(owner.id, api_token.id)).revoked_at is not None
    with pytest.raises(AuthError):
        await auth.authenticate(secret)

    lasting, lasting_secret = await auth.create_api_token(other.id, "cron", "viewer", None)
    assert lasting.expires_at is None
    assert (await auth.authenticate(lasting_secret)).user_id == other.id
    await auth.disable(other.id, "user:root@example.com")
    with pytest.raises(AuthError):
        await auth.authenticate(lasting_secret)  # a disabled owner's tokens stop working
    await auth.disable(other.id, "user:root@example.com", disabled=False)
    sql.execute(
        "UPDATE api_tokens SET expires_at = now() - interval '1 second' WHERE id = %s",
        [lasting.id],
    )
    with pytest.raises(AuthError):
        await auth.authenticate(lasting_secret)
    with pytest.raises(AuthError):
        await auth.authenticate(API_TOKEN_PREFIX + "never-issued")
    events = event_types(sql)
    assert "api_token.created" in events and "api_token.revoked" in events


# -- audit ----------------------------------------------------------------------------------


async def test_audit_events_never_hold_secrets(app: App, sql: psycopg.Connection[Any]) -> None:
    auth = await service(app)
    boot = await auth.bootstrap_admin(None, None)
    assert boot.generated_password is not None
    secrets = [PASSWORD, OTHER_PASSWORD, boot.generated_password, auth._signing_key]
    user = await auth.create_user("ada@example.com", PASSWORD, Role.OPERATOR)
    with pytest.raises(AuthError):
        await auth.login("ada@example.com", OTHER_PASSWORD, ADDRESS)
    pair = await login(auth)
    secrets += [pair.access_token, pair.refresh_token]
    second = await auth.refresh(pair.refresh_token)
    secrets += [second.access_token, second.refresh_token]
    with pytest.raises(AuthError):
        await auth.refresh(pair.refresh_token)
    _, api_secret = await auth.create_api_token(user.id, "ci", Role.VIEWER, None)
    _, invite_token = await auth.create_invite("new@example.com", Role.VIEWER, "user:admin")
    secrets += [api_secret, invite_token]
    await auth.accept_invite(invite_token, "New", OTHER_PASSWORD)
    await auth.change_password(user.id, PASSWORD, OTHER_PASSWORD + "!")
    secrets.append(OTHER_PASSWORD + "!")
    hashes = [h for (h,) in sql.execute("SELECT password_hash FROM users")]

    rows = audit_rows(sql)
    assert {r[0] for r in rows} >= {
        "user.created",
        "user.login",
        "user.login_failed",
        "auth.refresh_reuse",
        "api_token.created",
        "invite.created",
        "invite.accepted",
        "user.password_changed",
    }
    trail = json.dumps([[str(v) for v in row] for row in rows])
    for secret in secrets + hashes:
        assert secret not in trail
