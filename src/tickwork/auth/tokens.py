"""Access tokens (short-lived JWTs, HS256 only) and opaque tokens (random, stored hashed).

Access tokens carry what authorization needs: the user id (``sub``), the email, the role
(``roles``, a list of one name) and the session they belong to (``sid``, the refresh token
family of their login). Their signature is checked here; that their session still stands
(not logged out, no role, password or account change since) is checked against the
database by the identity service. They live at most 15 minutes; refresh tokens, API tokens
and invites are opaque random strings whose SHA-256 alone is stored, recognised by their
prefix.
"""

from __future__ import annotations

import hashlib
import secrets
import time
import uuid
from dataclasses import dataclass
from typing import Any

import jwt

from tickwork.auth.roles import Role
from tickwork.errors import AuthError

ALGORITHM = "HS256"
"""The only algorithm accepted: pinned, so a token cannot choose ``none`` or another key type."""
REQUIRED_CLAIMS = ["exp", "iat", "iss", "aud", "sub", "sid"]

REFRESH_PREFIX = "twr_"
API_TOKEN_PREFIX = "twk_"
INVITE_PREFIX = "twi_"
TOKEN_BYTES = 32
"""Random bytes in an opaque token: 256 bits."""
MAX_API_TOKEN_TTL = 100 * 365 * 86400.0
"""The longest an API token may be valid, in seconds (100 years: far longer overflows the
database's timestamps; a token that never expires asks for no expiry instead)."""


@dataclass(frozen=True, slots=True)
class AccessClaims:
    """What a verified access token says."""

    user_id: int
    """The user (claim ``sub``)."""
    email: str
    """Their email when the token was issued."""
    role: Role
    """Their role when the token was issued (claim ``roles``): what the bearer may do."""
    session: uuid.UUID
    """Claim ``sid``: the login session (refresh token family) the token was issued in."""
    token_id: str
    """Claim ``jti``: unique per token."""
    issued_at: int
    """Claim ``iat``, seconds since the epoch."""
    expires_at: int
    """Claim ``exp``, seconds since the epoch."""


def issue_access_token(
    key: str,
    *,
    issuer: str,
    audience: str,
    ttl: float,
    user_id: int,
    email: str,
    role: Role,
    session: uuid.UUID,
) -> str:
    """A signed access token for ``user_id`` in ``session``, valid for ``ttl`` seconds."""
    now = int(time.time())
    claims = {
        "iss": issuer,
        "aud": audience,
        "sub": str(user_id),
        "email": email,
        "roles": [role.name],
        "sid": str(session),
        "iat": now,
        "exp": now + int(ttl),
        "jti": uuid.uuid4().hex,
    }
    return jwt.encode(claims, key, algorithm=ALGORITHM)


def verify_access_token(token: object, key: str, *, issuer: str, audience: str) -> AccessClaims:
    """The claims of a valid access token; :class:`AuthError` with a short reason otherwise."""
    if not isinstance(token, str) or not token:
        raise AuthError("access token missing")
    try:
        claims: dict[str, Any] = jwt.decode(
            token,
            key,
            algorithms=[ALGORITHM],
            issuer=issuer,
            audience=audience,
            options={"require": REQUIRED_CLAIMS},
        )
    except jwt.ExpiredSignatureError:
        raise AuthError("access token expired") from None
    except jwt.MissingRequiredClaimError as exc:
        raise AuthError(f"access token lacks the {exc.claim} claim") from None
    except jwt.InvalidAudienceError:
        raise AuthError("access token is for another audience") from None
    except jwt.InvalidIssuerError:
        raise AuthError("access token is from another issuer") from None
    except jwt.InvalidAlgorithmError:
        raise AuthError(f"access token algorithm is not {ALGORITHM}") from None
    except jwt.InvalidSignatureError:
        raise AuthError("access token signature is invalid") from None
    except jwt.PyJWTError:
        raise AuthError("access token is malformed") from None
    return _claims(claims)


def _claims(claims: dict[str, Any]) -> AccessClaims:
    sub, roles, email = claims.get("sub"), claims.get("roles"), claims.get("email")
    if not isinstance(sub, str) or not (sub.isascii() and sub.isdigit()):  # not "²"
        raise AuthError("access token subject is not a user id")
    if (
        not isinstance(roles, list)
        or len(roles) != 1
        or not isinstance(roles[0], str)
        or roles[0] not in Role.__members__
    ):
        raise AuthError("access token roles claim is not one known role")
    if not isinstance(email, str):
        raise AuthError("access token lacks the email claim")
    try:
        session = uuid.UUID(str(claims["sid"]))
    except ValueError:
        raise AuthError("access token session is not a session id") from None
    return AccessClaims(
        user_id=int(sub),
        email=email,
        role=Role[roles[0]],
        session=session,
        token_id=str(claims.get("jti", "")),
        issued_at=int(claims["iat"]),
        expires_at=int(claims["exp"]),
    )


def new_token(prefix: str) -> str:
    """A fresh opaque token: ``prefix`` and 256 random bits, URL-safe."""
    return prefix + secrets.token_urlsafe(TOKEN_BYTES)


def token_hash(token: str) -> bytes:
    """What is stored of an opaque token: its SHA-256 (the token has 256 bits of entropy, so
    a fast hash is enough; nothing stored lets anyone present the token)."""
    return hashlib.sha256(token.encode("utf-8")).digest()


def new_signing_key() -> str:
    """A random HS256 key (384 bits), for when none is configured."""
    return secrets.token_urlsafe(48)
