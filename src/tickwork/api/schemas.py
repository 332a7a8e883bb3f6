"""The API's request and response bodies (they are the OpenAPI document's schemas)."""

from __future__ import annotations

import enum
import functools
import json
import typing
from datetime import datetime
from typing import Annotated, Any, Literal
from uuid import UUID

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    Strict,
    ValidationInfo,
    WithJsonSchema,
    field_validator,
)
from pydantic_core import PydanticCustomError

from tickwork.auth.tokens import MAX_API_TOKEN_TTL
from tickwork.config import MAX_MAX_ATTEMPTS, MAX_PRIORITY, MIN_PRIORITY, QUEUE_NAME
from tickwork.jsonschema import null_only
from tickwork.limits import MAX_JSON_DEPTH, too_deep, unstorable
from tickwork.masking import MIN_SECRET
from tickwork.queue.enqueue import MAX_UNIQUE_KEY_LENGTH
from tickwork.types import AuditEvent, ErrorInfo, Execution, Progress


def _by_name(value: Any) -> Any:
    return value.name if isinstance(value, enum.Enum) else value


def _not_a_number(value: Any) -> Any:
    if isinstance(value, bool | int | float) or (
        isinstance(value, str) and value.strip().lstrip("-").replace(".", "", 1).isdigit()
    ):
        raise PydanticCustomError(
            "datetime_text",
            "must be an ISO 8601 date-time with a time zone, like 2026-12-04T10:00:00Z"
            " (a number is ambiguous: seconds or milliseconds?)",
        )
    return value


Instant = Annotated[datetime, Strict(False), BeforeValidator(_not_a_number)]
"""A date-time given as ISO 8601 text (the one type a request body gives as text and the
model reads as another); numbers are refused."""

RoleName = Annotated[Literal["VIEWER", "OPERATOR", "ADMIN"], BeforeValidator(_by_name)]
"""A role by name (the stored form; the code's Role enum converts)."""
JobStateName = Literal["PENDING", "RUNNING", "SUCCEEDED", "FAILED", "CANCELLED", "DEAD_LETTER"]
JobStateQuery = Annotated[
    str, WithJsonSchema({"type": "string", "enum": list(typing.get_args(JobStateName))})
]
"""A job state in a query, as the document gives it (the route takes any case and
comma-separated lists too, and refuses an unknown state itself, naming it)."""

QUEUE_PATTERN = QUEUE_NAME.pattern.removesuffix(r"\Z") + "$"
"""A queue's name as a JSON Schema pattern (``\\Z`` is Python's alone)."""
QueueName = Annotated[str, Field(pattern=QUEUE_PATTERN)]
"""1-128 characters of letters, digits, ``_.:-``."""
Priority = Annotated[int, Field(ge=MIN_PRIORITY, le=MAX_PRIORITY)]
"""Higher is claimed first (the config's MIN_PRIORITY..MAX_PRIORITY)."""
MaxAttempts = Annotated[int, Field(ge=1, le=MAX_MAX_ATTEMPTS)]
"""Attempts before the job is dead-lettered."""


class Model(BaseModel):
    """Responses are built from tickwork's dataclasses; requests refuse unknown fields."""

    model_config = ConfigDict(from_attributes=True)


class Request(BaseModel):
    """A request body: unknown fields, a value of another JSON type than the field's (no
    ``"yes"`` for true, no ``"5"`` for 5) and text PostgreSQL cannot store are refused (400,
    naming the field)."""

    model_config = ConfigDict(extra="forbid", strict=True)

    @field_validator("*", mode="before")
    @classmethod
    def _shallow(cls, value: Any, info: ValidationInfo) -> Any:
        # Before pydantic or the check below walk it: a value too deep is refused unread. A
        # field that takes no containers is left to pydantic, which refuses one at once
        # (walking a megabyte of lists sent as a password would cost the event loop).
        if (
            isinstance(value, dict | list)
            and _takes_containers(cls, info.field_name)
            and too_deep(value)
        ):
            raise PydanticCustomError(
                "too_deep", f"is nested deeper than {MAX_JSON_DEPTH} levels (the limit)"
            )
        return value

    @field_validator("*", mode="after")
    @classmethod
    def _storable(cls, value: Any, info: ValidationInfo) -> Any:
        if isinstance(value, dict | list) and _plainly_storable(value):
            return value  # the common case, decided at C speed without a walk
        field = info.field_name or "body"
        found = unstorable(value, field)
        if found is not None:  # names the place, not the value: it may be a password
            where, reason = found
            message = reason if where == field else f"{where} {reason}"
            raise PydanticCustomError("unstorable", message)
        return value


