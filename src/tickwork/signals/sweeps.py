"""Sweeps: each reactor's reconciliation on its cron, on the holder of the SWEEP_MASTER lease,
while sweeps and the reactor are enabled and - for an organisation-scoped reactor - its
organisation set is not empty (the framework cannot check the reactor's own query, so it
refuses to start a scoped sweep with nobody to act for). A failing sweep is logged and stays
scheduled."""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from datetime import datetime

from tickwork.errors import NotFoundError, NotLeaderError
from tickwork.ops import metrics
from tickwork.schedule.cron import CronSchedule
from tickwork.services.leases import Role
from tickwork.signals.base import SignalService
from tickwork.signals.reactor import Reactor
from tickwork.signals.records import ReactorContext

log = logging.getLogger("tickwork.sweeps")


@dataclass(frozen=True, slots=True)
class SweepRun:
    """One sweep run."""

    reactor: str
    outcome: str
    """COMPLETED, FAILED, or SKIPPED (with ``reason``)."""
    dry_run: bool = False
    reason: str | None = None
    """Why it was skipped, or the error it failed with."""
    run_id: int | None = None
    """Its ``sweep_runs`` row (None when skipped)."""


@dataclass
class SweepScheduler(SignalService):
    """Runs due sweeps (``run_once``) and manual triggers."""

    _next: dict[str, datetime] = field(default_factory=dict, init=False)
    """Each reactor's next fire time (learnt on this holder's first pass)."""

    def cron(self, reactor: Reactor) -> CronSchedule | None:
        """The reactor's effective sweep schedule (configuration overrides code)."""
        expression = self.settings.reactor(reactor.name).sweep_cron or reactor.sweep_cron
        return CronSchedule.parse(expression) if expression else None

    def active(self) -> bool:
        return (
            self.settings.enabled
            and self.leases.holds(Role.SWEEP_MASTER)
            and self.control.sweeps().effective
        )

    async def _now(self) -> datetime:
        async with self.pool.connection() as conn:
            return await self.store.schedule_now(conn)

    async def run_once(self) -> list[SweepRun]:
        """Run every sweep whose fire time has come (database clock)."""
        await self.sync_control()
        if not self.active():
            self._next.clear()  # a new holder starts from its own now
            return []
        now = await self._now()
        runs = []
        for reactor in self.reactors:
            cron = self.cron(reactor)
            if cron is None:
                continue
            due = self._next.get(reactor.name)
            if due is None:
                self._next[reactor.name] = cron.next_after(now)
                continue
            if due > now:
                continue
            self._next[reactor.name] = cron.next_after(now)
            runs.append(await self.run(reactor, trigger="schedule"))
        return runs

    async def trigger(self, name: str) -> SweepRun:
        """Run one reactor's sweep now (the admin API): bypasses the schedule, not the lease."""
        reactor = self.reactors.get(name)
        if reactor is None:
            raise NotFoundError("reactor", name)
        if not self.leases.holds(Role.SWEEP_MASTER):
            raise NotLeaderError(Role.SWEEP_MASTER, None)
        await self.sync_control()  # the overrides as stored now
        return await self.run(reactor, trigger="manual")

    def skip_reason(self, reactor: Reactor) -> str | None:
        switches = self.control.reactor(reactor.name)
        if type(reactor).sweep is Reactor.sweep:
            return "the reactor has no sweep"
        if not self.settings.enabled:
            return "signals are switched off (signals.enabled)"
        if not self.control.sweeps().effective:
            return "sweeps are disabled"
        if not switches.enabled.effective:
            return "the reactor is disabled"
        if reactor.organisation_scoped and not switches.organisations.effective:
            return "organisation-scoped with an empty organisation set"
        return None

    async def run(self, reactor: Reactor, *, trigger: str) -> SweepRun:
        """Run ``reactor``'s sweep once, if its guards allow, and record the run."""
        switches = self.control.reactor(reactor.name)
        dry_run = switches.dry_run.effective  # reported on a skipped run too
        reason = self.skip_reason(reactor)
        if reason is not None:
            log.info("sweep skipped", extra={"reactor": reactor.name, "reason": reason})
            return SweepRun(reactor.name, "SKIPPED", dry_run, reason=reason)
        async with self.pool.connection() as conn:
            started = await self.store.sweep_run_start(
                conn,
                reactor=reactor.name,
                holder=self.leases.holder_id,
                trigger=trigger,
                dry_run=dry_run,
            )
        run_id: int = started["id"]
        began = time.monotonic()
        outcome, error = "COMPLETED", None
        try:
            async with self.pool.connection() as conn, conn.transaction():
                ctx = ReactorContext(
                    conn=conn,
                    dry_run=dry_run,
                    organisations=switches.organisations.effective,
                    config=self.settings.reactor(reactor.name).extra,
                )
                async with conn.transaction(force_rollback=dry_run):
                    await reactor.sweep(ctx)
        except Exception as exc:  # a failing sweep is logged and stays scheduled
            outcome, error = "FAILED", f"{type(exc).__name__}: {exc}"
            log.exception("sweep failed", extra={"reactor": reactor.name, "run_id": run_id})
        seconds = time.monotonic() - began
        async with self.pool.connection() as conn:
            await self.store.sweep_run_finish(conn, run_id=run_id, outcome=outcome, error=error)
        metrics.sweep_ran(reactor.name, outcome, seconds)
        log.info(
            "sweep finished",
            extra={
                "reactor": reactor.name,
                "run_id": run_id,
                "outcome": outcome,
                "dry_run": dry_run,
                "seconds": round(seconds, 3),
            },
        )
        return SweepRun(reactor.name, outcome, dry_run, error, run_id)
