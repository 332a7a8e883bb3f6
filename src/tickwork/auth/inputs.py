"""Checks of the identity inputs people type: emails and display names."""

from __future__ import annotations

from tickwork.errors import InvalidInput

MAX_EMAIL_LENGTH = 320
MAX_NAME_LENGTH = 200


def check_email(value: object, field: str = "email") -> str:
    """The trimmed address; :class:`InvalidInput` unless it has one "@", no spaces, and at
    most 320 characters."""
    if not isinstance(value, str):
        raise InvalidInput(field, value, "must be a string")
    email = value.strip()
    local, _, domain = email.partition("@")
    if (
        len(email) > MAX_EMAIL_LENGTH
        or email.count("@") != 1
        or not local
        or not domain
        or any(c.isspace() for c in email)
    ):
        raise InvalidInput(
            field, value, f"must be an email address (one @, no spaces, <= {MAX_EMAIL_LENGTH})"
        )
    return email


def check_name(value: object, field: str = "name", *, required: bool = False) -> str:
    """The trimmed name; :class:`InvalidInput` when too long (or empty and required)."""
    if not isinstance(value, str):
        raise InvalidInput(field, value, "must be a string")
    name = value.strip()
    if len(name) > MAX_NAME_LENGTH:
        raise InvalidInput(field, value, f"must be at most {MAX_NAME_LENGTH} characters")
    if required and not name:
        raise InvalidInput(field, value, "must not be empty")
    return name