@functools.cache
def _container_fields(model: type[BaseModel]) -> frozenset[str]:
    """The fields of ``model`` whose type admits a mapping or a list."""

    def admits(annotation: Any) -> bool:
        if annotation is Any:
            return True
        origin = typing.get_origin(annotation)
        if origin in (dict, list, tuple) or annotation in (dict, list, tuple):
            return True
        return any(admits(arg) for arg in typing.get_args(annotation))

    return frozenset(n for n, f in model.model_fields.items() if admits(f.annotation))


def _takes_containers(model: type[BaseModel], field: str | None) -> bool:
    return field is None or field in _container_fields(model)


def _plainly_storable(value: dict[str, Any] | list[Any]) -> bool:
    """True when no text in ``value`` holds a NUL or a lone surrogate (from its JSON text:
    NUL is escaped there, a lone surrogate is kept and cannot be encoded). False means
    look closer, naming the place."""
    try:
        text = json.dumps(value, ensure_ascii=False)
        text.encode("utf-8")
    except (TypeError, ValueError, RecursionError):
        return False
    return "\\u0000" not in text


class Problem(Model):
    """An error, as RFC 9457 problem details."""

    type: str = "about:blank"
    title: str
    status: int
    detail: str
    field: str | None = None
    """The request field at fault, when one is."""


class NotLeaderProblem(Problem):
    """A 409 of a signal operation that only the lease holder can carry out."""

    lease: str = Field(description="the lease the operation needs")
    holder: str | None = Field(description="the process that holds it now (None: no process does)")


class NoHolderProblem(Problem):
    """A 503 of a signal switch: no process holds the lease it applies to (a 503 of an
    unreachable database has neither member)."""

    leases: list[str] | None = Field(None, description="the leases the switch needs")
    holder: None = None


class SupersededProblem(Problem):
    """A 409 of a signal retry: a fresher PENDING signal holds the same type and key."""

    supersededByPendingId: int


class NotStoredProblem(Problem):
    """A 503 of an enqueue: the database was out of reach, and whether the job was stored."""

    stored: Literal["no", "unknown"] | None = Field(
        None,
        description="no: nothing was stored; unknown: the commit's answer was lost (look the"
        " job up by its unique_key before enqueueing again); absent when the request failed"
        " before the enqueue began",
    )


class JobOut(Model):
    id: int
    queue: str
    task: str
    args: dict[str, Any]
    state: JobStateName
    priority: int
    attempts: int
    max_attempts: int
    run_at: datetime
    timeout: float | None
    created_at: datetime
    created_by: str
    unique_key: str | None
    result: Any = None
    cancel_requested_at: datetime | None
    finished_at: datetime | None
    error: ErrorInfo | None
    schedule_id: int | None
    fire_time: datetime | None
    duplicate: bool
    omitted: list[Literal["args", "result"]] = Field(
        default_factory=list,
        description="fields left out (args {}, result null): too large for a listing (the"
        " job's own page has them) or nested too deep to be served; or stored values no"
        ' reader can decode, shown as {"undecodable": "<why>"}',
    )
    progress: Progress | None = Field(
        default=None, description="what the handler last reported with ctx.progress"
    )


class JobDetailOut(JobOut):
    executions: list[Execution]


class TotalOut(Model):
    count: int = Field(description="jobs that match; exact unless capped")
    capped: bool = Field(description="true: more than count match (shown as 10,000+)")


class JobPage(Model):
    items: list[JobOut]
    next_cursor: int | None = Field(description="before_id of the next page; null on the last")
    total: TotalOut | None = Field(None, description="with count=true only")


class EnqueueIn(Request):
    """A job to enqueue; the fields left out or null take the task's own options."""

    task: str = Field(min_length=1)
    args: dict[str, Any] = Field(default_factory=dict)
    queue: QueueName | None = None
    priority: Priority | None = None
    max_attempts: MaxAttempts | None = None
    run_at: Instant | None = None
    timeout: float | None = Field(None, gt=0, description="seconds")
    unique_key: str | None = Field(None, min_length=1, max_length=MAX_UNIQUE_KEY_LENGTH)


class JobFilterIn(Request):
    """Selects jobs for a bulk operation (the same filters as the listing)."""

    state: list[JobStateName] | None = None
    queue: QueueName | None = None
    task: str | None = None
    schedule: str | None = None
    created_from: Instant | None = None
    created_to: Instant | None = None
    finished_from: Instant | None = None
    finished_to: Instant | None = None
    all: bool = Field(
        False,
        description="true: act on every job the other fields select, even with none given"
        " (an empty filter is refused otherwise, 400)",
    )


