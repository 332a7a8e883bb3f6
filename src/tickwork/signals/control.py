"""Runtime control: a configured value, a runtime override, and the effective value.

An override is set through the admin API of any process and stored in the database for the
processes that hold SIGNAL_MASTER and SWEEP_MASTER then, by holder id: those apply it (each
pass reads their overrides), and every process shows it. It lives as long as that holder:
a restart or a change of holder (another holder id) drops it, so an emergency switch can
never silently become permanent configuration. Organisation sets fail closed: the
configured default is empty (none), so a lost override falls back to no tenants, not all.

A holder publishes its configuration (:meth:`RuntimeControl.published`) so that the other
processes show the holder's config, override and effective value
(:class:`PublishedControl`), not their own.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from tickwork.config import SignalSettings

T = TypeVar("T")

PROCESSOR = "processor"
"""The switch of the signal processor."""
SWEEPS = "sweeps"
"""The switch of the sweeps."""
REACTOR_SWITCHES = ("enabled", "dry_run", "organisations")
"""Each reactor's switches."""


def reactor_switch(kind: str, reactor: str) -> str:
    """The stored name of one reactor's switch (``enabled:tally``)."""
    return f"{kind}:{reactor}"


@dataclass(frozen=True, slots=True)
class Tiered(Generic[T]):
    """One switch's three levels."""

    config: T
    """From the configuration; survives restarts."""
    override: T | None
    """Set at run time through the API; None when not overridden."""

    @property
    def effective(self) -> T:
        """What the framework obeys: the override, else the configuration."""
        return self.config if self.override is None else self.override


@dataclass(frozen=True, slots=True)
class ReactorControl:
    """A reactor's switches."""

    enabled: Tiered[bool]
    dry_run: Tiered[bool]
    organisations: Tiered[frozenset[str]]


class Switches:
    """Switches with their overrides (a mapping of stored switch name to JSON value); a
    subclass says what the configuration holds."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._overrides: dict[str, Any] = {}

    def _config(self, switch: str) -> Any:
        raise NotImplementedError

    def load(self, overrides: Mapping[str, Any]) -> None:
        """Take the stored overrides as they are now (what is not there is not overridden)."""
        with self._lock:
            self._overrides = dict(overrides)

    def _tiered(self, switch: str) -> Tiered[Any]:
        with self._lock:
            return Tiered(self._config(switch), self._overrides.get(switch))

    def processor(self) -> Tiered[bool]:
        tiered: Tiered[bool] = self._tiered(PROCESSOR)
        return tiered

    def sweeps(self) -> Tiered[bool]:
        tiered: Tiered[bool] = self._tiered(SWEEPS)
        return tiered

    def reactor(self, name: str) -> ReactorControl:
        organisations = self._tiered(reactor_switch("organisations", name))
        return ReactorControl(
            enabled=self._tiered(reactor_switch("enabled", name)),
            dry_run=self._tiered(reactor_switch("dry_run", name)),
            organisations=Tiered(
                frozenset(organisations.config),
                None if organisations.override is None else frozenset(organisations.override),
            ),
        )


class RuntimeControl(Switches):
    """This process's switches: configuration from its settings, overrides as stored for
    its holder id (:meth:`load`)."""

    def __init__(self, settings: SignalSettings) -> None:
        super().__init__()
        self.settings = settings
        self.published_as: tuple[str, str] | None = None
        """The holder id and configuration (JSON) last published for the other processes."""

    def _config(self, switch: str) -> Any:
        if switch == PROCESSOR:
            return self.settings.processor.enabled
        if switch == SWEEPS:
            return self.settings.sweeps_enabled
        kind, _, name = switch.partition(":")
        reactor = self.settings.reactor(name)
        return {
            "enabled": reactor.enabled,
            "dry_run": reactor.dry_run,
            "organisations": sorted(reactor.organisations),
        }[kind]

    def published(self, reactors: Iterable[Mapping[str, Any]]) -> dict[str, Any]:
        """This process's configuration as other processes show it: every switch, and
        ``reactors`` (each a mapping with at least ``name``) as they are registered here."""
        reactors = list(reactors)
        return {
            "switches": {
                PROCESSOR: self._config(PROCESSOR),
                SWEEPS: self._config(SWEEPS),
                **{
                    reactor_switch(kind, r["name"]): self._config(reactor_switch(kind, r["name"]))
                    for r in reactors
                    for kind in REACTOR_SWITCHES
                },
            },
            "reactors": [dict(r) for r in reactors],
        }


class PublishedControl(Switches):
    """Another process's switches, as it published them (:meth:`RuntimeControl.published`)
    with its stored overrides."""

    def __init__(self, holder: str, published: Mapping[str, Any], overrides: Mapping[str, Any]):
        super().__init__()
        self.holder = holder
        self._switches: dict[str, Any] = dict(published.get("switches", {}))
        self.reactors: list[dict[str, Any]] = list(published.get("reactors", []))
        self.load(overrides)

    def _config(self, switch: str) -> Any:
        if switch in self._switches:
            return self._switches[switch]
        return [] if switch.startswith("organisations:") else False  # unknown: off, none
