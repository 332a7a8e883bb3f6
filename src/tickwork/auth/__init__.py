"""Identity: users, roles, passwords, sessions (access + refresh tokens), API tokens and
invites. :class:`AuthService` is the entry point; the HTTP API is built on top of it."""

from tickwork.auth.inputs import check_email
from tickwork.auth.models import ApiToken, Bootstrap, Invite, Principal, TokenPair, User
from tickwork.auth.passwords import (
    check_password_policy,
    hash_password,
    needs_rehash,
    verify_password,
)
from tickwork.auth.roles import Role
from tickwork.auth.service import AuthService
from tickwork.auth.tokens import (
    API_TOKEN_PREFIX,
    INVITE_PREFIX,
    REFRESH_PREFIX,
    AccessClaims,
    issue_access_token,
    new_token,
    token_hash,
    verify_access_token,
)

__all__ = [
    "API_TOKEN_PREFIX",
    "INVITE_PREFIX",
    "REFRESH_PREFIX",
    "AccessClaims",
    "ApiToken",
    "AuthService",
    "Bootstrap",
    "Invite",
    "Principal",
    "Role",
    "TokenPair",
    "User",
    "check_email",
    "check_password_policy",
    "hash_password",
    "issue_access_token",
    "needs_rehash",
    "new_token",
    "token_hash",
    "verify_access_token",
    "verify_password",
]
