"""What a definition is: its fields and their rules, the runtimes' queues, the snapshot a
run carries, and the stored row as served."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
    model_validator,
)

from tickwork.config import EXEC_TIMEOUT_MARGIN, MAX_EXEC_TIMEOUT
from tickwork.db.loaders import Undecodable
from tickwork.errors import InvalidField
from tickwork.jsonschema import null_only
from tickwork.limits import unstorable
from tickwork.queue.backoff import ExponentialBackoff
from tickwork.queue.rows import json_kind

HTTP_TASK = "tickwork.http"
SCRIPT_TASK = "tickwork.script"
RUNTIME_TASKS = frozenset({HTTP_TASK, SCRIPT_TASK})


def refuse_runtime_task(task: str) -> None:
    """A run of a definition is made from the stored definition only (run now, a schedule,
    a webhook, the loop rule): enqueueing its task by name with arguments of one's own would
    let anyone who may enqueue jobs run code that only an ADMIN may define."""
    if task in RUNTIME_TASKS:
        raise InvalidField(
            "task",
            f"{task} runs definitions: run one with POST /api/definitions/{{id}}/run "
            "(tickwork definitions run NAME)",
        )


HTTP_QUEUE = "http"
LANGUAGES = ("bash", "python", "node", "typescript", "groovy")
SCRIPT_QUEUES: dict[str, str] = {
    "bash": "scripts-bash",
    "python": "scripts-python",
    "node": "scripts-node",
    "typescript": "scripts-node",  # transpiled, then run on node
    "groovy": "scripts-groovy",
}
RUNTIME_QUEUES: dict[str, str] = {
    "http": HTTP_QUEUE,
    "bash": "scripts-bash",
    "python": "scripts-python",
    "node": "scripts-node",
    "groovy": "scripts-groovy",
}
"""Each runtime and the one queue it subscribes to: ``tickwork worker --runtime <name>``.
The queues are disjoint: a script can only ever run on the runtime of its language."""
JOB_TIMEOUT = MAX_EXEC_TIMEOUT + EXEC_TIMEOUT_MARGIN
"""Every definition's job timeout: a safety net above any ``exec_timeout``."""

MAX_NAME = 200
MAX_DESCRIPTION = 2000
MAX_URL = 8192
MAX_HEADERS = 100
MAX_HEADER_VALUE = 8192
MAX_BODY = 1024 * 1024
MAX_SOURCE = 256 * 1024
MAX_SCRIPT_VARIABLES = 100
HEADER_NAME = re.compile(r"^[!#$%&'*+.^_`|~0-9A-Za-z-]{1,256}\Z")
CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029]")
"""Control characters (C0, DEL, C1) and the Unicode line and paragraph separators."""
ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*\Z")
REFERENCE = re.compile(r"\{\{\s*vars\.([A-Za-z_][A-Za-z0-9_.-]{0,127})\s*\}\}")
"""A global variable's place in an HTTP definition's URL, header values and body."""
RESERVED_ENV = frozenset(
    {"PATH", "HOME", "LANG", "TMPDIR", "JAVA_HOME", "JAVA_OPTS", "PWD", "TICKWORK_TRIGGER"}
)
"""Environment names a script's variables may not take (the runtime sets them)."""
METHODS = Literal["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"]


class _Input(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)


class HttpSpec(_Input):
    """An HTTP call. ``{{ vars.NAME }}`` in the URL, header values and body is replaced by
    the global variable's value when the run starts."""

    method: METHODS = "GET"
    url: str = Field(min_length=1, max_length=MAX_URL)
    headers: dict[str, str] = Field(default_factory=dict, max_length=MAX_HEADERS)
    body: str | None = Field(None, max_length=MAX_BODY)
    expect_status: list[Annotated[int, Field(ge=100, le=599)]] | None = Field(
        None, min_length=1, max_length=100
    )
    """Statuses that count as success; None: any 2xx. Another status fails the attempt."""
    follow_redirects: bool = False
    """Follow 3xx answers (each hop checked by the SSRF guard again); else a 3xx is the
    answer (a failure unless it is expected)."""

    @field_validator("url")
    @classmethod
    def _url(cls, url: str) -> str:
        bare = REFERENCE.sub("x", url)  # the values are checked when the run starts
        if CONTROL.search(bare) or " " in bare:
            raise ValueError("may not hold spaces or control characters")
        if not REFERENCE.match(url):  # a URL from a variable is checked when it runs
            scheme = url.split(":", 1)[0].lower()
            if scheme not in ("http", "https") or "://" not in url:
                raise ValueError("must be an http:// or https:// URL")
        return url

    @field_validator("headers")
    @classmethod
    def _headers(cls, headers: dict[str, str]) -> dict[str, str]:
        for name, value in headers.items():
            if not HEADER_NAME.match(name):  # never echoed: a pasted credential may be one
                raise ValueError("a header name is not a valid token (letters, digits, -_.)")
            bare = REFERENCE.sub("x", value)  # a variable's value is checked when it runs
            if (
                CONTROL.search(bare.replace("\t", ""))
                or not bare.isascii()
                or len(value) > MAX_HEADER_VALUE
            ):
                raise ValueError(
                    "a header value may hold only ASCII text without control characters, "
                    f"at most {MAX_HEADER_VALUE} characters"
                )
        return headers


