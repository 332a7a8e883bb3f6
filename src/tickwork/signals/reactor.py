"""Reactors: what a signal type triggers, and the periodic sweep that finds what signals
missed. Subclass :class:`Reactor` and register it with ``app.add_reactor(...)`` (or the
``@app.reactor`` class decorator)."""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from typing import Any

from tickwork.config import SignalSettings
from tickwork.errors import ReactorDefinitionError
from tickwork.schedule.cron import CronSchedule
from tickwork.signals.records import ReactorContext, Signal

REACTOR_NAME = re.compile(r"^[a-z0-9][a-z0-9_.-]{0,99}\Z")
SIGNAL_TYPE = re.compile(r"^[A-Za-z0-9_.:-]{1,100}\Z")


class Reactor:
    """One processing concern: the signal types it handles, a sweep, or both.

    Set the class attributes and override :meth:`handle_signal` (when ``handles`` is not
    empty) and/or :meth:`sweep` (when ``sweep_cron`` is set). Both are async and get a
    :class:`~tickwork.signals.ReactorContext` whose connection is in the transaction that
    records the run; raising from ``handle_signal`` marks this reactor FAILED for the signal
    and schedules a retry of this reactor only. Sweeps must be idempotent: they run again on
    the next tick, after a failover and on demand.
    """

    name: str = ""
    """Unique; used in configuration keys, logs, metrics and the admin API."""
    handles: frozenset[str] = frozenset()
    """Signal types this reactor handles; empty = sweep-only."""
    sweep_cron: str | None = None
    """When the sweep runs (UTC; 5 or 6 fields or an alias); None = signal-only. The
    configuration's ``signals.reactors.<name>.sweep_cron`` overrides it."""
    organisation_scoped: bool = True
    """Acts on tenant data: only for its effective organisation set (empty = none)."""

    async def handle_signal(self, signal: Signal, ctx: ReactorContext) -> None:
        """Handle one signal."""
        raise NotImplementedError(f"reactor {self.name!r} handles signals but has no handler")

    async def sweep(self, ctx: ReactorContext) -> None:
        """Reconcile over domain state (idempotent)."""
        raise NotImplementedError(f"reactor {self.name!r} has a sweep cron but no sweep")

    def __repr__(self) -> str:
        return f"<Reactor {self.name} handles={sorted(self.handles)} sweep={self.sweep_cron}>"


class Reactors:
    """The registered reactors, checked once when each is added."""

    def __init__(self) -> None:
        self._by_name: dict[str, Reactor] = {}

    def add(self, reactor: Reactor) -> Reactor:
        name = reactor.name
        if not isinstance(name, str) or not REACTOR_NAME.match(name):
            raise ReactorDefinitionError(
                f"reactor name ({name!r}) must be 1-100 lower-case letters, digits, _.- "
                "(it is a configuration key)"
            )
        if name in self._by_name:
            raise ReactorDefinitionError(f"reactor {name!r} is registered twice")
        reactor.handles = frozenset(reactor.handles)
        for signal_type in reactor.handles:
            if not isinstance(signal_type, str) or not SIGNAL_TYPE.match(signal_type):
                raise ReactorDefinitionError(
                    f"reactor {name!r}: signal type ({signal_type!r}) must be 1-100 characters"
                    " of letters, digits, _.:-"
                )
        if reactor.handles and type(reactor).handle_signal is Reactor.handle_signal:
            raise ReactorDefinitionError(f"reactor {name!r} handles signals: define handle_signal")
        if reactor.sweep_cron is not None:
            CronSchedule.parse(reactor.sweep_cron)  # a bad expression fails here, named
            if type(reactor).sweep is Reactor.sweep:
                raise ReactorDefinitionError(f"reactor {name!r} has a sweep_cron: define sweep")
        if (
            not reactor.handles
            and reactor.sweep_cron is None
            and type(reactor).sweep is Reactor.sweep
        ):
            raise ReactorDefinitionError(f"reactor {name!r} neither handles signals nor sweeps")
        self._by_name[name] = reactor
        return reactor

    def get(self, name: str) -> Reactor | None:
        return self._by_name.get(name)

    def for_type(self, signal_type: str) -> list[Reactor]:
        """Reactors handling ``signal_type``, by name."""
        return [r for r in self if signal_type in r.handles]

    def __iter__(self) -> Iterator[Reactor]:
        return iter(sorted(self._by_name.values(), key=lambda r: r.name))

    def __len__(self) -> int:
        return len(self._by_name)

    def names(self) -> Iterable[str]:
        return sorted(self._by_name)

    def describe(self, settings: SignalSettings) -> list[dict[str, Any]]:
        """Each reactor as the admin API shows it (and a lease holder publishes it): name,
        handled types, effective sweep cron (the configuration's over the code's), whether
        it is organisation-scoped, and whether it has a sweep at all."""
        return [
            {
                "name": r.name,
                "handles": sorted(r.handles),
                "sweep_cron": settings.reactor(r.name).sweep_cron or r.sweep_cron,
                "organisation_scoped": r.organisation_scoped,
                "sweeps": type(r).sweep is not Reactor.sweep,
            }
            for r in self
        ]
