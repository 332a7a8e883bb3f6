"""Statements of ``sql/health.sql``."""

from __future__ import annotations

from tickwork.db.store.runner import AsyncConn, Conn, Runner


class HealthStatements(Runner):
    """One method per statement of ``sql/health.sql``."""

    async def health_autovacuum(self, conn: AsyncConn) -> bool:
        """Whether the server runs autovacuum."""
        return bool((await self._rows(conn, "health_autovacuum", {}))[0]["autovacuum"])

    def health_autovacuum_sync(self, conn: Conn) -> bool:
        """:meth:`health_autovacuum` on a sync connection."""
        return bool(self._rows_sync(conn, "health_autovacuum", {})[0]["autovacuum"])
