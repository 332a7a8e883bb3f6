"""Password hashing (argon2id, PHC strings) and the password policy.

A password is never put in an error, a log line or a repr: errors about one say
``<redacted>``. Hashing is deliberately slow; async callers run these functions in a thread.
"""

from __future__ import annotations

from argon2 import PasswordHasher
from argon2.exceptions import InvalidHashError, VerificationError

from tickwork.errors import InvalidInput

MIN_PASSWORD_LENGTH = 12
MAX_PASSWORD_LENGTH = 1024
"""Long enough for any passphrase, short enough that hashing one is not a denial of service."""

REDACTED = "<redacted>"

_hasher = PasswordHasher()  # argon2id with the library's current recommended parameters


def hash_password(password: str) -> str:
    """The argon2id PHC string of ``password`` (a fresh random salt each call)."""
    return _hasher.hash(password)


def verify_password(password_hash: str, password: str) -> bool:
    """True when ``password`` matches; False for a wrong password or an unreadable hash."""
    try:
        return _hasher.verify(password_hash, password)
    except (VerificationError, InvalidHashError):
        return False


def needs_rehash(password_hash: str) -> bool:
    """True when the hash was made with other parameters than today's (rehash at next login)."""
    try:
        return _hasher.check_needs_rehash(password_hash)
    except InvalidHashError:
        return True


def check_password_policy(password: object) -> None:
    """Raise :class:`InvalidInput` (value redacted) unless the password is acceptable."""
    if not isinstance(password, str):
        raise InvalidInput("password", REDACTED, "must be a string")
    if len(password) < MIN_PASSWORD_LENGTH:
        raise InvalidInput(
            "password", REDACTED, f"must be at least {MIN_PASSWORD_LENGTH} characters"
        )
    if len(password) > MAX_PASSWORD_LENGTH:
        raise InvalidInput(
            "password", REDACTED, f"must be at most {MAX_PASSWORD_LENGTH} characters"
        )
