"""The one exception tree of tickwork. Every error names the field and value at fault."""

from __future__ import annotations

import reprlib
from datetime import datetime
from typing import Any

_SHORT = reprlib.Repr()  # keyword arguments arrive in Python 3.12
_SHORT.maxlevel, _SHORT.maxdict, _SHORT.maxlist, _SHORT.maxtuple = 3, 4, 4, 4
_SHORT.maxstring = _SHORT.maxother = _SHORT.maxlong = 80


def shown(value: object) -> str:
    """``repr(value)`` for an error message: long or deep values are summarised (an error
    never echoes a huge input back), strings longer than shown say how long they are."""
    text = _SHORT.repr(value)
    if isinstance(value, str) and len(value) > _SHORT.maxstring:
        return f"{text} ({len(value):,} characters)"
    return text


class TickworkError(Exception):
    """Base class of every error tickwork raises."""


class ConfigError(TickworkError):
    """A setting is missing or invalid; raised once, at start-up."""


class DatabaseError(TickworkError):
    """The database could not be reached or refused an operation."""


class DatabaseUnavailable(DatabaseError):
    """The database could not be reached, or the connection was lost mid-operation."""


class EnqueueFailed(DatabaseUnavailable):
    """The database failed during an enqueue; ``stored`` says whether the job may exist."""

    def __init__(self, stored: bool | None, cause: str) -> None:
        self.stored = stored
        """False: nothing was stored, enqueue again. None: the commit may have happened, look
        for the job (by its ``unique_key``) before enqueueing it again."""
        if stored is None:
            super().__init__(
                f"the connection failed while the job was being committed; it may have been"
                f" stored (look it up, e.g. by its unique_key, before enqueueing it again): {cause}"
            )
        else:
            super().__init__(f"the job was not stored (enqueue it again): {cause}")


class DataRefused(DatabaseError, ValueError):
    """The database refused a value it was given (e.g. text holding a NUL character)."""


class MigrationError(DatabaseError):
    """A schema migration could not be applied."""


class EnqueueError(TickworkError, ValueError):
    """A job was refused at enqueue because its input is invalid."""

    def __init__(self, field: str, value: Any, reason: str) -> None:
        self.field = field
        self.value = value
        self.reason = reason
        super().__init__(f"{field} ({shown(value)}) {reason}")


class UnknownTaskError(EnqueueError):
    """The task name is not registered with the app."""

    SHOWN = 20
    """Known names an error lists (the rest are counted)."""

    def __init__(self, name: str, known: list[str], hint: str | None = None) -> None:
        names = sorted(set(known))
        listing = ", ".join(names[: self.SHOWN]) or "none registered"
        if len(names) > self.SHOWN:
            listing += f" and {len(names) - self.SHOWN} more"
        if hint:
            listing += f"; {hint}"
        super().__init__("task", name, f"is not a registered task (known: {listing})")


class TaskDefinitionError(TickworkError, ValueError):
    """A task was registered with invalid options."""


class ScheduleError(TickworkError, ValueError):
    """A schedule was defined with an invalid cron expression, time zone or option."""

    def __init__(self, field: str, value: object, reason: str) -> None:
        self.field = field
        self.value = value
        super().__init__(f"{field} ({shown(value)}) {reason}")


class JobNotFoundError(TickworkError, LookupError):
    """No job has the given id."""

    def __init__(
        self, job_id: int, *, deleted_by: str | None = None, deleted_at: datetime | None = None
    ) -> None:
        self.job_id = job_id
        self.deleted_by = deleted_by
        """Who deleted it, when its audit trail says an operator did."""
        self.deleted_at = deleted_at
        detail = f"job {job_id} does not exist"
        if deleted_by is not None and deleted_at is not None:
            detail += f": {deleted_by} deleted it at {deleted_at.isoformat()}"
        super().__init__(detail)


class JobStateError(TickworkError):
    """The operation is not allowed from the job's current state."""

    def __init__(self, job_id: int, state: str, operation: str, allowed: list[str]) -> None:
        self.job_id = job_id
        self.state = state
        self.operation = operation
        super().__init__(
            f"cannot {operation} job {job_id} in state {state}; allowed from: {', '.join(allowed)}"
        )


class WaitTimeout(TickworkError, TimeoutError):
    """``app.wait`` gave up: the job did not finish within the timeout."""

    def __init__(self, job_id: int, state: str, timeout: float) -> None:
        self.job_id = job_id
        self.state = state
        self.timeout = timeout
        super().__init__(f"job {job_id} did not finish within {timeout}s (it is {state})")


class TaskTimeout(TickworkError):
    """An attempt ran longer than its timeout; the attempt counts as failed."""


class JobCancelled(TickworkError):
    """Raised inside a handler (or recorded) when its job's cancel was requested."""


class AuthError(TickworkError):
    """Authentication failed: bad credentials, or a missing, invalid or revoked token."""


