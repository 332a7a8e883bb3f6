"""Statements of ``sql/audit.sql``."""

from __future__ import annotations

from datetime import datetime

from tickwork.db.store.runner import AsyncConn, Row, Runner


class AuditStatements(Runner):
    """One method per statement of ``sql/audit.sql``."""

    async def audit_append(
        self,
        conn: AsyncConn,
        *,
        actor: str,
        event_type: str,
        target_type: str,
        target_id: str,
        metadata: str,
    ) -> Row:
        """Append one event (``metadata``: JSON text) in the caller's transaction, if any;
        its ``audit_events`` row."""
        return (
            await self._rows(
                conn,
                "audit_append",
                {
                    "actor": actor,
                    "event_type": event_type,
                    "target_type": target_type,
                    "target_id": target_id,
                    "metadata": metadata,
                },
            )
        )[0]

    async def audit_list(
        self,
        conn: AsyncConn,
        *,
        actor: str | None,
        event_type: str | None,
        target_type: str | None,
        target_id: str | None,
        occurred_from: datetime | None,
        occurred_to: datetime | None,
        limit: int,
        before_id: int | None,
    ) -> list[Row]:
        """Up to ``limit`` ``audit_events`` rows matching every filter given (None: not
        filtering) with an id below ``before_id``, newest first."""
        return await self._rows(
            conn,
            "audit_list",
            {
                "actor": actor,
                "event_type": event_type,
                "target_type": target_type,
                "target_id": target_id,
                "occurred_from": occurred_from,
                "occurred_to": occurred_to,
                "limit": limit,
                "before_id": before_id,
            },
        )

    async def audit_list_for_target(
        self, conn: AsyncConn, *, target_type: str, target_id: str
    ) -> list[Row]:
        """The audit events of one target, oldest first."""
        return await self._rows(
            conn, "audit_list_for_target", {"target_type": target_type, "target_id": target_id}
        )

    async def audit_prune(self, conn: AsyncConn, *, older_than: float, limit: int) -> int:
        """Delete up to ``limit`` audit events older than ``older_than`` seconds; how many."""
        params = {"older_than": older_than, "limit": limit}
        return len(await self._rows(conn, "audit_prune", params))
