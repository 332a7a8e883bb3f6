"""Statements of ``sql/schedules.sql``."""

from __future__ import annotations

from datetime import datetime

from tickwork.db.store.runner import AsyncConn, Conn, Row, Runner


class ScheduleStatements(Runner):
    """One method per statement of ``sql/schedules.sql``."""

    async def schedule_get(self, conn: AsyncConn, *, name: str) -> Row | None:
        """One schedule's row, or None."""
        found = await self._rows(conn, "schedule_get", {"name": name})
        return found[0] if found else None

    def schedule_get_sync(self, conn: Conn, *, name: str) -> Row | None:
        """:meth:`schedule_get` on a sync connection."""
        found = self._rows_sync(conn, "schedule_get", {"name": name})
        return found[0] if found else None

    async def schedule_list(self, conn: AsyncConn) -> list[Row]:
        """Every schedule's row, by name."""
        return await self._rows(conn, "schedule_list", {})

    def schedule_list_sync(self, conn: Conn) -> list[Row]:
        """:meth:`schedule_list` on a sync connection."""
        return self._rows_sync(conn, "schedule_list", {})

    async def schedule_now(self, conn: AsyncConn) -> datetime:
        """The database's clock."""
        now: datetime = (await self._rows(conn, "schedule_now", {}))[0]["now"]
        return now

    def schedule_set_paused_sync(
        self, conn: Conn, *, name: str, paused: bool, actor: str
    ) -> list[Row]:
        """Pause or resume a schedule; its row when it exists."""
        return self._rows_sync(
            conn, "schedule_set_paused", {"name": name, "paused": paused, "actor": actor}
        )

    def schedule_set_enabled_sync(
        self, conn: Conn, *, name: str, enabled: bool, next_run_at: datetime | None, actor: str
    ) -> list[Row]:
        """Enable or disable a schedule (``next_run_at``: its next fire when enabled)."""
        return self._rows_sync(
            conn,
            "schedule_set_enabled",
            {"name": name, "enabled": enabled, "next_run_at": next_run_at, "actor": actor},
        )

    def schedule_trigger_sync(
        self,
        conn: Conn,
        *,
        name: str,
        actor: str,
        queue: str | None,
        priority: int | None,
        max_attempts: int | None,
        timeout: float | None,
    ) -> list[Row]:
        """Enqueue a schedule's job now (off its cron); the job's row when it exists."""
        return self._rows_sync(
            conn,
            "schedule_trigger",
            {
                "name": name,
                "actor": actor,
                "queue": queue,
                "priority": priority,
                "max_attempts": max_attempts,
                "timeout": timeout,
            },
        )
