"""Statements of ``sql/appconfig.sql``."""

from __future__ import annotations

from collections.abc import Sequence

from tickwork.db.store.runner import AsyncConn, Row, Runner


class AppConfigStatements(Runner):
    """One method per statement of ``sql/appconfig.sql``."""

    async def app_setting_list(self, conn: AsyncConn) -> list[Row]:
        """Rows ``key, value, updated_at, updated_by`` of every stored app setting."""
        return await self._rows(conn, "app_setting_list", {})

    async def app_setting_put(self, conn: AsyncConn, *, key: str, value: str, actor: str) -> Row:
        """Store a setting (``value``: JSON text), audited; row
        ``key, value, updated_at, updated_by``."""
        return (
            await self._rows(conn, "app_setting_put", {"key": key, "value": value, "actor": actor})
        )[0]

    async def variable_list(self, conn: AsyncConn) -> list[Row]:
        """Rows ``name, value, secret, updated_at, updated_by`` of every variable, by name
        (``value`` None for a secret one)."""
        return await self._rows(conn, "variable_list", {})

    async def variable_values(self, conn: AsyncConn, *, names: Sequence[str]) -> list[Row]:
        """Rows ``name, value, secret`` of the variables named (secret values included: for
        a runtime, which masks them; never for the API)."""
        return await self._rows(conn, "variable_values", {"names": list(names)})

    async def variable_put(
        self, conn: AsyncConn, *, name: str, value: str, secret: bool, actor: str
    ) -> Row:
        """Create or replace a variable, audited (never its value); row
        ``name, value, secret, updated_at, updated_by`` (``value`` None when secret)."""
        return (
            await self._rows(
                conn,
                "variable_put",
                {"name": name, "value": value, "secret": secret, "actor": actor},
            )
        )[0]

    async def variable_delete(self, conn: AsyncConn, *, name: str, actor: str) -> bool:
        """Delete a variable, audited; whether there was one."""
        return bool(await self._rows(conn, "variable_delete", {"name": name, "actor": actor}))
