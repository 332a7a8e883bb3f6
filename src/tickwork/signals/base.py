"""What the signal processor and the sweep scheduler share."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from psycopg_pool import AsyncConnectionPool

from tickwork.config import SignalSettings
from tickwork.db.store import Store
from tickwork.services.leases import LeaseManager
from tickwork.signals.control import RuntimeControl
from tickwork.signals.reactor import Reactors


@dataclass
class SignalService:
    """Base of the lease-gated signal services: their pool, store, settings, the
    registered reactors, runtime control and the process's lease manager."""

    pool: AsyncConnectionPool[Any]
    store: Store
    settings: SignalSettings
    reactors: Reactors
    control: RuntimeControl
    leases: LeaseManager
