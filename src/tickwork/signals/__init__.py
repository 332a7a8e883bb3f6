"""Signals and sweeps: "something changed, react to it" and "nothing told us, check anyway".

Emit with ``app.signals.emit(...)`` (in your transaction); register reactors with
``app.add_reactor(...)``; ``tickwork serve`` runs the processor and the sweeps (on the
holders of the SIGNAL_MASTER and SWEEP_MASTER leases). See docs/signals.md.
"""

from tickwork.signals.publisher import Emitted, Signals
from tickwork.signals.reactor import Reactor
from tickwork.signals.records import (
    Delivery,
    DeliveryStatus,
    ReactorContext,
    Signal,
    SignalStatus,
)

__all__ = [
    "Delivery",
    "DeliveryStatus",
    "Emitted",
    "Reactor",
    "ReactorContext",
    "Signal",
    "SignalStatus",
    "Signals",
]
