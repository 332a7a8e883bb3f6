"""Statements of ``sql/health.sql``."""

from __future__ import annotations

from tickwork.db.store.runner import AsyncConn, Conn, Row, Runner


class HealthStatements(Runner):
    """One method per statement of ``sql/health.sql``."""

    async def health_autovacuum(self, conn: AsyncConn) -> bool:
        """Whether the server runs autovacuum."""
        return bool((await self._rows(conn, "health_autovacuum", {}))[0]["autovacuum"])

    def health_autovacuum_sync(self, conn: Conn) -> bool:
        """:meth:`health_autovacuum` on a sync connection."""
        return bool(self._rows_sync(conn, "health_autovacuum", {})[0]["autovacuum"])

    def health_tables_sync(self, conn: Conn) -> list[Row]:
        """Size, dead tuples and HOT updates of each table of the schema, by name."""
        return self._rows_sync(conn, "health_tables", {"schema": self.schema})

    def health_indexes_sync(self, conn: Conn) -> list[Row]:
        """Size and scans of each index of the schema, by table and name."""
        return self._rows_sync(conn, "health_indexes", {"schema": self.schema})

    def health_xmin_horizon_sync(self, conn: Conn, *, limit: int) -> list[Row]:
        """The ``limit`` oldest snapshot holders of the cluster (sessions, prepared
        transactions, replication slots), oldest first."""
        return self._rows_sync(conn, "health_xmin_horizon", {"limit": limit})
