"""Statements of ``sql/appconfig.sql``."""

from __future__ import annotations

from tickwork.db.store.runner import AsyncConn, Row, Runner


class AppConfigStatements(Runner):
    """One method per statement of ``sql/appconfig.sql``."""

    async def app_setting_list(self, conn: AsyncConn) -> list[Row]:
        """Rows ``key, value, updated_at, updated_by`` of every stored app setting."""
        return await self._rows(conn, "app_setting_list", {})