class LoginThrottled(AuthError):
    """Too many failed logins for this account or client address; try again later."""

    def __init__(self, retry_after: float) -> None:
        self.retry_after = retry_after
        super().__init__(f"too many failed logins; retry after {retry_after:.0f} s")


class Throttled(TickworkError):
    """Too many calls of a rate-limited route (a definition's webhook); try again later."""

    def __init__(self, what: str, retry_after: float) -> None:
        self.retry_after = retry_after
        super().__init__(f"too many calls of {what}; retry after {max(1, round(retry_after))} s")


class PermissionDenied(TickworkError):
    """The caller's role is below the role the operation requires."""

    def __init__(self, needed: str, held: str, message: str | None = None) -> None:
        self.needed = needed
        self.held = held
        super().__init__(message or f"this operation needs role {needed}; the caller has {held}")


class NotFoundError(TickworkError, LookupError):
    """A named object (user, schedule, token, invite) does not exist."""

    def __init__(self, kind: str, key: object) -> None:
        self.kind = kind
        self.key = key
        super().__init__(f"{kind} {shown(key)} does not exist")


class ConflictError(TickworkError):
    """The request conflicts with what is stored (a duplicate email, a used invite)."""


class RerunRefused(ConflictError):
    """A retry of a definition's run whose definition was deleted (or that names none): what
    it would run is code an ADMIN removed, so it is not run again."""

    def __init__(self, job_id: int, definition_id: int | None) -> None:
        self.job_id = job_id
        self.definition_id = definition_id
        which = (
            f"definition {definition_id}, which was deleted"
            if definition_id is not None
            else "a definition its arguments do not name"
        )
        super().__init__(
            f"cannot retry job {job_id}: it runs {which}; a retry runs a definition only as"
            " it is now, so a removed one's code is not run again (store it again to run it)"
        )


class InvalidInput(TickworkError, ValueError):
    """A request field is invalid; names the field and the value."""

    def __init__(self, field: str, value: object, reason: str) -> None:
        self.field = field
        self.value = value
        self.reason = reason
        super().__init__(f"{field} ({shown(value)}) {reason}")


class InvalidField(InvalidInput):
    """A request field is invalid; names the field, never its value (it may be a secret)."""

    def __init__(self, field: str, reason: str) -> None:
        TickworkError.__init__(self, f"{field}: {reason}")
        self.field = field
        self.value = None
        self.reason = reason


class IncorrectPassword(InvalidInput):
    """The current password given to change a password is wrong (the caller is logged in:
    this is bad input, not a failed authentication)."""

    def __init__(self, field: str = "current_password") -> None:
        self.field = field
        self.value = None
        self.reason = "is incorrect"
        TickworkError.__init__(self, f"{field} is incorrect")


class ReactorDefinitionError(TickworkError, ValueError):
    """A reactor was registered with an invalid name, signal type or sweep."""


class SignalError(TickworkError, ValueError):
    """A signal was refused at emit because its input is invalid."""

    def __init__(self, field: str, value: object, reason: str) -> None:
        self.field = field
        self.value = value
        self.reason = reason
        super().__init__(f"{field} ({shown(value)}) {reason}")


class NotLeaderError(TickworkError):
    """This process does not hold the lease the operation needs; ask the holder."""

    def __init__(self, role: str, holder: str | None) -> None:
        self.role = role
        self.holder = holder
        where = f"held by {holder}" if holder else "held by no process right now"
        super().__init__(f"this process does not hold the {role} lease ({where})")


class NoLeaseHolderError(TickworkError):
    """No process holds the leases a switch applies to: nobody runs what it would change."""

    def __init__(self, roles: list[str]) -> None:
        self.roles = roles
        super().__init__(
            f"no process holds {' or '.join(roles)} right now: nothing runs what this switch"
            " changes (GET /api/admin/signals/leaders); set it again once one does"
        )


class SignalSupersededError(ConflictError):
    """A DEAD signal was not retried: a fresher PENDING signal holds its (type, key)."""

    def __init__(self, signal_id: int, superseded_by: int) -> None:
        self.signal_id = signal_id
        self.superseded_by = superseded_by
        super().__init__(
            f"signal {signal_id} was not retried: pending signal {superseded_by} already holds"
            " the same type and aggregate key (the work is queued)"
        )


class RunFailed(TickworkError):
    """A definition's run (an HTTP call or a script) failed; the attempt fails and retries
    by the definition's policy. The message names what happened, with secrets masked."""


class AddressRefused(RunFailed):
    """The SSRF guard refused an HTTP definition's target (its address is named)."""

    def __init__(self, url: str, address: str, reason: str) -> None:
        self.url = url
        self.address = address
        super().__init__(f"refused to connect to {address} (for {url}): {reason}")


class RuntimeMissing(ConfigError):
    """A runtime's interpreter is not installed on this machine."""

    def __init__(self, runtime: str, command: str, package: str) -> None:
        self.runtime = runtime
        super().__init__(
            f"runtime {runtime!r} needs {command!r}, which is not installed here "
            f"(install {package}, or set runtimes.scripts.{runtime} to its path)"
        )
