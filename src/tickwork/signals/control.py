"""Runtime control: a configured value, an in-memory override, and the effective value.

The override is per process and deliberately lost on restart, so an emergency switch can
never silently become permanent configuration. Organisation sets fail closed: the
configured default is empty (none), so a lost override falls back to no tenants, not all.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Generic, TypeVar

from tickwork.config import SignalSettings

T = TypeVar("T")


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


class RuntimeControl:
    """The signal processor's, the sweeps' and each reactor's switches."""

    def __init__(self, settings: SignalSettings) -> None:
        self.settings = settings
        self._lock = threading.Lock()
        self._processor: bool | None = None
        self._sweeps: bool | None = None
        self._enabled: dict[str, bool] = {}
        self._dry_run: dict[str, bool] = {}
        self._organisations: dict[str, frozenset[str]] = {}

    def processor(self) -> Tiered[bool]:
        return Tiered(self.settings.processor.enabled, self._processor)

    def sweeps(self) -> Tiered[bool]:
        return Tiered(self.settings.sweeps_enabled, self._sweeps)

    def reactor(self, name: str) -> ReactorControl:
        config = self.settings.reactor(name)
        with self._lock:
            return ReactorControl(
                enabled=Tiered(config.enabled, self._enabled.get(name)),
                dry_run=Tiered(config.dry_run, self._dry_run.get(name)),
                organisations=Tiered(
                    frozenset(config.organisations), self._organisations.get(name)
                ),
            )

    def set_processor(self, enabled: bool | None) -> None:
        """Override the processor switch (None: back to the configuration)."""
        self._processor = enabled

    def set_sweeps(self, enabled: bool | None) -> None:
        """Override the sweeps switch (None: back to the configuration)."""
        self._sweeps = enabled

    def set_enabled(self, name: str, enabled: bool | None) -> None:
        with self._lock:
            _put(self._enabled, name, enabled)

    def set_dry_run(self, name: str, dry_run: bool | None) -> None:
        with self._lock:
            _put(self._dry_run, name, dry_run)

    def set_organisations(self, name: str, organisations: frozenset[str] | None) -> None:
        """An empty set pins the reactor to no organisation."""
        with self._lock:
            _put(self._organisations, name, organisations)


def _put(overrides: dict[str, T], name: str, value: T | None) -> None:
    if value is None:
        overrides.pop(name, None)
    else:
        overrides[name] = value
