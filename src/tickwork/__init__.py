"""tickwork: PostgreSQL-native background work for Python."""

import importlib.metadata

from tickwork.app import App
from tickwork.config import Settings, WorkerSettings, load_settings
from tickwork.errors import (
    ConfigError,
    DatabaseError,
    EnqueueError,
    JobCancelled,
    JobNotFoundError,
    JobStateError,
    MigrationError,
    TaskDefinitionError,
    TaskTimeout,
    TickworkError,
    UnknownTaskError,
    WaitTimeout,
)
from tickwork.queue.backoff import Backoff, ExponentialBackoff, FixedBackoff
from tickwork.queue.enqueue import JobSpec
from tickwork.task import Task
from tickwork.types import (
    AuditEvent,
    ErrorInfo,
    Execution,
    ExecutionState,
    Job,
    JobState,
    Progress,
)
from tickwork.worker.attempt import Outcome
from tickwork.worker.context import JobContext
from tickwork.worker.worker import RunOnceResult, Worker

try:
    __version__: str = importlib.metadata.version("tickwork")
    """The installed distribution's version: from the release's git tag (setuptools-scm)."""
except (
    importlib.metadata.PackageNotFoundError
):  # imported from a source tree that was never installed
    __version__ = "0.0.0+unknown"

__all__ = [
    "App",
    "AuditEvent",
    "Backoff",
    "ConfigError",
    "DatabaseError",
    "EnqueueError",
    "ErrorInfo",
    "Execution",
    "ExecutionState",
    "ExponentialBackoff",
    "FixedBackoff",
    "Job",
    "JobCancelled",
    "JobContext",
    "JobNotFoundError",
    "JobSpec",
    "JobState",
    "JobStateError",
    "MigrationError",
    "Outcome",
    "Progress",
    "RunOnceResult",
    "Settings",
    "Task",
    "TaskDefinitionError",
    "TaskTimeout",
    "TickworkError",
    "UnknownTaskError",
    "WaitTimeout",
    "Worker",
    "WorkerSettings",
    "__version__",
    "load_settings",
]