class ScriptSpec(_Input):
    """A script and the global variables it is given as environment variables (each under
    its name, ``.`` and ``-`` as ``_``)."""

    language: Literal["bash", "python", "node", "typescript", "groovy"]
    source: str = Field(min_length=1, max_length=MAX_SOURCE)
    variables: list[str] = Field(default_factory=list, max_length=MAX_SCRIPT_VARIABLES)

    @field_validator("source")
    @classmethod
    def _source(cls, source: str) -> str:
        if "\x00" in source:
            raise ValueError("may not hold a NUL character")
        return source

    @field_validator("variables")
    @classmethod
    def _variables(cls, names: list[str]) -> list[str]:
        for name in names:
            env = env_name(name)
            if not ENV_NAME.match(env) or env in RESERVED_ENV:
                raise ValueError(f"variable {name[:64]!r} cannot be given as ${env[:64]}")
        return names


def env_name(variable: str) -> str:
    """The environment name a script sees a variable under."""
    return variable.replace(".", "_").replace("-", "_")


class RetryPolicy(_Input):
    """Attempts of one run, and the exponential wait between them."""

    max_attempts: int = Field(3, ge=1, le=100)
    backoff_base: float = Field(10.0, ge=0, le=86400, allow_inf_nan=False)
    backoff_factor: float = Field(2.0, ge=1, le=10, allow_inf_nan=False)
    backoff_max: float = Field(3600.0, ge=0, le=86400, allow_inf_nan=False)

    def backoff(self) -> ExponentialBackoff:
        return ExponentialBackoff(
            base=self.backoff_base, factor=self.backoff_factor, max_delay=self.backoff_max
        )


class LoopRule(_Input):
    """After a successful run, run again ``every`` seconds later, up to ``times`` more runs;
    a failed run (out of attempts) ends the loop."""

    every: float = Field(gt=0, le=86400, allow_inf_nan=False)
    times: int = Field(ge=1, le=10_000)


def check_name(name: str) -> str:
    """A definition's name: one line, no space at either end."""
    if CONTROL.search(name):
        raise ValueError("may not hold control characters")
    if name != name.strip():
        raise ValueError("may not start or end with a space")
    return name


class DefinitionIn(_Input):
    """A new definition. ``http`` or ``script`` holds what ``kind`` names."""

    name: str = Field(min_length=1, max_length=MAX_NAME)
    description: str = Field("", max_length=MAX_DESCRIPTION)
    kind: Literal["http", "script"]
    http: HttpSpec | None = None
    script: ScriptSpec | None = None
    cron: str | None = Field(None, min_length=1, max_length=200)
    timezone: str = Field("UTC", min_length=1, max_length=100)
    exec_timeout: float = Field(60.0, gt=0, le=MAX_EXEC_TIMEOUT, allow_inf_nan=False)
    """Seconds one HTTP call or one script process may take (at most 30 minutes)."""
    retry: RetryPolicy = Field(default_factory=RetryPolicy)
    loop: LoopRule | None = None
    enabled: bool = True

    @field_validator("name")
    @classmethod
    def _name(cls, name: str) -> str:
        return check_name(name)

    @model_validator(mode="after")
    def _kind(self) -> DefinitionIn:
        own, other = ("http", "script") if self.kind == "http" else ("script", "http")
        if getattr(self, own) is None:
            raise ValueError(f"a {self.kind} definition needs its {own!r} fields")
        if getattr(self, other) is not None:
            raise ValueError(f"a {self.kind} definition has no {other!r} fields")
        return self

    @property
    def spec(self) -> HttpSpec | ScriptSpec:
        spec = self.http if self.kind == "http" else self.script
        assert spec is not None  # checked by _kind
        return spec


NULLABLE_EDITS = frozenset({"cron", "loop"})
"""The fields of an edit that may be set to null (removed)."""


