"""Operators' actions on definitions: create, read, list, edit, delete, enable/disable, and
run now. Every write keeps the definition's schedule row in step, in the same transaction."""

from __future__ import annotations

import hmac
from collections.abc import Callable, Mapping
from datetime import datetime
from typing import Any

from psycopg_pool import AsyncConnectionPool

from tickwork.auth.tokens import new_token, token_hash
from tickwork.config import DEFAULT_PRIORITY
from tickwork.db.driver_errors import DuplicateKey
from tickwork.db.store import AsyncConn, Store
from tickwork.db.store.definitions import DefinitionFields, DefinitionSchedule
from tickwork.db.store.jobs import JobRow
from tickwork.definitions.records import (
    JOB_TIMEOUT,
    NULLABLE_EDITS,
    Definition,
    DefinitionEditIn,
    DefinitionIn,
    dumps,
    parsed,
    queue_of,
    schedule_name,
)
from tickwork.errors import ConflictError, InvalidField, NotFoundError
from tickwork.limits import text_problem
from tickwork.queue.admin import chart_range, check_limit
from tickwork.queue.enqueue import insert_plan
from tickwork.schedule.cron import MIN_INTERVAL, CronSchedule


def _fields(given: DefinitionIn) -> DefinitionFields:
    retry = given.retry.model_dump()
    return DefinitionFields(
        name=given.name,
        description=given.description,
        spec=dumps(given.spec.model_dump()),
        queue=queue_of(given.kind, given.spec),
        cron=given.cron,
        timezone=given.timezone,
        exec_timeout=given.exec_timeout,
        max_attempts=retry.pop("max_attempts"),
        backoff=dumps(retry),
        loop=None if given.loop is None else dumps(given.loop.model_dump()),
        enabled=given.enabled,
    )


def _cron(given: DefinitionIn, min_interval: float | None) -> CronSchedule | None:
    """The definition's schedule (its cron and time zone checked, and no two fire times less
    than ``min_interval`` seconds apart; None: a cron kept as stored), if it has one."""
    if given.cron is None:
        CronSchedule.parse("* * * * *", given.timezone)  # the zone is checked all the same
        return None
    cron = CronSchedule.parse(given.cron, given.timezone)
    return cron if min_interval is None else cron.check_interval(min_interval)


async def _schedule(
    conn: AsyncConn, store: Store, definition: Definition, cron: CronSchedule | None
) -> None:
    """Write (or remove) the definition's schedule row from what was just stored."""
    name = schedule_name(definition.id)
    if cron is None:
        await store.definition_schedule_drop(conn, name=name)
        return
    now = await store.schedule_now(conn)
    await store.definition_schedule_put(
        conn,
        schedule=DefinitionSchedule(
            name=name,
            task=definition.task,
            args=dumps(definition.snapshot({"via": "schedule"})),
            cron=cron.expression,
            timezone=cron.timezone,
            enabled=definition.enabled,
            next_run_at=cron.next_after(now),
            queue=definition.queue,
            priority=DEFAULT_PRIORITY,
            max_attempts=definition.retry["max_attempts"],
            timeout=JOB_TIMEOUT,
        ),
    )


async def create(
    pool: AsyncConnectionPool[Any],
    store: Store,
    given: Mapping[str, Any],
    *,
    actor: str,
    min_interval: float = MIN_INTERVAL,
) -> Definition:
    """Store a new definition (and its schedule, when it has a cron: firing no more often
    than every ``min_interval`` seconds, ``scheduler.min_interval``)."""
    checked: DefinitionIn = parsed(DefinitionIn, given)
    cron = _cron(checked, min_interval)
    async with pool.connection() as conn, conn.transaction():
        row = await store.definition_create(
            conn, kind=checked.kind, fields=_fields(checked), actor=actor
        )
        if row is None:
            raise ConflictError(f"a definition named {checked.name!r} exists")
        definition = Definition.from_row(row)
        await _schedule(conn, store, definition, cron)
    return definition


async def get(pool: AsyncConnectionPool[Any], store: Store, definition_id: int) -> Definition:
    """One definition."""
    async with pool.connection() as conn:
        row = await store.definition_get(conn, id=definition_id)
    if row is None:
        raise NotFoundError("definition", definition_id)
    return Definition.from_row(row)


async def find(pool: AsyncConnectionPool[Any], store: Store, key: str) -> int:
    """A definition's id from its id or its name (as the CLI takes it)."""
    async with pool.connection() as conn:
        found = await store.definition_find(conn, name=key)
    if found is not None:
        return found
    if key.isdigit():
        return int(key)
    raise NotFoundError("definition", key)


def _like(text: str) -> str:
    escaped = text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    return f"%{escaped}%"


async def page(
    pool: AsyncConnectionPool[Any],
    store: Store,
    *,
    kind: str | None = None,
    enabled: bool | None = None,
    name: str | None = None,
    after: int = 0,
    limit: int = 100,
) -> tuple[list[Definition], int | None]:
    """Definitions by id after ``after``, filtered (``name``: a part of it, any case); and
    the cursor of the next page (None on the last)."""
    check_limit(limit)
    async with pool.connection() as conn:
        rows = await store.definition_list(
            conn,
            kind=kind,
            enabled=enabled,
            name_like=None if name is None else _like(name),
            after=after,
            limit=limit + 1,
        )
    items = [Definition.from_row(r) for r in rows[:limit]]
    return items, (items[-1].id if len(rows) > limit else None)