class BulkOut(Model):
    matched: int
    changed: list[int]
    refused: list[int] = Field(
        description="runs of deleted definitions a retry left as they are: a retry runs a"
        " definition only as it is now"
    )


class ScheduleOut(Model):
    name: str
    task: str
    args: dict[str, Any]
    cron: str
    timezone: str
    queue: str | None
    priority: int | None
    misfire: Literal["ONCE", "ALL", "SKIP"]
    misfire_limit: int
    overlap: Literal["ALLOW", "SKIP"]
    enabled: bool
    paused: bool
    next_run_at: datetime
    last_fire_at: datetime | None
    origin: str
    omitted: list[Literal["args"]] = Field(
        default_factory=list, description="fields left out (args {}): nested too deep to serve"
    )


class ScheduleIn(Request):
    name: str = Field(min_length=1, max_length=200)
    task: str = Field(min_length=1)
    cron: str = Field(min_length=1)
    timezone: str = "UTC"
    args: dict[str, Any] = Field(default_factory=dict)
    queue: QueueName | None = None
    priority: Priority | None = None
    misfire: Literal["ONCE", "ALL", "SKIP"] = "ONCE"
    misfire_limit: int = Field(100, ge=1, le=10_000)
    overlap: Literal["ALLOW", "SKIP"] = "ALLOW"
    enabled: bool = True


class ScheduleEditIn(Request):
    """Fields to change; the rest stay as they are. Only ``queue`` and ``priority`` may be
    set to null (the task's own); null for any other field is refused."""

    model_config = ConfigDict(json_schema_extra=null_only({"queue", "priority"}))

    @field_validator(
        "task",
        "cron",
        "timezone",
        "args",
        "misfire",
        "misfire_limit",
        "overlap",
        "enabled",
        mode="before",
    )
    @classmethod
    def _not_null(cls, value: Any) -> Any:
        if value is None:
            raise PydanticCustomError("not_null", "may not be null (leave it out to keep it)")
        return value

    task: str | None = Field(None, min_length=1)
    cron: str | None = Field(None, min_length=1)
    timezone: str | None = None
    args: dict[str, Any] | None = None
    queue: QueueName | None = None
    priority: Priority | None = None
    misfire: Literal["ONCE", "ALL", "SKIP"] | None = None
    misfire_limit: int | None = Field(None, ge=1, le=10_000)
    overlap: Literal["ALLOW", "SKIP"] | None = None
    enabled: bool | None = None


class AuditPage(Model):
    items: list[AuditEvent]
    next_cursor: int | None


class LoginIn(Request):
    email: str = Field(min_length=1, max_length=320)
    password: str = Field(min_length=1, max_length=1024)
    cookie: bool = Field(
        False,
        description="true: the refresh token is set as an HttpOnly cookie and left out of the"
        " body (what the dashboard does)",
    )


class RefreshIn(Request):
    refresh_token: str | None = Field(
        None, description="omit to use the refresh cookie (the Origin header is then checked)"
    )


class UserOut(Model):
    id: int
    email: str
    name: str
    role: RoleName
    disabled: bool
    created_at: datetime
    last_login_at: datetime | None


class TokenOut(Model):
    access_token: str
    token_type: Literal["bearer"] = "bearer"
    expires_in: int
    refresh_token: str | None = Field(None, description="null when it was set as a cookie")
    user: UserOut


class PasswordIn(Request):
    current_password: str = Field(min_length=1, max_length=1024)
    new_password: str = Field(min_length=1, max_length=1024)


class UserEditIn(Request):
    role: RoleName | None = None
    disabled: bool | None = None


class InviteIn(Request):
    email: str = Field(min_length=3, max_length=320)
    role: RoleName


class InviteOut(Model):
    id: int
    email: str
    role: RoleName
    created_by: str
    created_at: datetime
    expires_at: datetime
    accepted_at: datetime | None
    revoked_at: datetime | None


class InviteCreatedOut(Model):
    invite: InviteOut
    token: str = Field(description="shown once; the invitee accepts with it")


class AcceptIn(Request):
    token: str = Field(min_length=1, max_length=200)
    name: str = Field("", max_length=200)
    password: str = Field(min_length=1, max_length=1024)