class DefinitionEditIn(_Input):
    """Fields to change; the rest stay. ``cron`` and ``loop`` may be set to null (removed);
    null for another field is refused."""

    model_config = ConfigDict(json_schema_extra=null_only(NULLABLE_EDITS))

    name: str | None = Field(None, min_length=1, max_length=MAX_NAME)
    description: str | None = Field(None, max_length=MAX_DESCRIPTION)
    http: HttpSpec | None = None
    script: ScriptSpec | None = None
    cron: str | None = Field(None, min_length=1, max_length=200)
    timezone: str | None = Field(None, min_length=1, max_length=100)
    exec_timeout: float | None = Field(None, gt=0, le=MAX_EXEC_TIMEOUT, allow_inf_nan=False)
    retry: RetryPolicy | None = None
    loop: LoopRule | None = None
    enabled: bool | None = None

    @field_validator("name")
    @classmethod
    def _name(cls, name: str | None) -> str | None:
        return None if name is None else check_name(name)


def parsed(model: type[_Input], given: Any, field: str = "") -> Any:
    """``given`` (a mapping from the CLI or the App) as ``model``, or an InvalidInput naming
    the first bad field."""
    try:
        checked = model.model_validate(given)
    except ValidationError as exc:  # names the place, never the value (it may be a secret)
        errors = exc.errors()
        first = errors[0]
        where = ".".join(str(p) for p in (field, *first["loc"]) if p != "") or "definition"
        reason = first["msg"].removeprefix("Value error, ")
        if len(errors) > 1:
            reason += f" (and {len(errors) - 1} more)"
        raise InvalidField(where, reason) from None
    found = unstorable(checked.model_dump(exclude_none=True), field or "definition")
    if found is not None:
        raise InvalidField(found[0], found[1])
    return checked


@dataclass(frozen=True, slots=True)
class Definition:
    """A stored definition as operators see it."""

    id: int
    name: str
    description: str
    kind: str
    spec: dict[str, Any]
    queue: str
    cron: str | None
    timezone: str
    exec_timeout: float
    retry: dict[str, Any]
    loop: dict[str, Any] | None
    enabled: bool
    webhook: bool
    """Whether the definition has a webhook (its token is shown once, when it is made)."""
    runs: int
    """Attempts of its runs that ended (counted by the runtimes)."""
    failures: int
    last_run_at: datetime | None
    last_outcome: str | None
    version: int
    created_by: str
    created_at: datetime
    updated_by: str
    updated_at: datetime

    @classmethod
    def from_row(cls, row: dict[str, Any]) -> Definition:
        return cls(
            id=row["id"],
            name=row["name"],
            description=row["description"],
            kind=row["kind"],
            spec=_stored_object(row["spec"]),
            queue=row["queue"],
            cron=row["cron"],
            timezone=row["timezone"],
            exec_timeout=row["exec_timeout"],
            retry=_stored_object(row["backoff"]) | {"max_attempts": row["max_attempts"]},
            loop=None if row["loop"] is None else _stored_object(row["loop"]),
            enabled=row["enabled"],
            webhook=row["webhook_hash"] is not None,
            runs=row["runs"],
            failures=row["failures"],
            last_run_at=row["last_run_at"],
            last_outcome=row["last_outcome"],
            version=row["version"],
            created_by=row["created_by"],
            created_at=row["created_at"],
            updated_by=row["updated_by"],
            updated_at=row["updated_at"],
        )

    @property
    def task(self) -> str:
        return HTTP_TASK if self.kind == "http" else SCRIPT_TASK

    @property
    def schedule_name(self) -> str:
        return schedule_name(self.id)

    def run_fields(self) -> dict[str, Any]:
        """What a run carries of its definition as it is now: which one and its version,
        what to run, the policy. A retry puts these over a run's own (see
        :mod:`tickwork.definitions.reruns`)."""
        return {
            "definition": {
                "id": self.id,
                "name": self.name,
                "version": self.version,
                "kind": self.kind,
            },
            "spec": self.spec,
            "policy": {"exec_timeout": self.exec_timeout, "retry": self.retry, "loop": self.loop},
        }

    def snapshot(self, trigger: dict[str, Any]) -> dict[str, Any]:
        """A run's job arguments: the definition as it is now, so an edit never changes a
        run already made (until an operator retries it: the retry runs the edit)."""
        return self.run_fields() | {"trigger": trigger}


def schedule_name(definition_id: int) -> str:
    return f"definition:{definition_id}"


def queue_of(kind: str, spec: HttpSpec | ScriptSpec) -> str:
    if isinstance(spec, ScriptSpec):
        return SCRIPT_QUEUES[spec.language]
    return HTTP_QUEUE


def dumps(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), allow_nan=False)


def _stored_object(value: Any) -> dict[str, Any]:
    """A stored JSON object as read; an :class:`Undecodable` marker for a value that is not
    one (written by SQL or an older version), so one such row never fails a listing."""
    if isinstance(value, dict):
        return value
    return Undecodable(f"must be a JSON object, not {json_kind(value)}")
