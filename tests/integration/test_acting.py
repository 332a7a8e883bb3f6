"""Identity changes check their actor again inside the transaction that makes them: a request
whose caller was demoted, disabled, logged out or whose API token was revoked after the
request's own check changes nothing; nobody raises their own role or enables themselves; the
command line (a local superuser, named by a string) keeps working. The race itself, with
threads against a real serve, is tests/e2e/test_role_race.py."""

from __future__ import annotations

import asyncio
from typing import Any

import psycopg
import pytest

from tickwork import App
from tickwork.auth import AuthService, Principal, Role
from tickwork.errors import AuthError, PermissionDenied

PASSWORD = "correct horse battery staple"
ADDRESS = "192.0.2.10"
CLI = "cli:root"
WAIT_GUARD = 60.0  # not a timing assertion: only stops a broken test from hanging


async def started(app: App) -> AuthService:
    auth = AuthService(await app.db.async_pool(), app.db.store, app.settings.auth)
    await auth.start()
    return auth


async def admins(auth: AuthService) -> tuple[Principal, Principal]:
    """Two ADMINs logged in: ada (the one who gets demoted) and bob, as their requests see
    them when they start."""
    found = []
    for email in ("ada@example.com", "bob@example.com"):
        await auth.create_user(email, PASSWORD, Role.ADMIN)
        pair = await auth.login(email, PASSWORD, ADDRESS)
        found.append(await auth.authenticate(pair.access_token))
    return found[0], found[1]


async def test_a_demoted_admin_cannot_set_its_role_back(app: App) -> None:
    auth = await started(app)
    ada, bob = await admins(auth)
    await auth.set_role(ada.user_id, Role.OPERATOR, bob)
    # ada's request began while she was ADMIN (the route's check passed) and commits now
    with pytest.raises(PermissionDenied, match="may not raise their own role"):
        await auth.set_role(ada.user_id, Role.ADMIN, ada)
    assert (await auth.get_user(ada.user_id)).role is Role.OPERATOR


async def test_a_disabled_admin_cannot_enable_itself(app: App) -> None:
    auth = await started(app)
    ada, bob = await admins(auth)
    await auth.disable(ada.user_id, bob)
    with pytest.raises(PermissionDenied, match="may not enable themselves"):
        await auth.disable(ada.user_id, ada, disabled=False)
    assert (await auth.get_user(ada.user_id)).disabled


async def test_a_cli_demotion_is_not_undone_by_a_request(app: App) -> None:
    auth = await started(app)
    ada, _ = await admins(auth)
    await auth.set_role(ada.user_id, Role.VIEWER, CLI)  # the local superuser: not checked
    with pytest.raises(PermissionDenied):
        await auth.set_role(ada.user_id, Role.ADMIN, ada)
    assert (await auth.get_user(ada.user_id)).role is Role.VIEWER
    # and the command line may still do what no request may: enable, promote anyone
    await auth.disable(ada.user_id, CLI)
    await auth.disable(ada.user_id, CLI, disabled=False)
    assert (await auth.set_role(ada.user_id, Role.ADMIN, CLI)).role is Role.ADMIN


async def test_a_demoted_admin_changes_nobody_and_invites_nobody(app: App) -> None:
    auth = await started(app)
    ada, bob = await admins(auth)
    carl = await auth.create_user("carl@example.com", PASSWORD, Role.VIEWER)
    invite, _ = await auth.create_invite("dora@example.com", Role.VIEWER, bob)
    await auth.set_role(ada.user_id, Role.OPERATOR, bob)
    with pytest.raises(PermissionDenied, match="the caller is OPERATOR now"):
        await auth.set_role(carl.id, Role.ADMIN, ada)  # a friend made ADMIN
    with pytest.raises(PermissionDenied):
        await auth.disable(bob.user_id, ada)  # the other admin locked out
    with pytest.raises(PermissionDenied):
        await auth.create_invite("eve@example.com", Role.ADMIN, ada)  # a new ADMIN account
    with pytest.raises(PermissionDenied):
        await auth.revoke_invite(invite.id, ada)
    assert (await auth.get_user(carl.id)).role is Role.VIEWER
    assert not (await auth.get_user(bob.user_id)).disabled
    assert [i.email for i in await auth.list_invites()] == ["dora@example.com"]


