"""Which runtimes this machine can run: a runtime's worker refuses to start without its
interpreter (naming the package to install); ``serve`` runs the ones it finds."""

from __future__ import annotations

import logging
from collections.abc import Collection
from dataclasses import dataclass

from tickwork.config import RUNTIME_NAMES, RuntimeSettings
from tickwork.definitions.records import RUNTIME_QUEUES
from tickwork.errors import ConfigError, RuntimeMissing
from tickwork.runtimes.script import interpreter

log = logging.getLogger("tickwork.runtimes")


def check(name: str, settings: RuntimeSettings) -> str:
    """The runtime's queue; RuntimeMissing when this machine lacks its interpreter."""
    if name not in RUNTIME_QUEUES:
        raise ConfigError(f"runtime ({name!r}): choose from {', '.join(RUNTIME_NAMES)}")
    if name != "http":
        interpreter(name, settings.scripts)
    return RUNTIME_QUEUES[name]


def concurrency(name: str, settings: RuntimeSettings) -> int:
    """How many runs of the runtime one process runs at once."""
    return settings.http.concurrency if name == "http" else settings.scripts.concurrency


def for_serve(settings: RuntimeSettings) -> list[str]:
    """The runtimes ``serve`` runs: those named in the settings (each must be installed),
    else every one this machine has (the others are logged, with what to install)."""
    if settings.serve is not None:
        for name in settings.serve:
            check(name, settings)
        return list(settings.serve)
    found = []
    for name in RUNTIME_NAMES:
        try:
            check(name, settings)
        except RuntimeMissing as exc:
            log.info("runtime not available", extra={"runtime": name, "reason": str(exc)})
            continue
        found.append(name)
    return found


@dataclass(frozen=True, slots=True)
class ExecutorPlan:
    """An executor ``serve`` adds for definitions: the queues it claims from, how many runs
    at once."""

    queues: list[str]
    concurrency: int


def executors(
    runtimes: Collection[str], settings: RuntimeSettings
) -> list[tuple[str, ExecutorPlan]]:
    """The executors of ``serve`` for these runtimes: one for HTTP calls and one for every
    script language together (at most ``runtimes.scripts.concurrency`` scripts at once in
    the process), so a slow endpoint never holds up scripts; two executors, not one per
    runtime, keep a serve's database connections few. ``tickwork worker --runtime`` gives a
    runtime a process of its own."""
    plans: list[tuple[str, ExecutorPlan]] = []
    if "http" in runtimes:
        plans.append(("http", ExecutorPlan([RUNTIME_QUEUES["http"]], settings.http.concurrency)))
    scripts = [RUNTIME_QUEUES[n] for n in RUNTIME_NAMES if n != "http" and n in runtimes]
    if scripts:
        plans.append(("scripts", ExecutorPlan(scripts, settings.scripts.concurrency)))
    return plans
