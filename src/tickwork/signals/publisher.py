"""Emitting signals: one statement that squashes into a pending signal of the same type and
key or inserts a new one, joining the caller's transaction when one is given."""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from tickwork.db.database import Database
from tickwork.db.driver_errors import translating
from tickwork.db.store import Row
from tickwork.db.store.signals import NewSignal
from tickwork.errors import SignalError
from tickwork.limits import json_refusal
from tickwork.ops import metrics
from tickwork.queue.enqueue import async_connection, callers_transaction
from tickwork.signals.reactor import SIGNAL_TYPE

log = logging.getLogger("tickwork.signals")

MAX_KEY_LENGTH = 200
MAX_ENTITY_LENGTH = 100


@dataclass(frozen=True, slots=True)
class Emitted:
    """What an emit did."""

    signal_id: int
    """The signal that now carries this emit (the existing one when squashed)."""
    squashed: bool
    """True when a pending signal absorbed this emit."""
    process_after: datetime
    """Its debounce deadline now."""


def _text(field: str, value: Any, limit: int) -> str | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, str | int):
        raise SignalError(field, value, "must be a string or an integer")
    text = str(value)
    if not text or len(text) > limit:
        raise SignalError(field, value, f"must be 1-{limit} characters")
    return text


class Signals:
    """``app.signals``: emit domain signals (sync or async, optionally in your transaction)."""

    def __init__(self, db: Database) -> None:
        self.db = db

    def _signal(
        self,
        signal_type: str,
        entity_type: str | None,
        entity_id: str | int | None,
        aggregate_key: str | None,
        organisation_id: str | int | None,
        payload: Any,
    ) -> NewSignal:
        if not isinstance(signal_type, str) or not SIGNAL_TYPE.match(signal_type):
            raise SignalError(
                "signal_type", signal_type, "must be 1-100 characters of letters, digits, _.:-"
            )
        settings = self.db.settings.signals
        window = settings.window(signal_type)
        key = _text("aggregate_key", aggregate_key, MAX_KEY_LENGTH)
        try:
            payload_json = None if payload is None else json.dumps(payload, allow_nan=False)
        except RecursionError:
            raise SignalError("payload", payload, "is nested too deep to encode") from None
        except (TypeError, ValueError) as exc:
            raise SignalError("payload", payload, f"is not JSON-serialisable: {exc}") from None
        refusal = None if payload_json is None else json_refusal(payload_json, payload)
        if refusal is not None:
            raise SignalError("payload", payload, refusal)
        return NewSignal(
            signal_type=signal_type,
            entity_type=_text("entity_type", entity_type, MAX_ENTITY_LENGTH),
            entity_id=_text("entity_id", entity_id, MAX_KEY_LENGTH),
            # A zero window means every occurrence matters: no key, so nothing can squash it.
            aggregate_key=key if window > 0 else None,
            organisation_id=_text("organisation_id", organisation_id, MAX_ENTITY_LENGTH),
            payload=payload_json,
            window=window,
            max_retries=settings.processor.max_retries,
        )

    def emit(
        self,
        signal_type: str,
        entity_type: str | None = None,
        entity_id: str | int | None = None,
        aggregate_key: str | None = None,
        organisation_id: str | int | None = None,
        payload: Any = None,
        *,
        conn: Any = None,
    ) -> Emitted:
        """Record that something happened. With ``conn`` (psycopg or SQLAlchemy), in the
        caller's transaction: if it rolls back, the signal never existed. Emit after the
        domain change, inside the same transaction."""
        signal = self._signal(
            signal_type, entity_type, entity_id, aggregate_key, organisation_id, payload
        )
        store = self.db.store
        if conn is None and self.db.joined is not None:
            conn = self.db.joined()
        with translating():
            if conn is not None:
                with callers_transaction(conn) as joined:
                    row = store.signal_emit_sync(joined, signal=signal)
            else:
                with self.db.pool().connection() as own:
                    row = store.signal_emit_sync(own, signal=signal)
        return _emitted(row, signal)

    async def emit_async(
        self,
        signal_type: str,
        entity_type: str | None = None,
        entity_id: str | int | None = None,
        aggregate_key: str | None = None,
        organisation_id: str | int | None = None,
        payload: Any = None,
        *,
        conn: Any = None,
    ) -> Emitted:
        """Async :meth:`emit`."""
        signal = self._signal(
            signal_type, entity_type, entity_id, aggregate_key, organisation_id, payload
        )
        store = self.db.store
        with translating():
            if conn is not None:
                row = await store.signal_emit(await async_connection(conn), signal=signal)
            else:
                pool = await self.db.async_pool()
                async with pool.connection() as own:
                    row = await store.signal_emit(own, signal=signal)
        return _emitted(row, signal)


def _emitted(row: Row, signal: NewSignal) -> Emitted:
    emitted = Emitted(row["id"], row["squashed"], row["process_after"])
    signal_type = signal.signal_type
    metrics.signal_emitted(signal_type, emitted.squashed)
    log.info(
        "signal squashed" if emitted.squashed else "signal emitted",
        extra={
            "signal_id": emitted.signal_id,
            "signal_type": signal_type,
            "aggregate_key": signal.aggregate_key,
            "process_after": emitted.process_after.isoformat(),
        },
    )
    return emitted