def _as_input(current: Definition) -> dict[str, Any]:
    """A stored definition in the shape of :class:`DefinitionIn`."""
    return {
        "name": current.name,
        "description": current.description,
        "kind": current.kind,
        current.kind: current.spec,
        "cron": current.cron,
        "timezone": current.timezone,
        "exec_timeout": current.exec_timeout,
        "retry": current.retry,
        "loop": current.loop,
        "enabled": current.enabled,
    }


async def edit(
    pool: AsyncConnectionPool[Any],
    store: Store,
    definition_id: int,
    changes: Mapping[str, Any],
    *,
    actor: str,
    event: str = "definition.edited",
    min_interval: float = MIN_INTERVAL,
) -> Definition:
    """Change some fields; the rest stay. The next run (scheduled, run now, webhook) uses
    the edit; runs already made keep the version they were made with. A changed cron fires
    no more often than every ``min_interval`` seconds."""
    given: DefinitionEditIn = parsed(DefinitionEditIn, changes)
    edits = given.model_dump(exclude_unset=True)
    if not edits:  # nothing to change: no new version, no audit event
        return await get(pool, store, definition_id)
    for field, value in edits.items():
        if value is None and field not in NULLABLE_EDITS:
            raise InvalidField(field, "may not be null (leave it out to keep it)")
    async with pool.connection() as conn, conn.transaction():
        row = await store.definition_get_locked(conn, id=definition_id)
        if row is None:
            raise NotFoundError("definition", definition_id)
        current = Definition.from_row(row)
        other = "script" if current.kind == "http" else "http"
        if other in edits:
            raise InvalidField(other, f"definition {current.name!r} is {current.kind}")
        # what was given, as given (sub-models with their defaults filled in)
        merged = _as_input(current) | {k: getattr(given, k) for k in edits}
        checked: DefinitionIn = parsed(
            DefinitionIn,
            {k: v.model_dump() if hasattr(v, "model_dump") else v for k, v in merged.items()},
        )
        cron = _cron(checked, min_interval if edits.get("cron") is not None else None)
        try:
            async with conn.transaction():  # a savepoint: the name may be taken meanwhile
                stored = await store.definition_update(
                    conn,
                    id=definition_id,
                    fields=_fields(checked),
                    event=event,
                    changed=dumps(sorted(edits)),
                    actor=actor,
                )
        except DuplicateKey:
            raise ConflictError(f"a definition named {checked.name!r} exists") from None
        if stored is None:
            raise NotFoundError("definition", definition_id)
        definition = Definition.from_row(stored)
        await _schedule(conn, store, definition, cron)
    return definition


async def set_enabled(
    pool: AsyncConnectionPool[Any],
    store: Store,
    definition_id: int,
    enabled: bool,
    *,
    actor: str,
) -> Definition:
    """Pause (disable) or resume a definition: a paused one is not scheduled and refuses
    webhooks; an operator may still run it now. A resumed schedule goes on from its next
    fire time after now."""
    event = "definition.resumed" if enabled else "definition.paused"
    return await edit(pool, store, definition_id, {"enabled": enabled}, actor=actor, event=event)


async def delete(
    pool: AsyncConnectionPool[Any], store: Store, definition_id: int, *, actor: str
) -> None:
    """Delete a definition and its schedule; its runs stay as jobs (a run in flight ends
    with the snapshot it was made with)."""
    async with pool.connection() as conn:
        gone = await store.definition_delete(conn, id=definition_id, actor=actor)
    if gone is None:
        raise NotFoundError("definition", definition_id)


async def run_now(
    pool: AsyncConnectionPool[Any],
    store: Store,
    definition_id: int,
    *,
    actor: str,
) -> int:
    """Enqueue one run now with the definition as it is (audited with the job's id); the
    job's id. A paused definition runs too: an operator asked for it."""
    async with pool.connection() as conn, conn.transaction():
        row = await store.definition_get_locked(conn, id=definition_id)
        if row is None:
            raise NotFoundError("definition", definition_id)
        trigger = {"via": "operator", "actor": actor}
        return await _enqueue_run(conn, store, Definition.from_row(row), trigger, actor)


async def _enqueue_run(
    conn: AsyncConn,
    store: Store,
    definition: Definition,
    trigger: dict[str, Any],
    actor: str,
    event: str = "definition.run",
) -> int:
    """Insert one run of ``definition`` (its snapshot) and its audit event; the job's id."""
    job = JobRow(
        queue=definition.queue,
        task=definition.task,
        priority=DEFAULT_PRIORITY,
        max_attempts=definition.retry["max_attempts"],
        run_at=None,
        timeout=JOB_TIMEOUT,
        unique_key=None,
        created_by=actor,
    )
    plan = insert_plan([job], [definition.snapshot(trigger)])
    answer = await store.job_insert(conn, job=plan.sent[0], args=plan.args)
    job_id: int = answer["id"]
    await store.definition_run_audit(
        conn,
        id=definition.id,
        job_id=job_id,
        version=definition.version,
        event=event,
        actor=actor,
    )
    return job_id


