"""The identity service: users, logins, sessions (access + refresh tokens), API tokens and
invites, on the database. No HTTP here; the API layer calls these methods.

Sessions: a login issues a short-lived access token (a signed JWT) and an opaque refresh
token starting a new *family*: the session. Each refresh uses the presented token once and
issues its successor in the same family; presenting a used token again means it leaked (or
lost a race with its own copy), so the whole family is revoked. Changing a user's role,
password or disabling them revokes all their families, a logout its own. An access token
is honoured only while its family stands and its user is enabled with the role it names
(checked against the database, the answer cached per process for a second and forgotten
at once on a revocation: NOTIFY tells the other processes), so any of these takes effect
on the next request.

Every state change appends its audit event in the same transaction. No password, token or
hash is ever put in an error, a log line or an audit event.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import hashlib
import hmac
import logging
import secrets
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import psycopg
from psycopg import sql
from psycopg_pool import AsyncConnectionPool

from tickwork.auth.acting import Actor, actor_name, check_actor
from tickwork.auth.inputs import check_email, check_name
from tickwork.auth.models import ApiToken, Bootstrap, Invite, Principal, Row, TokenPair, User
from tickwork.auth.passwords import (
    MAX_PASSWORD_LENGTH,
    check_password_policy,
    hash_password,
    needs_rehash,
    verify_password,
)
from tickwork.auth.roles import Role
from tickwork.auth.sessions import SessionCache
from tickwork.auth.tokens import (
    API_TOKEN_PREFIX,
    INVITE_PREFIX,
    MAX_API_TOKEN_TTL,
    REFRESH_PREFIX,
    AccessClaims,
    issue_access_token,
    new_signing_key,
    new_token,
    token_hash,
    verify_access_token,
)
from tickwork.auth.turns import Turns
from tickwork.config import AuthSettings
from tickwork.db.driver_errors import CONNECTION_ERRORS, DriverError
from tickwork.db.store import Store
from tickwork.errors import (
    AuthError,
    ConflictError,
    DatabaseError,
    IncorrectPassword,
    InvalidInput,
    LoginThrottled,
    NotFoundError,
    PermissionDenied,
)
from tickwork.ops.audit import audit_append

log = logging.getLogger("tickwork.auth")

SIGNING_KEY_NAME = "jwt_signing_key"
"""Name of the generated signing key in the ``secrets`` table."""
DEFAULT_ADMIN_EMAIL = "admin@localhost"
GENERATED_PASSWORD_BYTES = 18
LOGIN_FAILED = "invalid email or password"
"""The one answer to every failed login, so it does not tell which emails exist."""
LOCAL_ADDRESS = "local"
"""The client address of password checks made through the library rather than the API."""
LOGIN_CHECK_RETRY_AFTER = 1.0
"""Retry-After (seconds) for an attempt over a throttle limit only because other attempts'
password checks are still running: they may yet prove right and not count."""
LOGIN_CHECK_TIMEOUT = 60.0
"""A password check not settled after this long died with its process: it counts as a
failure (a check takes well under a second)."""
LOGIN_SETTLE_RETRY = 1.0
"""Seconds between tries to forgive a right login the database failed to record."""
SESSION_WATCH_POLL = 1.0
"""Seconds between looks at the stop event while waiting for notifications."""
SESSION_WATCH_RECONNECT = 1.0
"""Seconds before the session watch connects again after losing its connection."""
SESSION_WATCH_NAME = "tickwork-sessions"
"""``application_name`` of the session watch's LISTEN connection."""
SYSTEM_ACTOR = "system"
ANONYMOUS_ACTOR = "anonymous"

Connection = psycopg.AsyncConnection[Any]


@functools.cache
def _dummy_hash() -> str:
    """A hash no password matches: unknown emails are verified against it, so a login
    takes as long whether or not the account exists."""
    return hash_password(secrets.token_urlsafe(32))


def typed_email_digest(key: str, email: str) -> str:
    """What the audit trail keeps of an email no account has: the typed text is often a
    mistyped password, so only a digest keyed by the signing key is stored (attempts at one
    unknown address still read alike; nobody without the key can test guesses against it)."""
    mac = hmac.new(key.encode("utf-8"), email.strip().casefold().encode("utf-8"), hashlib.sha256)
    return f"unknown-email:{mac.hexdigest()[:16]}"


