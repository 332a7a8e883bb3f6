"""Which runtimes this machine can run, and who claims their queues: a runtime's worker
refuses to start without its interpreter (naming the package to install); ``serve`` runs an
executor for each one it finds; no other worker claims a runtime's queue or its task."""

from __future__ import annotations

import logging
from collections.abc import Collection, Iterator, Mapping
from typing import TypeVar

from tickwork.config import RUNTIME_NAMES, RuntimeSettings
from tickwork.definitions.records import HTTP_TASK, RUNTIME_QUEUES, RUNTIME_TASKS, SCRIPT_TASK
from tickwork.errors import ConfigError, RuntimeMissing
from tickwork.runtimes import sandbox
from tickwork.runtimes.script import interpreter

log = logging.getLogger("tickwork.runtimes")
V = TypeVar("V")


def check(name: str, settings: RuntimeSettings) -> str:
    """The runtime's queue; RuntimeMissing when this machine lacks its interpreter. A
    script runtime's containment is found here, at start-up (a warning naming what this
    machine does not contain; ConfigError when ``isolation`` asks for what it cannot)."""
    if name not in RUNTIME_QUEUES:
        raise ConfigError(f"runtime ({name!r}): choose from {', '.join(RUNTIME_NAMES)}")
    if name != "http":
        interpreter(name, settings.scripts)
        sandbox.containment(settings.scripts)
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


def runtime_of(queue: str) -> str | None:
    """The runtime whose queue ``queue`` is, or None for any other queue."""
    for name, own in RUNTIME_QUEUES.items():
        if own == queue:
            return name
    return None


def refuse_runtime_queues(queues: Collection[str]) -> None:
    """A worker that is no runtime's executor may not claim a runtime's queue: only the
    runtime's own executor checks its interpreter and runs at its concurrency. ConfigError,
    naming the queue and what to run instead."""
    for queue in queues:
        name = runtime_of(queue)
        if name is not None:
            setting = "http.concurrency" if name == "http" else "scripts.concurrency"
            raise ConfigError(
                f"worker.queues ({queue!r}) is the {name} runtime's queue, which only its own "
                f"executor claims (it checks the interpreter and runs "
                f"runtimes.{setting} at once): run `tickwork worker --runtime {name}` "
                f"(app.worker(runtime={name!r})) for it, and leave it out of --queues"
            )


def executors(runtimes: Collection[str], settings: RuntimeSettings) -> list[tuple[str, int]]:
    """The executors of ``serve`` for these runtimes: one per runtime, each on its runtime's
    queue alone at its runtime's concurrency (``runtimes.http.concurrency``,
    ``runtimes.scripts.concurrency`` per script runtime), as ``tickwork worker --runtime``
    runs it; so a slow endpoint or a busy language never takes another's slots. Each costs
    its own pools (docs/deployment.md, "How many connections")."""
    return [(name, concurrency(name, settings)) for name in RUNTIME_NAMES if name in runtimes]


class TaskSelection(Mapping[str, V]):
    """The tasks of a registry that one kind of executor runs, read live (a task registered
    after the executor was made is seen): a runtime's executor runs its runtime's task alone,
    any other worker every task but the runtimes'. The claim takes only the tasks a worker
    has, so neither ever claims the other's jobs, whatever its queues."""

    def __init__(self, tasks: Mapping[str, V], runtime: str | None) -> None:
        self._tasks = tasks
        self._only = None if runtime is None else (HTTP_TASK if runtime == "http" else SCRIPT_TASK)

    def _keeps(self, name: str) -> bool:
        return name == self._only if self._only is not None else name not in RUNTIME_TASKS

    def __getitem__(self, name: str) -> V:
        if not self._keeps(name):
            raise KeyError(name)
        return self._tasks[name]

    def __iter__(self) -> Iterator[str]:
        return (name for name in self._tasks if self._keeps(name))

    def __len__(self) -> int:
        return sum(1 for _ in self)
