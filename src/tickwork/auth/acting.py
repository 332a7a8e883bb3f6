"""Whoever makes an identity change, with their authority checked again inside the
transaction that makes it.

A request's role is checked when it starts (``api/security.py``); the change it makes to
users, invites or API tokens commits later. In between, another administrator (or the
command line) may demote or disable the caller, and without a second look a demoted ADMIN
racing its own demotion set its role back (9 of 20 trials). So each such change locks the
acting user's row (``user_lock``, FOR SHARE: a role change or disable of that user waits for
the change, or has committed and is seen) and reads its authority again: its role, that it is
enabled, that the request's session or API token still stands. And nobody raises their own
role or enables themselves, whatever their role.

The command line and the library act as a local superuser named by a string (``cli:<login>``,
``system``): they hold the database's credentials, so there is nothing to check again. Their
changes take the same locks, so a racing request sees them once they commit.
"""

from __future__ import annotations

from typing import Any

import psycopg

from tickwork.auth.models import Principal
from tickwork.auth.roles import Role
from tickwork.db.store import Store
from tickwork.errors import AuthError, PermissionDenied

__all__ = ["Actor", "actor_name", "check_actor"]

Actor = Principal | str
"""Who makes a change: a :class:`Principal` (a request through the API or MCP), checked again
in the change's transaction; or the name of the local superuser (the command line, the
library), not checked."""


def actor_name(actor: Actor) -> str:
    """How the audit trail names ``actor``."""
    return actor if isinstance(actor, str) else actor.actor


async def check_actor(
    conn: psycopg.AsyncConnection[Any],
    store: Store,
    actor: Actor,
    *,
    needed: Role = Role.ADMIN,
    target: int | None = None,
    role: Role | None = None,
    enabling: bool = False,
) -> None:
    """Lock the acting user's row to the end of the caller's transaction (READ COMMITTED:
    the read after the lock must see a change committed while it waited) and refuse when
    they may no longer make this change: :class:`AuthError` (401) when the user, the session
    or the API token is gone; :class:`PermissionDenied` (403) when they are disabled or below
    ``needed`` now, or when the change is to themselves (``target``) and would raise their
    role to ``role`` or enable them (``enabling``). Nothing for a local superuser."""
    if isinstance(actor, str):
        return
    await store.user_lock(conn, user_id=actor.user_id)
    row = await store.actor_authority(
        conn, user_id=actor.user_id, family=actor.session, token_id=actor.token_id
    )
    if row is None:
        raise AuthError(f"the acting user {actor.user_id} no longer exists")
    current = Role[row["role"]]
    if target == actor.user_id:
        if role is not None and role > current:
            raise PermissionDenied(
                "another ADMIN",
                f"{current.name} (their own)",
                f"a user may not raise their own role: user {target} is {current.name} now;"
                " another ADMIN may change it",
            )
        if enabling and row["disabled"]:
            raise PermissionDenied(
                "another ADMIN",
                "disabled (their own)",
                f"a user may not enable themselves: user {target} is disabled; another ADMIN"
                " may enable them",
            )
    if row["disabled"]:
        raise PermissionDenied(
            needed.name,
            "disabled",
            f"user {actor.user_id} is disabled now: it may change nothing",
        )
    held = current
    if actor.via == "api_token" and row["token_role"] is not None:
        held = min(held, Role[row["token_role"]])
    if held < needed:
        raise PermissionDenied(
            needed.name,
            held.name,
            f"this change needs role {needed.name}; the caller is {held.name} now (it changed"
            " since the request began)",
        )
    if actor.via == "session" and not row["session_live"]:
        raise AuthError(
            "the session of this request has ended (a role change, disable, password change"
            " or logout); log in again"
        )
    if actor.via == "api_token" and row["token_role"] is None:
        raise AuthError("the API token of this request was revoked or has expired")