def _password_matches(password_hash: str | None, password: object) -> bool:
    """Runs in a thread: argon2 is deliberately slow."""
    usable = isinstance(password, str) and len(password) <= MAX_PASSWORD_LENGTH
    candidate = password if isinstance(password, str) and usable else ""
    matches = verify_password(password_hash or _dummy_hash(), candidate)
    return matches and usable and password_hash is not None


class AuthService:
    """Users, sessions, API tokens and invites; one per process. Await :meth:`start` first."""

    def __init__(
        self,
        pool: AsyncConnectionPool[Any],
        store: Store,
        settings: AuthSettings,
        *,
        connect_listener: Callable[[str], Awaitable[psycopg.AsyncConnection[Any]]] | None = None,
    ) -> None:
        self.pool = pool
        self.store = store
        self.settings = settings
        self._connect_listener = connect_listener
        """Opens :meth:`watch_sessions`' LISTEN connection, named by its argument
        (``Database.connect_listener``: PostgreSQL itself, past a transaction pooler); None:
        one more connection like the pool's."""
        self._key: str | None = None
        self._turns = Turns()  # password attempts on one account or address, one at a time
        self._sessions = SessionCache()
        self._settling: set[asyncio.Task[None]] = set()  # attempts to forgive when it is back
        self.listening = asyncio.Event()
        """Set while :meth:`watch_sessions` listens for other processes' revocations."""

    # -- plumbing ---------------------------------------------------------------------------

    async def _audit(
        self,
        conn: Connection,
        actor: str,
        event_type: str,
        target_type: str,
        target_id: object,
        **metadata: Any,
    ) -> None:
        await audit_append(
            conn, self.store, actor, event_type, target_type, str(target_id), metadata
        )

    @contextlib.asynccontextmanager
    async def _change(self) -> AsyncIterator[Connection]:
        """A connection in a transaction for a change an actor makes, READ COMMITTED
        whatever the server's default: :func:`~tickwork.auth.acting.check_actor` must read
        what committed while it waited for the actor's row."""
        async with self.pool.connection() as conn:
            await conn.set_isolation_level(psycopg.IsolationLevel.READ_COMMITTED)
            async with conn.transaction():
                yield conn

    async def _user_row(self, conn: Connection, user_id: int) -> Row:
        found = await self.store.user_get(conn, user_id=user_id)
        if found is None:
            raise NotFoundError("user", user_id)
        return found

    def _require_started(self) -> None:
        if self._key is None:
            raise RuntimeError("AuthService.start() must be awaited before tokens are used")

    @property
    def _signing_key(self) -> str:
        self._require_started()
        assert self._key is not None
        return self._key

    def _pair(self, user: User, refresh_token: str, session: uuid.UUID) -> TokenPair:
        access = issue_access_token(
            self._signing_key,
            issuer=self.settings.issuer,
            audience=self.settings.audience,
            ttl=self.settings.access_token_ttl,
            user_id=user.id,
            email=user.email,
            role=user.role,
            session=session,
        )
        return TokenPair(access, refresh_token, int(self.settings.access_token_ttl), user)

    # -- start-up ---------------------------------------------------------------------------

    async def start(self) -> None:
        """Load the signing key: ``auth.jwt_secret``, else the one stored in ``secrets``
        (generated by the first process ever to start; concurrent starters agree)."""
        configured = self.settings.jwt_secret
        if configured is not None:
            self._key = configured.get_secret_value()
            return
        async with self.pool.connection() as conn:
            await self.store.secret_put_if_absent(
                conn, name=SIGNING_KEY_NAME, value=new_signing_key()
            )
            key = await self.store.secret_get(conn, name=SIGNING_KEY_NAME)
        if key is None:  # only if it was deleted between the two statements
            raise RuntimeError(f"the secret {SIGNING_KEY_NAME!r} vanished as it was stored")
        self._key = key

    async def bootstrap_admin(self, email: str | None, password: str | None) -> Bootstrap:
        """Create the first administrator when no user exists (idempotent; of concurrent
        callers exactly one creates). Without a password a random one is generated and
        returned, for the caller to show once."""
        email = check_email(DEFAULT_ADMIN_EMAIL if email is None else email)
        generated = None
        if password is None:
            generated = password = secrets.token_urlsafe(GENERATED_PASSWORD_BYTES)
        check_password_policy(password)
        async with self.pool.connection() as conn:
            if await self.store.user_any(conn):
                return Bootstrap(created=False, email=email, generated_password=None)
        password_hash = await asyncio.to_thread(hash_password, password)
        async with self.pool.connection() as conn, conn.transaction():
            await self.store.auth_lock(conn, name="bootstrap")
            if await self.store.user_any(conn):  # another process was first
                return Bootstrap(created=False, email=email, generated_password=None)
            user = await self._insert_user(
                conn, email, "", Role.ADMIN, password_hash, SYSTEM_ACTOR, bootstrap=True
            )
        log.info("first administrator created", extra={"user_id": user.id, "email": email})
        return Bootstrap(created=True, email=email, generated_password=generated)

    # -- users ------------------------------------------------------------------------------

    async def create_user(
        self,
        email: str,
        password: str,
        role: Role | str,
        name: str = "",
        actor: str = SYSTEM_ACTOR,
    ) -> User:
        """A new user; :class:`ConflictError` when the email is taken (in any case)."""
        email = check_email(email)
        the_role = Role.parse(role)
        name = check_name(name)
        check_password_policy(password)
        password_hash = await asyncio.to_thread(hash_password, password)
        async with self.pool.connection() as conn, conn.transaction():
            return await self._insert_user(conn, email, name, the_role, password_hash, actor)

    async def _insert_user(
        self,
        conn: Connection,
        email: str,
        name: str,
        role: Role,
        password_hash: str,
        actor: str,
        **metadata: Any,
    ) -> User:
        row = await self.store.user_insert(
            conn, email=email, name=name, role=role.name, password_hash=password_hash
        )
        if row is None:
            raise ConflictError(f"a user with email {email!r} already exists")
        user = User.from_row(row)
        await self._audit(
            conn, actor, "user.created", "user", user.id, email=email, role=role.name, **metadata
        )
        return user

    async def get_user(self, user_id: int) -> User:
        """One user; :class:`NotFoundError` when there is none with that id."""
        async with self.pool.connection() as conn:
            return User.from_row(await self._user_row(conn, user_id))

    async def list_users(self) -> list[User]:
        """Every user, oldest first."""
        async with self.pool.connection() as conn:
            return [User.from_row(r) for r in await self.store.user_list(conn)]

    async def set_role(self, user_id: int, role: Role | str, actor: Actor) -> User:
        """Change a user's role and end their sessions; refused (:class:`ConflictError`)
        when it would leave no enabled administrator. A :class:`Principal` ``actor`` must be
        an enabled ADMIN when the change commits, and may not raise its own role
        (:func:`~tickwork.auth.acting.check_actor`); a name is the local superuser."""
        the_role = Role.parse(role)
        async with self._change() as conn:
            await self.store.auth_lock(conn, name="admins")
            await check_actor(conn, self.store, actor, target=user_id, role=the_role)
            before = User.from_row(await self._user_row(conn, user_id))
            if before.role is the_role:
                return before
            row = await self.store.user_set_role(conn, user_id=user_id, role=the_role.name)
            if row is None:
                raise ConflictError(f"user {user_id} is the last enabled ADMIN; keep their role")
            await self._end_sessions(conn, user_id, "role_changed")
            await self._audit(
                conn,
                actor_name(actor),
                "user.role_changed",
                "user",
                user_id,
                email=before.email,
                old_role=before.role.name,
                new_role=the_role.name,
            )
        self._sessions.forget(user_id)
        return User.from_row(row)

    async def disable(self, user_id: int, actor: Actor, disabled: bool = True) -> User:
        """Disable a user (ending their sessions; their API tokens stop working) or, with
        ``disabled=False``, enable them again. The last enabled administrator cannot be
        disabled (:class:`ConflictError`). A :class:`Principal` ``actor`` must be an enabled
        ADMIN when the change commits, and may not enable itself."""
        async with self._change() as conn:
            await self.store.auth_lock(conn, name="admins")
            await check_actor(conn, self.store, actor, target=user_id, enabling=not disabled)
            before = User.from_row(await self._user_row(conn, user_id))
            if before.disabled is disabled:
                return before
            row = await self.store.user_set_disabled(conn, user_id=user_id, disabled=disabled)
            if row is None:
                raise ConflictError(f"user {user_id} is the last enabled ADMIN; cannot disable")
            if disabled:
                await self._end_sessions(conn, user_id, "disabled")
            event = "user.disabled" if disabled else "user.enabled"
            await self._audit(conn, actor_name(actor), event, "user", user_id, email=before.email)
        self._sessions.forget(user_id)
        return User.from_row(row)

    async def change_password(
        self, user_id: int, old: str, new: str, *, address: str = LOCAL_ADDRESS
    ) -> None:
        """Change a password, given the current one (:class:`IncorrectPassword` when it is
        wrong), and end every session of the user. A wrong current password counts as a
        failed login of the account (and of ``address``), so guesses are throttled like
        logins (:class:`LoginThrottled`)."""
        check_password_policy(new)
        async with self.pool.connection() as conn:
            row = await self._user_row(conn, user_id)
        reserved = await self._reserve_attempt(row["email"], address)
        if not await asyncio.to_thread(_password_matches, row["password_hash"], old):
            await self._settle_attempt(reserved, failed=True)
            raise IncorrectPassword()
        await self._settle_attempt(reserved, failed=False)
        new_hash = await asyncio.to_thread(hash_password, new)
        async with self.pool.connection() as conn, conn.transaction():
            await self._replace_password(conn, row, new_hash, f"user:{row['email']}")
        self._sessions.forget(user_id)

    async def _replace_password(
        self, conn: Connection, row: Row, new_hash: str, actor: str, **detail: Any
    ) -> Row:
        """Store ``new_hash`` over the hash ``row`` was read with (a change made meanwhile
        is a conflict), end every session of the user and audit it; the user's new row."""
        user_id = row["id"]
        changed = await self.store.user_set_password_hash(
            conn, user_id=user_id, new_hash=new_hash, old_hash=row["password_hash"]
        )
        if changed is None:
            raise ConflictError(f"the password of user {user_id} changed meanwhile; retry")
        await self._end_sessions(conn, user_id, "password_changed")
        await self._audit(conn, actor, "user.password_changed", "user", user_id, **detail)
        return changed

    async def set_password(self, user_id: int, new: str, actor: str) -> User:
        """Set a password without the current one: an operator's reset (the command line's
        ``users set-password``). The policy, the hashing and the end of every session are
        those of :meth:`change_password`; the audit event names ``actor``."""
        check_password_policy(new)
        new_hash = await asyncio.to_thread(hash_password, new)
        async with self.pool.connection() as conn, conn.transaction():
            row = await self._user_row(conn, user_id)
            changed = await self._replace_password(conn, row, new_hash, actor, email=row["email"])
        self._sessions.forget(user_id)
        return User.from_row(changed)

    # -- sessions ---------------------------------------------------------------------------

    async def _reserve_attempt(self, email: str, address: str) -> int:
        """Count a password attempt on ``email`` from ``address`` before the password is
        checked (:class:`LoginThrottled` when either counter is at its maximum). Attempts on
        one account or from one address pass this one at a time, so parallel guesses cannot
        all slip under the limit. Returns the failure it was counted as, to forgive
        (``login_attempt_forgive``) once the password proves right."""
        settings = self.settings
        async with (
            self._turns.take(f"account:{email.lower()}", f"address:{address}"),
            self.pool.connection() as conn,
        ):
            # the count must see the attempt that held the lock before this one: a snapshot
            # per statement (whatever the server's default isolation)
            await conn.set_isolation_level(psycopg.IsolationLevel.READ_COMMITTED)
            async with conn.transaction():
                await self.store.login_attempt_lock(conn, email=email, address=address)
                wait = await self.store.login_attempt_reserve(
                    conn,
                    email=email,
                    address=address,
                    window=settings.login_window,
                    max_per_account=settings.login_max_per_account,
                    max_per_address=settings.login_max_per_address,
                    check_timeout=LOGIN_CHECK_TIMEOUT,
                    check_retry_after=LOGIN_CHECK_RETRY_AFTER,
                )
        waits = [
            w for w in (wait["account_retry_after"], wait["address_retry_after"]) if w is not None
        ]
        if waits:  # both counters must drop below their maximum: wait for the later
            raise LoginThrottled(max(0.0, *waits))
        return int(wait["reserved_id"])

    async def _settle_attempt(self, reserved: int, *, failed: bool) -> None:
        """The password check of a reserved attempt ended: a failure that counts, or
        forgiven."""
        async with self.pool.connection() as conn:
            if failed:
                await self.store.login_attempt_fail(conn, reserved_id=reserved)
            else:
                await self.store.login_attempt_forgive(conn, reserved_id=reserved)

    async def login(self, email: str, password: str, address: str) -> TokenPair:
        """Check a password and start a session. Throttled per account and per client
        address (:class:`LoginThrottled`, before the password is looked at); every other
        failure is ``AuthError("invalid email or password")``."""
        self._require_started()  # before any state changes
        email = email.strip() if isinstance(email, str) else ""
        reserved = await self._reserve_attempt(email, address)
        proved: list[bool] = []  # set once the password proved right
        try:
            return await self._login_reserved(email, password, address, reserved, proved)
        except AuthError:
            await self._settle_attempt(reserved, failed=True)
            raise
        except Exception:
            if proved:  # the right password, and then the database failed: not a guess
                self._settle_later(reserved)
            raise

    def _settle_later(self, reserved: int) -> None:
        """Forgive a reserved attempt once the database answers again (for as long as an
        unsettled check is given, after which it would count as a failure anyway)."""

        async def forgive() -> None:
            deadline = asyncio.get_running_loop().time() + LOGIN_CHECK_TIMEOUT
            while asyncio.get_running_loop().time() < deadline:
                try:
                    await self._settle_attempt(reserved, failed=False)
                    return
                except (DriverError, DatabaseError):
                    await asyncio.sleep(LOGIN_SETTLE_RETRY)

        task = asyncio.get_running_loop().create_task(forgive())
        self._settling.add(task)
        task.add_done_callback(self._settling.discard)

    async def _login_reserved(
        self, email: str, password: str, address: str, reserved: int, proved: list[bool]
    ) -> TokenPair:
        async with self.pool.connection() as conn:
            row = await self.store.user_get_by_email(conn, email=email)
        matches = await asyncio.to_thread(
            _password_matches, row["password_hash"] if row else None, password
        )
        if row is not None and matches and not row["disabled"]:
            proved.append(True)
        if row is None or not matches or row["disabled"]:
            reason = (
                "unknown_email" if row is None else "wrong_password" if not matches else "disabled"
            )
            async with self.pool.connection() as conn:
                await self._audit(
                    conn,
                    ANONYMOUS_ACTOR,
                    "user.login_failed",
                    "user",
                    row["id"] if row else typed_email_digest(self._signing_key, email),
                    address=address,
                    reason=reason,
                )
            raise AuthError(LOGIN_FAILED)
        new_hash = None
        if needs_rehash(row["password_hash"]):
            new_hash = await asyncio.to_thread(hash_password, password)
        refresh_token = new_token(REFRESH_PREFIX)
        async with self.pool.connection() as conn, conn.transaction():
            updated = await self.store.user_login_succeeded(
                conn, user_id=row["id"], new_hash=new_hash
            )
            if updated is None:  # disabled meanwhile
                raise AuthError(LOGIN_FAILED)
            await self.store.login_attempt_forgive(conn, reserved_id=reserved)
            user = User.from_row(updated)
            session = uuid.uuid4()
            await self.store.refresh_token_insert(
                conn,
                user_id=user.id,
                family=session,
                token_hash=token_hash(refresh_token),
                ttl=self.settings.refresh_token_ttl,
            )
            await self._audit(
                conn,
                f"user:{user.email}",
                "user.login",
                "user",
                user.id,
                address=address,
                rehashed=new_hash is not None,
            )
        return self._pair(user, refresh_token, session)

    async def refresh(self, refresh_token: str) -> TokenPair:
        """Exchange a refresh token for a new pair; the token is then used up. Presenting a
        used token again revokes its whole family (:class:`AuthError`)."""
        self._require_started()  # before any state changes
        if not isinstance(refresh_token, str) or not refresh_token:
            raise AuthError("refresh token missing")
        presented = token_hash(refresh_token)
        successor = new_token(REFRESH_PREFIX)
        async with self.pool.connection() as conn:
            rotated = await self.store.refresh_token_rotate(
                conn,
                token_hash=presented,
                new_hash=token_hash(successor),
                ttl=self.settings.refresh_token_ttl,
            )
            if rotated is not None:
                return self._pair(User.from_row(rotated), successor, rotated["session"])
            async with conn.transaction():
                reused = await self.store.refresh_family_revoke_reused(conn, token_hash=presented)
                if reused is not None:
                    await self.store.session_changed_notify(conn, user_id=reused["user_id"])
                    await self._audit(
                        conn,
                        SYSTEM_ACTOR,
                        "auth.refresh_reuse",
                        "user",
                        reused["user_id"],
                        email=reused["email"],
                        family=str(reused["family"]),
                        revoked=reused["revoked"],
                    )
        if reused is not None:
            self._sessions.forget(reused["user_id"])
            log.warning(
                "refresh token reused; its session family is revoked",
                extra={"user_id": reused["user_id"], "family": str(reused["family"])},
            )
            raise AuthError("refresh token was already used; the session is revoked")
        raise AuthError("refresh token is invalid, expired or revoked")

    async def logout(self, refresh_token: str) -> None:
        """End the session (token family) of ``refresh_token``; nothing for an unknown one."""
        if not isinstance(refresh_token, str) or not refresh_token:
            return
        async with self.pool.connection() as conn, conn.transaction():
            revoked = await self.store.refresh_family_revoke(
                conn, token_hash=token_hash(refresh_token), reason="logout"
            )
            if revoked:
                await self.store.session_changed_notify(conn, user_id=revoked[0]["user_id"])
                await self._audit(
                    conn,
                    f"user:{revoked[0]['email']}",
                    "user.logout",
                    "user",
                    revoked[0]["user_id"],
                    family=str(revoked[0]["family"]),
                )
        if revoked:
            self._sessions.forget(revoked[0]["user_id"])

    def verify_access(self, token: str) -> Principal:
        """The principal of an access token whose signature and claims are valid, without
        asking the database whether its session still stands (:meth:`authenticate` does);
        :class:`AuthError` otherwise."""
        return self._principal(self._claims(token))

    def check_bearer(self, token: str) -> None:
        """Refuse (:class:`AuthError`) a bearer token that cannot be good, without the
        database: an access token whose signature or claims are wrong. An API token (by
        its prefix) passes: only the database knows it."""
        if not token.startswith(API_TOKEN_PREFIX):
            self._claims(token)

    def _claims(self, token: str) -> AccessClaims:
        return verify_access_token(
            token, self._signing_key, issuer=self.settings.issuer, audience=self.settings.audience
        )

    @staticmethod
    def _principal(claims: AccessClaims) -> Principal:
        return Principal(
            claims.user_id, claims.email, claims.role, "session", None, session=claims.session
        )

    async def authenticate(self, token: str) -> Principal:
        """The principal of an API token (by its ``twk_`` prefix) or else of an access token
        whose session still stands; :class:`AuthError` otherwise."""
        if not isinstance(token, str) or not token.startswith(API_TOKEN_PREFIX):
            claims = self._claims(token)
            refusal = await self._session_refusal(claims)
            if refusal is not None:
                raise AuthError(f"access token refused: {refusal}")
            return self._principal(claims)
        async with self.pool.connection() as conn:
            row = await self.store.api_token_authenticate(conn, token_hash=token_hash(token))
        if row is None:
            raise AuthError("API token is invalid, revoked or expired")
        role = min(Role[row["role"]], Role[row["owner_role"]])  # never above the owner today
        return Principal(row["user_id"], row["email"], role, "api_token", row["id"])

    async def _session_refusal(self, claims: AccessClaims) -> str | None:
        """Why the session of a validly signed access token no longer stands; None when it
        does (the answer is cached for a second, see :mod:`tickwork.auth.sessions`)."""
        found, refusal = self._sessions.get(claims.user_id, claims.session, claims.role)
        if found:
            return refusal
        async with self.pool.connection() as conn:
            row = await self.store.session_check(
                conn, user_id=claims.user_id, family=claims.session
            )
        if row is None:
            refusal = "the user no longer exists"
        elif row["disabled"]:
            refusal = "the user is disabled"
        elif row["role"] != claims.role.name:
            refusal = "the user's role changed; log in again"
        elif not row["live"]:
            refusal = "the session has ended (logout, password or role change); log in again"
        self._sessions.put(claims.user_id, claims.session, claims.role, refusal)
        return refusal

    async def _end_sessions(self, conn: Connection, user_id: int, reason: str) -> None:
        """Revoke every session of the user, in the caller's transaction, and tell the other
        processes when it commits (the caller forgets this process's cache after it)."""
        await self.store.refresh_tokens_revoke_for_user(conn, user_id=user_id, reason=reason)
        await self.store.session_changed_notify(conn, user_id=user_id)

    async def watch_sessions(self, stop: asyncio.Event) -> None:
        """Until ``stop``: forget cached session checks of users whose sessions another
        process revoked (LISTEN). While the connection is down, everything cached is
        forgotten and cached answers expire within a second anyway."""
        channel = self.store.channel("sessions")
        while not stop.is_set():
            try:
                if self._connect_listener is not None:
                    conn = await self._connect_listener(SESSION_WATCH_NAME)
                else:
                    conninfo, kwargs = self.pool.conninfo, self.pool.kwargs
                    if not isinstance(conninfo, str):  # a pool of someone else's making
                        log.warning(
                            "session watch needs a pool with a plain conninfo; not watching"
                        )
                        await stop.wait()
                        return
                    kwargs = kwargs if isinstance(kwargs, dict) else {}
                    conn = await psycopg.AsyncConnection.connect(
                        conninfo, application_name=SESSION_WATCH_NAME, **kwargs
                    )
                async with conn:
                    await conn.execute(sql.SQL("LISTEN {}").format(sql.Identifier(channel)))
                    self._sessions.clear()  # revocations sent while not listening are lost
                    self.listening.set()
                    while not stop.is_set():
                        async for note in conn.notifies(timeout=SESSION_WATCH_POLL):
                            if note.payload.isascii() and note.payload.isdigit():
                                self._sessions.forget(int(note.payload))
                            else:  # not one of ours: forget everything, to be safe
                                self._sessions.clear()
            except CONNECTION_ERRORS as exc:
                log.warning("session watch connection lost", extra={"error": str(exc)})
            except Exception:  # this loop must outlive anything: serve stops when it ends
                log.exception("session watch failed; starting it again")
            self.listening.clear()
            self._sessions.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), SESSION_WATCH_RECONNECT)

    # -- invites ----------------------------------------------------------------------------

    async def create_invite(self, email: str, role: Role | str, actor: Actor) -> tuple[Invite, str]:
        """An invite for ``email`` with ``role``, and its token (shown once; expires after
        ``auth.invite_ttl``). :class:`ConflictError` when a user has that email. A
        :class:`Principal` ``actor`` must be an enabled ADMIN when the invite is stored."""
        email = check_email(email)
        the_role = Role.parse(role)
        token = new_token(INVITE_PREFIX)
        async with self._change() as conn:
            await check_actor(conn, self.store, actor)
            if await self.store.user_get_by_email(conn, email=email) is not None:
                raise ConflictError(f"a user with email {email!r} already exists")
            row = await self.store.invite_insert(
                conn,
                email=email,
                role=the_role.name,
                token_hash=token_hash(token),
                created_by=actor_name(actor),
                ttl=self.settings.invite_ttl,
            )
            invite = Invite.from_row(row)
            await self._audit(
                conn,
                actor_name(actor),
                "invite.created",
                "invite",
                invite.id,
                email=email,
                role=the_role.name,
            )
        return invite, token

    async def list_invites(self) -> list[Invite]:
        """Every invite, newest first."""
        async with self.pool.connection() as conn:
            return [Invite.from_row(r) for r in await self.store.invite_list(conn)]

    async def revoke_invite(self, invite_id: int, actor: Actor) -> Invite:
        """Withdraw an invite (idempotent). :class:`NotFoundError` for an unknown one,
        :class:`ConflictError` for one already accepted. A :class:`Principal` ``actor`` must
        be an enabled ADMIN when it is withdrawn."""
        async with self._change() as conn:
            await check_actor(conn, self.store, actor)
            revoked = await self.store.invite_revoke(conn, invite_id=invite_id)
            if revoked is not None:
                invite = Invite.from_row(revoked)
                await self._audit(
                    conn,
                    actor_name(actor),
                    "invite.revoked",
                    "invite",
                    invite_id,
                    email=invite.email,
                )
                return invite
            found = await self.store.invite_get(conn, invite_id=invite_id)
        if found is None:
            raise NotFoundError("invite", invite_id)
        invite = Invite.from_row(found)
        if invite.accepted_at is not None:
            raise ConflictError(f"invite {invite_id} was already accepted")
        return invite

    async def accept_invite(self, token: str, name: str, password: str) -> User:
        """Use an invite (once) to create its user, with the invite's email and role."""
        name = check_name(name)
        check_password_policy(password)
        if not isinstance(token, str) or not token:
            raise AuthError("invite token missing")
        async with self.pool.connection() as conn, conn.transaction():
            accepted = await self.store.invite_accept(conn, token_hash=token_hash(token))
            if accepted is None:
                raise AuthError("invite is invalid, already used, revoked or expired")
            invite = Invite.from_row(accepted)
            password_hash = await asyncio.to_thread(hash_password, password)
            actor = f"user:{invite.email}"
            user = await self._insert_user(
                conn, invite.email, name, invite.role, password_hash, actor, invite_id=invite.id
            )
            await self.store.invite_set_user(conn, invite_id=invite.id, user_id=user.id)
            await self._audit(conn, actor, "invite.accepted", "invite", invite.id, user_id=user.id)
        return user

    # -- API tokens -------------------------------------------------------------------------

    async def create_api_token(
        self,
        user_id: int,
        name: str,
        role: Role | str,
        expires_in: float | None,
        *,
        at_most: Role | None = None,
    ) -> tuple[ApiToken, str]:
        """A personal API token and its secret (shown once). Its role may exceed neither the
        owner's nor ``at_most`` (the role of the credential asking: an API token cannot mint
        a stronger one; :class:`PermissionDenied`); ``expires_in`` None: it never expires."""
        name = check_name(name, required=True)
        the_role = Role.parse(role)
        if expires_in is not None and (
            isinstance(expires_in, bool)
            or not isinstance(expires_in, int | float)
            or not 0 < expires_in <= MAX_API_TOKEN_TTL  # NaN and infinity fail it too
        ):
            raise InvalidInput(
                "expires_in",
                expires_in,
                f"must be a positive number of seconds, at most {MAX_API_TOKEN_TTL:.0f}",
            )
        token = new_token(API_TOKEN_PREFIX)
        async with self._change() as conn:
            # the owner's row held: a role change or disable waits, or is seen here
            await self.store.user_lock(conn, user_id=user_id)
            owner = User.from_row(await self._user_row(conn, user_id))
            if owner.disabled:
                raise AuthError(f"user {user_id} is disabled; a disabled user makes no token")
            ceiling = owner.role if at_most is None else min(owner.role, at_most)
            if the_role > ceiling:
                raise PermissionDenied(the_role.name, ceiling.name)
            row = await self.store.api_token_insert(
                conn,
                user_id=user_id,
                name=name,
                role=the_role.name,
                token_hash=token_hash(token),
                expires_in=None if expires_in is None else float(expires_in),
            )
            api_token = ApiToken.from_row(row)
            await self._audit(
                conn,
                f"user:{owner.email}",
                "api_token.created",
                "api_token",
                api_token.id,
                user_id=user_id,
                name=name,
                role=the_role.name,
            )
        return api_token, token

    async def list_api_tokens(self, user_id: int) -> list[ApiToken]:
        """The user's API tokens (revoked and expired included), oldest first."""
        async with self.pool.connection() as conn:
            await self._user_row(conn, user_id)
            return [
                ApiToken.from_row(r) for r in await self.store.api_token_list(conn, user_id=user_id)
            ]

    async def revoke_api_token(self, user_id: int, token_id: int) -> ApiToken:
        """Revoke one of the user's own API tokens (idempotent); :class:`NotFoundError` when
        the user has no token with that id."""
        async with self.pool.connection() as conn, conn.transaction():
            owner = User.from_row(await self._user_row(conn, user_id))
            revoked = await self.store.api_token_revoke(conn, user_id=user_id, token_id=token_id)
            if revoked is not None:
                await self._audit(
                    conn,
                    f"user:{owner.email}",
                    "api_token.revoked",
                    "api_token",
                    token_id,
                    user_id=user_id,
                )
                return ApiToken.from_row(revoked)
            found = await self.store.api_token_get(conn, user_id=user_id, token_id=token_id)
        if found is None:
            raise NotFoundError("api_token", token_id)
        return ApiToken.from_row(found)
