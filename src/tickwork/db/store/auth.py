"""Statements of ``sql/auth.sql``: users, logins, sessions, API tokens, invites, secrets.

Rows come back undecoded: the auth service reads the password hash off them, which its
types never carry (and decoding here would import :mod:`tickwork.auth`, whose package
imports the service, which imports the store)."""

from __future__ import annotations

from uuid import UUID

from tickwork.db.store.runner import AsyncConn, Row, Runner


def _one(found: list[Row]) -> Row | None:
    return found[0] if found else None


class AuthStatements(Runner):
    """One method per statement of ``sql/auth.sql``."""

    # -- locks and secrets ------------------------------------------------------------------

    async def auth_lock(self, conn: AsyncConn, *, name: str) -> None:
        """Serialise one kind of identity change (``bootstrap``, ``admins``) across
        processes until the end of the caller's transaction."""
        await self._rows(conn, "auth_lock", {"name": name})

    async def secret_put_if_absent(self, conn: AsyncConn, *, name: str, value: str) -> None:
        """Store the secret ``name`` unless one is stored already."""
        await self._rows(conn, "secret_put_if_absent", {"name": name, "value": value})

    async def secret_get(self, conn: AsyncConn, *, name: str) -> str | None:
        """The stored value of the secret ``name``, or None."""
        found = await self._rows(conn, "secret_get", {"name": name})
        value: str | None = found[0]["value"] if found else None
        return value

    # -- users ------------------------------------------------------------------------------

    async def user_any(self, conn: AsyncConn) -> bool:
        """Whether any user exists."""
        found: bool = (await self._rows(conn, "user_any", {}))[0]["any"]
        return found

    async def user_insert(
        self, conn: AsyncConn, *, email: str, name: str, role: str, password_hash: str
    ) -> Row | None:
        """A new user's ``users`` row, or None when the email is taken (in any case)."""
        return _one(
            await self._rows(
                conn,
                "user_insert",
                {"email": email, "name": name, "role": role, "password_hash": password_hash},
            )
        )

    async def user_get(self, conn: AsyncConn, *, user_id: int) -> Row | None:
        """One user's ``users`` row (password hash included), or None."""
        return _one(await self._rows(conn, "user_get", {"user_id": user_id}))

    async def user_lock(self, conn: AsyncConn, *, user_id: int) -> bool:
        """Hold the user's row (FOR SHARE) to the end of the caller's transaction; False when
        there is no such user."""
        return bool(await self._rows(conn, "user_lock", {"user_id": user_id}))

    async def actor_authority(
        self, conn: AsyncConn, *, user_id: int, family: UUID | None, token_id: int | None
    ) -> Row | None:
        """Row ``role, disabled, session_live, token_role`` of an acting user (read after
        :meth:`user_lock`), or None when there is no such user."""
        return _one(
            await self._rows(
                conn,
                "actor_authority",
                {"user_id": user_id, "family": family, "token_id": token_id},
            )
        )

    async def user_get_by_email(self, conn: AsyncConn, *, email: str) -> Row | None:
        """The ``users`` row of an email (compared case-insensitively), or None."""
        return _one(await self._rows(conn, "user_get_by_email", {"email": email}))

    async def user_list(self, conn: AsyncConn) -> list[Row]:
        """Every ``users`` row, oldest first."""
        return await self._rows(conn, "user_list", {})

    async def user_login_succeeded(
        self, conn: AsyncConn, *, user_id: int, new_hash: str | None
    ) -> Row | None:
        """Note a successful login (storing ``new_hash`` when the password was rehashed);
        the user's new row, or None when they were disabled meanwhile."""
        return _one(
            await self._rows(
                conn, "user_login_succeeded", {"user_id": user_id, "new_hash": new_hash}
            )
        )

    async def user_set_role(self, conn: AsyncConn, *, user_id: int, role: str) -> Row | None:
        """Change a user's role; their new row, or None when that would leave no enabled
        administrator (or there is no such user)."""
        return _one(await self._rows(conn, "user_set_role", {"user_id": user_id, "role": role}))

    async def user_set_disabled(
        self, conn: AsyncConn, *, user_id: int, disabled: bool
    ) -> Row | None:
        """Disable or enable a user; their new row, or None when that would disable the
        last enabled administrator (or there is no such user)."""
        return _one(
            await self._rows(conn, "user_set_disabled", {"user_id": user_id, "disabled": disabled})
        )

    async def user_set_password_hash(
        self, conn: AsyncConn, *, user_id: int, new_hash: str, old_hash: str
    ) -> Row | None:
        """Replace a user's password hash if it is still ``old_hash``; their new row, or
        None when it changed meanwhile."""
        return _one(
            await self._rows(
                conn,
                "user_set_password_hash",
                {"user_id": user_id, "new_hash": new_hash, "old_hash": old_hash},
            )
        )

    # -- the login throttle -----------------------------------------------------------------

    async def login_attempt_lock(self, conn: AsyncConn, *, email: str, address: str) -> None:
        """Take the turn of password attempts on ``email`` and from ``address`` until the
        end of the caller's transaction."""
        await self._rows(conn, "login_attempt_lock", {"email": email, "address": address})

    async def login_attempt_reserve(
        self,
        conn: AsyncConn,
        *,
        email: str,
        address: str,
        window: float,
        max_per_account: int,
        max_per_address: int,
        check_timeout: float,
        check_retry_after: float,
    ) -> Row:
        """Count an attempt as a failure before its password is checked, unless a counter
        is at its maximum; row ``account_retry_after, address_retry_after, reserved_id``
        (the waits None and the reserved failure's id when it was counted)."""
        return (
            await self._rows(
                conn,
                "login_attempt_reserve",
                {
                    "email": email,
                    "address": address,
                    "window": window,
                    "max_per_account": max_per_account,
                    "max_per_address": max_per_address,
                    "check_timeout": check_timeout,
                    "check_retry_after": check_retry_after,
                },
            )
        )[0]

    async def login_attempt_fail(self, conn: AsyncConn, *, reserved_id: int) -> None:
        """Settle a reserved attempt as a failure that counts."""
        await self._rows(conn, "login_attempt_fail", {"reserved_id": reserved_id})

    async def login_attempt_forgive(self, conn: AsyncConn, *, reserved_id: int) -> None:
        """Drop a reserved attempt whose password proved right."""
        await self._rows(conn, "login_attempt_forgive", {"reserved_id": reserved_id})

    # -- sessions (refresh token families) --------------------------------------------------

    async def refresh_token_insert(
        self, conn: AsyncConn, *, user_id: int, family: UUID, token_hash: bytes, ttl: float
    ) -> Row:
        """Store a refresh token of ``family`` living ``ttl`` seconds; row
        ``id, family, expires_at``."""
        return (
            await self._rows(
                conn,
                "refresh_token_insert",
                {"user_id": user_id, "family": family, "token_hash": token_hash, "ttl": ttl},
            )
        )[0]

    async def refresh_token_rotate(
        self, conn: AsyncConn, *, token_hash: bytes, new_hash: bytes, ttl: float
    ) -> Row | None:
        """Use a refresh token once and store its successor ``new_hash``; the user's row with
        ``session`` (the family), or None when the token is unknown, used, revoked, expired
        or its user disabled."""
        return _one(
            await self._rows(
                conn,
                "refresh_token_rotate",
                {"token_hash": token_hash, "new_hash": new_hash, "ttl": ttl},
            )
        )

    async def refresh_family_revoke_reused(
        self, conn: AsyncConn, *, token_hash: bytes
    ) -> Row | None:
        """Revoke the family of a refresh token that was already used; row
        ``user_id, email, family, revoked`` when it was reuse, else None."""
        return _one(
            await self._rows(conn, "refresh_family_revoke_reused", {"token_hash": token_hash})
        )

    async def refresh_family_revoke(
        self, conn: AsyncConn, *, token_hash: bytes, reason: str
    ) -> list[Row]:
        """End the family of a refresh token; rows ``user_id, email, family``, one per token
        revoked now (none for an unknown token or an ended family)."""
        return await self._rows(
            conn, "refresh_family_revoke", {"token_hash": token_hash, "reason": reason}
        )

    async def refresh_tokens_revoke_for_user(
        self, conn: AsyncConn, *, user_id: int, reason: str
    ) -> None:
        """End every session of a user."""
        await self._rows(
            conn, "refresh_tokens_revoke_for_user", {"user_id": user_id, "reason": reason}
        )

    async def session_check(self, conn: AsyncConn, *, user_id: int, family: UUID) -> Row | None:
        """Row ``role, disabled, live`` (the family not revoked) of a user, or None when
        there is no such user."""
        return _one(await self._rows(conn, "session_check", {"user_id": user_id, "family": family}))

    async def session_changed_notify(self, conn: AsyncConn, *, user_id: int) -> None:
        """Tell every API process, when the caller's transaction commits, to forget what it
        cached about the user's sessions."""
        await self._rows(conn, "session_changed_notify", {"user_id": user_id})

    # -- API tokens -------------------------------------------------------------------------

    async def api_token_insert(
        self,
        conn: AsyncConn,
        *,
        user_id: int,
        name: str,
        role: str,
        token_hash: bytes,
        expires_in: float | None,
    ) -> Row:
        """Store an API token (``expires_in`` None: it never expires); its ``api_tokens``
        row."""
        return (
            await self._rows(
                conn,
                "api_token_insert",
                {
                    "user_id": user_id,
                    "name": name,
                    "role": role,
                    "token_hash": token_hash,
                    "expires_in": expires_in,
                },
            )
        )[0]

    async def api_token_list(self, conn: AsyncConn, *, user_id: int) -> list[Row]:
        """The ``api_tokens`` rows of a user, oldest first."""
        return await self._rows(conn, "api_token_list", {"user_id": user_id})

    async def api_token_get(self, conn: AsyncConn, *, user_id: int, token_id: int) -> Row | None:
        """One of the user's own ``api_tokens`` rows, or None."""
        return _one(
            await self._rows(conn, "api_token_get", {"user_id": user_id, "token_id": token_id})
        )

    async def api_token_revoke(self, conn: AsyncConn, *, user_id: int, token_id: int) -> Row | None:
        """Revoke one of the user's own API tokens; its row, or None when there is no such
        token or it was revoked already."""
        return _one(
            await self._rows(conn, "api_token_revoke", {"user_id": user_id, "token_id": token_id})
        )

    async def api_token_authenticate(self, conn: AsyncConn, *, token_hash: bytes) -> Row | None:
        """Use a live API token of an enabled owner; row ``id, role, user_id, email,
        owner_role``, or None."""
        return _one(await self._rows(conn, "api_token_authenticate", {"token_hash": token_hash}))

    # -- invites ----------------------------------------------------------------------------

    async def invite_insert(
        self,
        conn: AsyncConn,
        *,
        email: str,
        role: str,
        token_hash: bytes,
        created_by: str,
        ttl: float,
    ) -> Row:
        """Store an invite living ``ttl`` seconds; its ``invites`` row."""
        return (
            await self._rows(
                conn,
                "invite_insert",
                {
                    "email": email,
                    "role": role,
                    "token_hash": token_hash,
                    "created_by": created_by,
                    "ttl": ttl,
                },
            )
        )[0]

    async def invite_get(self, conn: AsyncConn, *, invite_id: int) -> Row | None:
        """One ``invites`` row, or None."""
        return _one(await self._rows(conn, "invite_get", {"invite_id": invite_id}))

    async def invite_list(self, conn: AsyncConn) -> list[Row]:
        """Every ``invites`` row, newest first."""
        return await self._rows(conn, "invite_list", {})

    async def invite_revoke(self, conn: AsyncConn, *, invite_id: int) -> Row | None:
        """Withdraw an invite; its row, or None when there is no such invite or it was
        accepted or revoked already."""
        return _one(await self._rows(conn, "invite_revoke", {"invite_id": invite_id}))

    async def invite_accept(self, conn: AsyncConn, *, token_hash: bytes) -> Row | None:
        """Use an invite once; its row, or None when it is unknown, used, revoked or
        expired."""
        return _one(await self._rows(conn, "invite_accept", {"token_hash": token_hash}))

    async def invite_set_user(self, conn: AsyncConn, *, invite_id: int, user_id: int) -> None:
        """Link an accepted invite to the user it created."""
        await self._rows(conn, "invite_set_user", {"invite_id": invite_id, "user_id": user_id})
