"""Operator-editable state kept in the database: app settings (a fixed set of known keys,
each validated) and global variables (values shared across jobs; a secret one's value is
never returned once stored)."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from psycopg_pool import AsyncConnectionPool

from tickwork.config import MAX_SECONDS, Settings
from tickwork.db.store import Store
from tickwork.errors import InvalidField, InvalidInput, NotFoundError
from tickwork.masking import MIN_SECRET

VARIABLE_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_.-]{0,127}\Z")


@dataclass(frozen=True, slots=True)
class Known:
    """A setting operators may change, with where its default comes from."""

    description: str
    config_path: tuple[str, str]
    """The configuration field that gives the default (section, name)."""

    def default(self, settings: Settings) -> Any:
        section, name = self.config_path
        return getattr(getattr(settings, section), name)

    def check(self, key: str, value: Any) -> float:
        if (
            isinstance(value, bool)
            or not isinstance(value, int | float)
            or not 0 < value <= MAX_SECONDS  # NaN and Infinity (JSON bodies may carry them) fail
        ):
            shown = value if isinstance(value, int | float) else f"a {type(value).__name__}"
            raise InvalidInput(  # a number is shown; anything else only by its type
                key, shown, f"must be a positive number of seconds, at most {MAX_SECONDS:.0f}"
            )
        return float(value)


KNOWN: dict[str, Known] = {
    "retention.finished_after": Known(
        "seconds a SUCCEEDED or CANCELLED job is kept", ("retention", "finished_after")
    ),
    "retention.dead_letter_after": Known(
        "seconds a DEAD_LETTER job is kept", ("retention", "dead_letter_after")
    ),
    "retention.activity_after": Known(
        "seconds a definition's activity (its per-minute counts) is kept",
        ("retention", "activity_after"),
    ),
    "retention.worker_metrics_after": Known(
        "seconds the processes' CPU and memory samples are kept",
        ("retention", "worker_metrics_after"),
    ),
    "retention.throughput_after": Known(
        "seconds the per-minute counts of finished work (throughput charts) are kept",
        ("retention", "throughput_after"),
    ),
    "retention.audit_after": Known("seconds an audit event is kept", ("retention", "audit_after")),
}


@dataclass(frozen=True, slots=True)
class SettingView:
    """A setting's effective value, its default, and who last changed it."""

    key: str
    value: Any
    default: Any
    description: str
    updated_at: datetime | None
    updated_by: str | None


@dataclass(frozen=True, slots=True)
class Variable:
    """A global variable (``value`` is None for a secret one)."""

    name: str
    value: str | None
    secret: bool
    updated_at: datetime
    updated_by: str


async def list_settings(
    pool: AsyncConnectionPool[Any], store: Store, settings: Settings
) -> list[SettingView]:
    """Every known setting with its effective value."""
    async with pool.connection() as conn:
        stored = {r["key"]: r for r in await store.app_setting_list(conn)}
    views = []
    for key, known in KNOWN.items():
        row = stored.get(key)
        default = known.default(settings)
        views.append(
            SettingView(
                key=key,
                value=row["value"] if row else default,
                default=default,
                description=known.description,
                updated_at=row["updated_at"] if row else None,
                updated_by=row["updated_by"] if row else None,
            )
        )
    return views


async def put_setting(
    pool: AsyncConnectionPool[Any],
    store: Store,
    settings: Settings,
    key: str,
    value: Any,
    actor: str,
) -> SettingView:
    """Change a known setting; it takes effect at the next pass of what reads it."""
    known = KNOWN.get(key)
    if known is None:
        raise InvalidInput("key", key, f"is not a setting (known: {', '.join(sorted(KNOWN))})")
    checked = known.check(key, value)
    async with pool.connection() as conn:
        row = await store.app_setting_put(conn, key=key, value=json.dumps(checked), actor=actor)
    return SettingView(
        key, row["value"], known.default(settings), known.description, row["updated_at"], actor
    )


async def effective(
    pool: AsyncConnectionPool[Any], store: Store, settings: Settings
) -> dict[str, Any]:
    """Every known setting's effective value, by key."""
    return {v.key: v.value for v in await list_settings(pool, store, settings)}


def check_variable_name(name: str) -> str:
    if not VARIABLE_NAME.match(name):
        raise InvalidInput(
            "name", name, "must start with a letter or _ and hold 1-128 of letters, digits, _.-"
        )
    return name


async def list_variables(pool: AsyncConnectionPool[Any], store: Store) -> list[Variable]:
    """Every variable; secret ones without their value."""
    async with pool.connection() as conn:
        return [Variable(**r) for r in await store.variable_list(conn)]


async def put_variable(
    pool: AsyncConnectionPool[Any],
    store: Store,
    name: str,
    value: str,
    *,
    secret: bool,
    actor: str,
) -> Variable:
    """Create or replace a variable; a secret one of fewer than :data:`MIN_SECRET`
    characters is refused (a value that short cannot be masked in a run's output without
    masking common text)."""
    name = check_variable_name(name)
    if secret and len(value) < MIN_SECRET:
        raise InvalidField(
            "value", f"a secret must be at least {MIN_SECRET} characters (it is masked by value)"
        )
    async with pool.connection() as conn:
        row = await store.variable_put(conn, name=name, value=value, secret=secret, actor=actor)
    return Variable(**row)


async def delete_variable(
    pool: AsyncConnectionPool[Any], store: Store, name: str, *, actor: str
) -> None:
    """Delete a variable."""
    async with pool.connection() as conn:
        deleted = await store.variable_delete(conn, name=name, actor=actor)
    if not deleted:
        raise NotFoundError("variable", name)
