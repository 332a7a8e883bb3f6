"""The signal processor: takes matured signals, routes each to its reactors independently,
records every reactor's delivery, and derives the signal's status. Runs only on the holder of
the SIGNAL_MASTER lease, only while the processor is enabled (master switch and runtime
control)."""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

from tickwork.db.loaders import Undecodable
from tickwork.ops import metrics
from tickwork.services.leases import Role
from tickwork.signals.base import SignalService
from tickwork.signals.control import RuntimeControl
from tickwork.signals.reactor import Reactor
from tickwork.signals.records import DeliveryStatus, ReactorContext, Signal, SignalStatus

log = logging.getLogger("tickwork.signals")


@dataclass(frozen=True, slots=True)
class Delivered:
    """What one reactor did with one signal in this pass."""

    reactor: str
    status: DeliveryStatus | None
    """COMPLETED, FAILED or DEAD; None when skipped (completed before, or retry not due)."""
    dry_run: bool = False


@dataclass(frozen=True, slots=True)
class Processed:
    """One signal's pass."""

    signal_id: int
    signal_type: str
    status: SignalStatus
    """Its status after the pass."""
    delivered: list[Delivered] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    """Reactors of its type not invoked: disabled, or out of their organisation scope."""


@dataclass(frozen=True, slots=True)
class ProcessResult:
    """What one processor pass did (None from run_once: not the holder, or switched off)."""

    processed: list[Processed] = field(default_factory=list)


class _HandlerFailed(Exception):
    """A reactor's handler raised (carried out of the transaction so it rolls back)."""

    def __init__(self, error: Exception) -> None:
        self.error = error


def skip_reason(reactor: Reactor, signal: Signal, control: RuntimeControl) -> str | None:
    """Why ``reactor`` must not be invoked for ``signal`` (None: it may be). The scoping
    rules fail closed: a scoped reactor needs a signal with an organisation in its set."""
    switches = control.reactor(reactor.name)
    if not switches.enabled.effective:
        return "disabled"
    if reactor.organisation_scoped:
        if signal.organisation_id is None:
            return "signal has no organisation"
        if signal.organisation_id not in switches.organisations.effective:
            return "organisation outside the reactor's set"
    return None


@dataclass
class SignalProcessor(SignalService):
    """Processes matured signals a batch at a time."""

    def active(self) -> bool:
        """Master switch, lease and runtime switch all say go."""
        return (
            self.settings.enabled
            and self.leases.holds(Role.SIGNAL_MASTER)
            and self.control.processor().effective
        )

    async def run_once(self) -> ProcessResult | None:
        """One pass over up to ``batch_size`` ready signals."""
        await self.sync_control()
        if not self.active():
            return None
        async with self.pool.connection() as conn:
            claimed = await self.store.signal_claim(
                conn,
                limit=self.settings.processor.batch_size,
                stuck_after=self.settings.processor.stuck_after,
            )
        result = ProcessResult()
        for row in claimed:
            signal = Signal.from_row(row)
            if row["recovered"]:
                log.warning(
                    "signal recovered from a processor that stopped",
                    extra={"signal_id": signal.id, "signal_type": signal.signal_type},
                )
            if signal.status is SignalStatus.DEAD:
                log.error(
                    "signal is DEAD: processors stopped while handling it too often",
                    extra={"signal_id": signal.id, "signal_type": signal.signal_type},
                )
                metrics.signal_settled(signal.signal_type, signal.status.value)
                result.processed.append(Processed(signal.id, signal.signal_type, signal.status))
                continue
            result.processed.append(await self._process(signal))
        return result

    async def _process(self, signal: Signal) -> Processed:
        routed: list[str] = []
        skipped: list[str] = []
        delivered: list[Delivered] = []
        for reactor in self.reactors.for_type(signal.signal_type):
            reason = skip_reason(reactor, signal, self.control)
            if reason is not None:
                skipped.append(reactor.name)
                log.debug(
                    "reactor skipped",
                    extra={"signal_id": signal.id, "reactor": reactor.name, "reason": reason},
                )
                continue
            routed.append(reactor.name)
            delivered.append(await self._deliver(reactor, signal))
        async with self.pool.connection() as conn, conn.transaction():
            # under the signal's lock, so an operator's retry of a delivery meanwhile is seen
            await self.store.signal_lock(conn, signal_id=signal.id)
            settled = await self.store.signal_settle(conn, signal_id=signal.id, reactors=routed)
        status = SignalStatus(settled["status"]) if settled else signal.status
        if settled and settled["dead_reactors"]:
            log.warning(
                "signal completed with dead reactors",
                extra={"signal_id": signal.id, "dead": settled["dead_reactors"]},
            )
        metrics.signal_settled(signal.signal_type, status.value)
        log.info(
            "signal processed",
            extra={
                "signal_id": signal.id,
                "signal_type": signal.signal_type,
                "status": status.value,
                "reactors": ",".join(routed),
            },
        )
        return Processed(signal.id, signal.signal_type, status, delivered, skipped)

    async def _deliver(self, reactor: Reactor, signal: Signal) -> Delivered:
        """Run one reactor on one signal in one transaction with its COMPLETED record; on an
        exception, record FAILED (or DEAD) in a new transaction."""
        switches = self.control.reactor(reactor.name)
        dry_run = switches.dry_run.effective
        try:
            async with self.pool.connection() as conn, conn.transaction():
                begun = await self.store.signal_reactor_begin(
                    conn, signal_id=signal.id, reactor=reactor.name
                )
                if begun["status"] in ("COMPLETED", "DEAD") or begun["retry_not_due"]:
                    return Delivered(reactor.name, None)
                ctx = ReactorContext(
                    conn=conn,
                    dry_run=dry_run,
                    organisations=switches.organisations.effective,
                    config=self.settings.reactor(reactor.name).extra,
                )
                try:
                    if isinstance(signal.payload, Undecodable):  # stored by SQL: not run
                        raise ValueError(f"payload could not be decoded: {signal.payload.reason}")
                    if dry_run:
                        async with conn.transaction(force_rollback=True):
                            await reactor.handle_signal(signal, ctx)
                    else:
                        await reactor.handle_signal(signal, ctx)
                except Exception as exc:
                    raise _HandlerFailed(exc) from exc  # rolls the reactor's writes back
                await self.store.signal_reactor_complete(
                    conn, signal_id=signal.id, reactor=reactor.name, dry_run=dry_run
                )
            return Delivered(reactor.name, DeliveryStatus.COMPLETED, dry_run)
        except _HandlerFailed as failure:
            error = f"{type(failure.error).__name__}: {failure.error}"
            async with self.pool.connection() as conn:
                failed = await self.store.signal_reactor_fail(
                    conn,
                    signal_id=signal.id,
                    reactor=reactor.name,
                    error=error,
                    max_retries=signal.max_retries,
                    backoff=self.settings.processor.backoff,
                    backoff_cap=self.settings.processor.backoff_cap,
                )
            status = DeliveryStatus(failed["status"])
            metrics.reactor_failed(signal.signal_type, reactor.name)
            log.warning(
                "reactor failed on a signal",
                extra={
                    "signal_id": signal.id,
                    "reactor": reactor.name,
                    "status": status.value,
                    "retry_count": failed["retry_count"],
                    "error": error,
                },
            )
            return Delivered(reactor.name, status, dry_run)
