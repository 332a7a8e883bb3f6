"""The identity types the auth service hands out, and their decoding from rows."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal
from uuid import UUID

from tickwork.auth.roles import Role
from tickwork.types import from_row

Row = dict[str, Any]


@dataclass(frozen=True, slots=True)
class User:
    """A person who logs in (never carries the password hash)."""

    id: int
    """Database id; the ``sub`` of their access tokens."""
    email: str
    """As they typed it; unique case-insensitively."""
    name: str
    """Display name (may be empty)."""
    role: Role
    """What they may do."""
    disabled: bool
    """A disabled user cannot log in, refresh, or use their API tokens."""
    created_at: datetime
    """When the account was made."""
    last_login_at: datetime | None
    """Their last successful login, if any."""

    @classmethod
    def from_row(cls, row: Row) -> User:
        """A ``users`` row."""
        return from_row(cls, row, role=Role[row["role"]])


@dataclass(frozen=True, slots=True)
class Principal:
    """Who is making a request, as proved by an access token or an API token."""

    user_id: int
    """The user acting (an API token's owner)."""
    email: str
    """Their email."""
    role: Role
    """What this request may do (for an API token, never above the owner's current role)."""
    via: Literal["session", "api_token"]
    """How they proved it: a login session's access token, or a personal API token."""
    token_id: int | None
    """The API token's id; None for a session."""
    channel: Literal["api", "mcp"] = "api"
    """Where the request came in: the REST API, or a tool of the MCP endpoint."""
    session: UUID | None = None
    """The login session (refresh token family) of a session's access token; None for an
    API token."""

    @property
    def actor(self) -> str:
        """How the audit trail names this principal (``mcp:`` first for a call made through
        the MCP endpoint)."""
        who = f"api_token:{self.token_id}:{self.email}" if self.via == "api_token" else None
        who = who or f"user:{self.email}"
        return f"mcp:{who}" if self.channel == "mcp" else who


@dataclass(frozen=True, slots=True)
class TokenPair:
    """What a login or a refresh hands back."""

    access_token: str = field(repr=False)
    """Short-lived JWT sent with each request."""
    refresh_token: str = field(repr=False)
    """Opaque, single-use; exchanged for the next pair. A credential: kept out of reprs."""
    expires_in: int
    """Seconds the access token is valid for."""
    user: User
    """Who logged in."""


@dataclass(frozen=True, slots=True)
class Invite:
    """An invitation for one email to join with a role fixed when it was made."""

    id: int
    """Database id."""
    email: str
    """Who is invited; the account created on acceptance gets this email."""
    role: Role
    """The role the new account gets (nothing the invitee sends changes it)."""
    created_by: str
    """The actor who made it."""
    created_at: datetime
    """When it was made."""
    expires_at: datetime
    """After this it cannot be accepted."""
    accepted_at: datetime | None
    """When it was used (it is single-use)."""
    revoked_at: datetime | None
    """When it was withdrawn, if it was."""

    @classmethod
    def from_row(cls, row: Row) -> Invite:
        """An ``invites`` row."""
        return from_row(cls, row, role=Role[row["role"]])


@dataclass(frozen=True, slots=True)
class ApiToken:
    """A personal API token (its secret is shown once, at creation, and never stored)."""

    id: int
    """Database id."""
    user_id: int
    """The owner; the token acts as them."""
    name: str
    """What the owner called it."""
    role: Role
    """The most it may do; the owner's current role caps it on every use."""
    created_at: datetime
    """When it was made."""
    expires_at: datetime | None
    """After this it is refused; None: it never expires."""
    last_used_at: datetime | None
    """Its last successful use."""
    revoked_at: datetime | None
    """When it was revoked, if it was."""

    @classmethod
    def from_row(cls, row: Row) -> ApiToken:
        """An ``api_tokens`` row."""
        return from_row(cls, row, role=Role[row["role"]])


@dataclass(frozen=True, slots=True)
class Bootstrap:
    """What :meth:`AuthService.bootstrap_admin` did."""

    created: bool
    """True when this call created the first administrator; False when users existed."""
    email: str
    """The administrator's email (the one asked for)."""
    generated_password: str | None = field(repr=False)
    """The password generated for them, to be shown once by the caller (never in a repr);
    None when one was given or nothing was created."""