class ApiTokenIn(Request):
    name: str = Field(min_length=1, max_length=200)
    role: RoleName | None = Field(None, description="defaults to the owner's role; never above it")
    expires_in: float | None = Field(
        None, gt=0, le=MAX_API_TOKEN_TTL, description="seconds; none: no expiry"
    )


class ApiTokenOut(Model):
    id: int
    name: str
    role: RoleName
    created_at: datetime
    expires_at: datetime | None
    last_used_at: datetime | None
    revoked_at: datetime | None


class ApiTokenCreatedOut(Model):
    api_token: ApiTokenOut
    token: str = Field(description="shown once")


class SettingIn(Request):
    value: Any


class VariableIn(Request):
    value: str = Field(
        max_length=100_000,
        description=f"a secret one at least {MIN_SECRET} characters (400 otherwise)",
    )
    secret: bool = Field(
        default=False,
        description="never returned again; masked by value in every output of a run",
    )


class HealthOut(Model):
    status: Literal["ok"]


class RouteRoleOut(Model):
    method: str
    path: str = Field(description="as the OpenAPI document writes it, placeholders included")
    role: Literal["VIEWER", "OPERATOR", "ADMIN"] | None = Field(description="null: public")


class ReadyOut(Model):
    status: Literal["ready"]
    schema_version: int


class DefinitionOut(Model):
    id: int
    name: str
    description: str
    kind: Literal["http", "script"]
    spec: dict[str, Any] = Field(description="the kind's fields (HttpSpec or ScriptSpec)")
    queue: str = Field(description="the runtime's queue its runs go to")
    cron: str | None
    timezone: str
    exec_timeout: float
    retry: dict[str, Any]
    loop: dict[str, Any] | None
    enabled: bool
    webhook: bool = Field(description="it has a webhook: POST /api/webhooks/{id}/{token}")
    runs: int = Field(description="attempts of its runs that ended")
    failures: int = Field(description="of those, the failed")
    last_run_at: datetime | None = Field(description="when the last attempt ended")
    last_outcome: Literal["succeeded", "failed"] | None
    version: int = Field(description="1 at creation, one more at every edit")
    created_by: str
    created_at: datetime
    updated_by: str
    updated_at: datetime


class DefinitionPage(Model):
    items: list[DefinitionOut]
    next_cursor: int | None = Field(description="after of the next page; null on the last")


class ActivityBucket(Model):
    at: datetime = Field(description="the bucket's start")
    runs: int = Field(description="attempts that ended in it")
    succeeded: int
    failed: int
    mean_duration: float = Field(description="seconds")
    max_duration: float = Field(description="seconds")


class ActivityOut(Model):
    definition_id: int
    start: datetime = Field(description="from (inclusive)")
    end: datetime = Field(description="to (exclusive)")
    bucket: Literal["minute", "hour", "day"]
    buckets: list[ActivityBucket] = Field(description="only buckets with runs, oldest first")
    runs: int
    succeeded: int
    failed: int
    mean_duration: float


class ThroughputBucket(Model):
    at: datetime = Field(description="the bucket's start")
    queue: str
    succeeded: int = Field(description="jobs that succeeded in it")
    failed: int = Field(description="attempts that failed with a retry due")
    dead_letter: int = Field(description="jobs dead-lettered")
    cancelled: int = Field(description="jobs cancelled")


class ThroughputOut(Model):
    start: datetime = Field(description="from (inclusive)")
    end: datetime = Field(description="to (exclusive)")
    bucket: Literal["minute", "hour", "day"]
    queue: str | None = Field(description="the queue asked for; null: every queue")
    buckets: list[ThroughputBucket] = Field(
        description="one per queue and bucket with finished work, oldest first"
    )
    succeeded: int
    failed: int
    dead_letter: int
    cancelled: int


class SampleOut(Model):
    id: int
    worker_id: UUID = Field(description="the process's worker (GET /api/workers)")
    host: str
    pid: int
    roles: str = Field(description="what the process runs: roles, queues, runtimes")
    sampled_at: datetime
    cpu_percent: float = Field(description="of one core, since the process's previous sample")
    rss_bytes: int = Field(description="the process's resident memory")
    children_rss_bytes: int = Field(description="its children's (script processes)")


class SamplePage(Model):
    items: list[SampleOut]
    next_before_id: int | None = Field(description="before_id of the next page; null on the last")


class WebhookOut(Model):
    path: str = Field(description="POST here to run the definition; shown this once")
    token: str = Field(description="the token in the path; only its hash is stored")


class RunOut(Model):
    job_id: int = Field(description="the run's job: GET /api/jobs/{job_id}")
