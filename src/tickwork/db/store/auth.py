"""Statements of ``sql/auth.sql``."""

from __future__ import annotations

from tickwork.db.store.runner import Runner


class AuthStatements(Runner):
    """One method per statement of ``sql/auth.sql``."""