async def test_a_demoted_owner_mints_no_token_above_its_role(app: App) -> None:
    auth = await started(app)
    ada, bob = await admins(auth)
    await auth.set_role(ada.user_id, Role.OPERATOR, bob)
    with pytest.raises(PermissionDenied):  # at_most: the role the request began with
        await auth.create_api_token(ada.user_id, "late", Role.ADMIN, None, at_most=ada.role)
    await auth.disable(ada.user_id, bob)
    with pytest.raises(AuthError, match="disabled"):
        await auth.create_api_token(ada.user_id, "late", Role.VIEWER, None, at_most=ada.role)


async def test_an_ended_session_or_a_revoked_token_changes_nothing(app: App) -> None:
    auth = await started(app)
    ada, bob = await admins(auth)
    carl = await auth.create_user("carl@example.com", PASSWORD, Role.VIEWER)
    _, secret = await auth.create_api_token(bob.user_id, "ops", Role.ADMIN, None)
    by_token = await auth.authenticate(secret)
    await auth.set_password(ada.user_id, "a brand new passphrase", CLI)  # ends her sessions
    with pytest.raises(AuthError, match="session of this request has ended"):
        await auth.set_role(carl.id, Role.OPERATOR, ada)
    [token] = await auth.list_api_tokens(bob.user_id)
    await auth.revoke_api_token(bob.user_id, token.id)
    with pytest.raises(AuthError, match="revoked or has expired"):
        await auth.create_invite("eve@example.com", Role.ADMIN, by_token)
    assert (await auth.get_user(carl.id)).role is Role.VIEWER


async def test_an_admin_token_of_an_operator_acts_as_an_operator(app: App) -> None:
    auth = await started(app)
    _, bob = await admins(auth)
    made, secret = await auth.create_api_token(bob.user_id, "ops", Role.OPERATOR, None)
    assert made.role is Role.OPERATOR
    by_token = await auth.authenticate(secret)
    # a principal claiming more than its token holds (as a stale one could) is held to it
    claimed = Principal(bob.user_id, bob.email, Role.ADMIN, "api_token", made.id)
    with pytest.raises(PermissionDenied, match="OPERATOR now"):
        await auth.create_invite("eve@example.com", Role.VIEWER, claimed)
    with pytest.raises(PermissionDenied):
        await auth.create_invite("eve@example.com", Role.VIEWER, by_token)


async def test_a_demotion_in_flight_is_waited_for_and_seen(
    app: App, database_url: str, schema: str
) -> None:
    """The check is made under the actor's row lock: a demotion that has updated the row but
    not committed makes the self-promotion wait, then refuse once it commits."""
    auth = await started(app)
    ada, _ = await admins(auth)
    with psycopg.connect(database_url) as demoting:  # a transaction, left open
        demoting.execute(f"SET search_path TO {schema}")
        demoting.execute("UPDATE users SET role = 'OPERATOR' WHERE id = %s", [ada.user_id])
        promoting = asyncio.create_task(auth.set_role(ada.user_id, Role.ADMIN, ada))
        await waiting_for_a_lock(database_url, promoting)
        demoting.commit()
    with pytest.raises(PermissionDenied, match="may not raise their own role"):
        await asyncio.wait_for(promoting, WAIT_GUARD)
    assert (await auth.get_user(ada.user_id)).role is Role.OPERATOR


async def waiting_for_a_lock(database_url: str, task: asyncio.Task[Any]) -> None:
    """Until a session of the database waits for a row lock (the task's), failing if the
    task ends first."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + WAIT_GUARD
    with psycopg.connect(database_url, autocommit=True) as look:
        while loop.time() < deadline:
            assert not task.done(), task
            [(waiting,)] = look.execute(
                "SELECT count(*) FROM pg_locks WHERE NOT granted AND locktype = 'transactionid'"
            ).fetchall()
            if waiting:
                return
            await asyncio.sleep(0.01)  # the task runs meanwhile
    raise AssertionError("the self-promotion never waited for the demotion's row lock")