WEBHOOK_TOKEN_PREFIX = "twh_"
MAX_WEBHOOK_PAYLOAD = 64 * 1024
"""Bytes of a webhook request's body a run keeps as its trigger's payload (the API refuses
a larger body with 413)."""


def webhook_path(definition_id: int, token: str) -> str:
    return f"/api/webhooks/{definition_id}/{token}"


async def set_webhook(
    pool: AsyncConnectionPool[Any], store: Store, definition_id: int, *, actor: str
) -> str:
    """A new webhook token for the definition (any earlier one stops working); only its hash
    is stored, so this is the one time it is seen."""
    token = new_token(WEBHOOK_TOKEN_PREFIX)
    async with pool.connection() as conn:
        row = await store.definition_webhook_set(
            conn,
            id=definition_id,
            hash=token_hash(token),
            event="definition.webhook_set",
            actor=actor,
        )
    if row is None:
        raise NotFoundError("definition", definition_id)
    return token


async def remove_webhook(
    pool: AsyncConnectionPool[Any], store: Store, definition_id: int, *, actor: str
) -> None:
    """Remove the definition's webhook: its token stops working."""
    async with pool.connection() as conn:
        row = await store.definition_webhook_set(
            conn, id=definition_id, hash=None, event="definition.webhook_removed", actor=actor
        )
    if row is None:
        raise NotFoundError("definition", definition_id)


async def webhook_run(
    pool: AsyncConnectionPool[Any],
    store: Store,
    definition_id: int,
    token: str,
    payload: bytes,
    headers: Mapping[str, str],
    *,
    admit: Callable[[int], None] | None = None,
) -> int:
    """Enqueue one run for a webhook call; the job's id. An unknown definition, one without
    a webhook and a wrong token are the same NotFoundError (nothing tells them apart); a
    paused definition is a ConflictError. The body is the run's ``trigger.payload`` (text),
    ``headers`` (those the API passes on) its ``trigger.headers``."""
    if len(payload) > MAX_WEBHOOK_PAYLOAD:
        raise InvalidField("body", f"is larger than {MAX_WEBHOOK_PAYLOAD:,} bytes")
    try:
        text = payload.decode("utf-8")
    except UnicodeDecodeError:
        raise InvalidField("body", "must be UTF-8 text (JSON, form data, plain text)") from None
    refused = text_problem(text)
    if refused is not None:
        raise InvalidField("body", refused)
    presented = token_hash(token)
    async with pool.connection() as conn, conn.transaction():
        row = await store.definition_get_locked(conn, id=definition_id)
        stored = None if row is None else row["webhook_hash"]
        if stored is None or not hmac.compare_digest(bytes(stored), presented):
            raise NotFoundError("webhook", definition_id)
        definition = Definition.from_row(row)  # type: ignore[arg-type]
        if admit is not None:  # counted only once the token is right: no one else can
            admit(definition.id)  # use up a definition's rate
        if not definition.enabled:
            raise ConflictError(f"definition {definition.name!r} is paused")
        trigger = {
            "via": "webhook",
            "payload": text,
            "content_type": headers.get("content-type"),
            "headers": dict(headers),
        }
        actor = f"webhook:{definition.id}"
        return await _enqueue_run(conn, store, definition, trigger, actor, "definition.webhook")


async def activity(
    pool: AsyncConnectionPool[Any],
    store: Store,
    definition_id: int,
    *,
    start: datetime | None = None,
    end: datetime | None = None,
    bucket: str = "hour",
) -> dict[str, Any]:
    """The definition's runs from ``start`` to ``end`` (default: the last 24 hours), in
    buckets of a ``minute``, an ``hour`` or a ``day``: attempts ended, succeeded, failed,
    mean and longest duration; and the totals."""
    async with pool.connection() as conn:
        start, end, step = await chart_range(conn, store, start, end, bucket)
        if await store.definition_get(conn, id=definition_id) is None:
            raise NotFoundError("definition", definition_id)
        rows = await store.definition_activity_list(
            conn, id=definition_id, start=start, end=end, step=step
        )
    buckets = [
        {
            "at": r["at"],
            "runs": r["runs"],
            "succeeded": r["succeeded"],
            "failed": r["failed"],
            "mean_duration": r["duration_total"] / r["runs"] if r["runs"] else 0.0,
            "max_duration": r["duration_max"],
        }
        for r in rows
    ]
    runs = sum(b["runs"] for b in buckets)
    return {
        "definition_id": definition_id,
        "start": start,
        "end": end,
        "bucket": bucket,
        "buckets": buckets,
        "runs": runs,
        "succeeded": sum(b["succeeded"] for b in buckets),
        "failed": sum(b["failed"] for b in buckets),
        "mean_duration": (sum(r["duration_total"] for r in rows) / runs) if runs else 0.0,
    }
