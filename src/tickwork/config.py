"""Settings: defaults as named constants, read from ``TICKWORK_*`` and an optional TOML file.

Precedence, highest first: keyword arguments to :class:`Settings`, environment variables
(``TICKWORK_DATABASE_URL``, nested ones with ``__``: ``TICKWORK_WORKER__CONCURRENCY``), the
TOML file named by ``TICKWORK_CONFIG`` (or ``./tickwork.toml`` when it exists), then defaults.
Everything is validated once, by :func:`load_settings`; errors name the field and value.
"""

from __future__ import annotations

import ipaddress
import os
import re
from pathlib import Path
from typing import Any, Literal

import platformdirs
import psycopg
from psycopg.conninfo import conninfo_to_dict
from pydantic import (
    AliasChoices,
    BaseModel,
    ConfigDict,
    Field,
    SecretStr,
    ValidationError,
    model_validator,
)
from pydantic_settings import (
    BaseSettings,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
    TomlConfigSettingsSource,
)

from tickwork.errors import ConfigError

DEFAULT_SCHEMA = "tickwork"
DEFAULT_CONFIG_FILE = "tickwork.toml"
DEFAULT_POOL_MIN_SIZE = 1
DEFAULT_POOL_MAX_SIZE = 10
DEFAULT_CONNECT_TIMEOUT = 10.0
DEFAULT_DATABASE_POOLER: Literal["none", "transaction"] = "none"
DEFAULT_KEEPALIVES_IDLE = 5
DEFAULT_KEEPALIVES_INTERVAL = 2
DEFAULT_KEEPALIVES_COUNT = 3
DEFAULT_TCP_USER_TIMEOUT = 15.0
DEFAULT_STATEMENT_TIMEOUT = 30.0
"""Seconds one statement of tickwork's own pools (the API's, the services') may run before
the server cancels it."""
DEFAULT_IDLE_IN_TRANSACTION_TIMEOUT = 60.0
"""Seconds a session of those pools may sit idle inside a transaction before the server ends
it (and its locks with it)."""
MAX_KEEPALIVES_SECONDS = 32_767
"""Linux's largest TCP keepalive idle time and probe interval (seconds): libpq's
``setsockopt`` fails at connect beyond it."""
MAX_KEEPALIVES_COUNT = 127
"""Linux's largest number of keepalive probes."""
MAX_TCP_USER_TIMEOUT = 2_147_483.0
"""The largest ``tcp_user_timeout`` (seconds): libpq and the server take it in milliseconds
as a 32-bit integer."""

DEFAULT_QUEUE = "default"
DEFAULT_PRIORITY = 0
MIN_PRIORITY = -100
MAX_PRIORITY = 100
DEFAULT_MAX_ATTEMPTS = 5
MAX_MAX_ATTEMPTS = 1000
DEFAULT_TASK_TIMEOUT: float | None = None

DEFAULT_CONCURRENCY = 100
DEFAULT_THREADS = 10
DEFAULT_POLL_INTERVAL = 1.0
DEFAULT_LEASE_TTL = 30.0
DEFAULT_LEASE_RENEW_INTERVAL = 10.0
DEFAULT_WATCHDOG_INTERVAL = 5.0
DEFAULT_METRICS_INTERVAL = 30.0
DEFAULT_WATCHDOG_BATCH = 500
DEFAULT_SHUTDOWN_GRACE = 25.0

DEFAULT_LEASE_HEARTBEAT = 15.0
DEFAULT_LEADER_LEASE_TTL = 30.0

DEFAULT_SCHEDULER_INTERVAL = 30.0
DEFAULT_SCHEDULE_MIN_INTERVAL = 1.0
DEFAULT_RETENTION_INTERVAL = 60.0
DEFAULT_RETENTION_BATCH = 5000
DEFAULT_VACUUM_DEAD_ROWS = 5_000
DEFAULT_FINISHED_RETENTION = 24 * 3600.0
DEFAULT_ACTIVITY_RETENTION = 30 * 86400.0
DEFAULT_WORKER_METRICS_RETENTION = 7 * 86400.0
DEFAULT_THROUGHPUT_RETENTION = 7 * 86400.0
DEFAULT_AUDIT_RETENTION = 365 * 86400.0
DEFAULT_DEAD_LETTER_RETENTION = 7 * 24 * 3600.0

DEFAULT_API_HOST = "127.0.0.1"
DEFAULT_API_PORT = 8080
DEFAULT_MAX_BODY_BYTES = 2 * 1024 * 1024
"""Largest request body the API reads (a job's arguments may be 1 MiB of JSON)."""
DEFAULT_MAX_CONNECTIONS = 2048
DEFAULT_DATABASE_WAIT = 5.0
"""Seconds an API request waits for a database connection before it answers 503."""

# the HTTP server's connection bounds (serve.py, http_bounds.py)
DEFAULT_HEADER_TIMEOUT = 10.0
"""Seconds a connection has to send a request's complete headers (from its first byte)."""
DEFAULT_BODY_TIMEOUT = 20.0
DEFAULT_BODY_MIN_RATE = 500
"""Bytes per second that extend the body's time by one second each (Apache's MinRate)."""
DEFAULT_KEEP_ALIVE_TIMEOUT = 5.0
DEFAULT_MAX_CONNECTIONS_PER_CLIENT = 100
DEFAULT_PROBE_RESERVE = 32
DEFAULT_REQUEST_DEADLINE = 30.0
"""Seconds an API request may take in all before it answers 503 (the event stream aside)."""
DEFAULT_ACCESS_TOKEN_TTL = 900.0
MAX_ACCESS_TOKEN_TTL = 900.0
DEFAULT_REFRESH_TOKEN_TTL = 30 * 24 * 3600.0
DEFAULT_JWT_ISSUER = "tickwork"
DEFAULT_JWT_AUDIENCE = "tickwork-api"
DEFAULT_LOGIN_WINDOW = 900.0
DEFAULT_LOGIN_MAX_PER_ACCOUNT = 5
DEFAULT_LOGIN_MAX_PER_ADDRESS = 20
DEFAULT_INVITE_TTL = 7 * 24 * 3600.0

DEFAULT_SIGNAL_POLL_INTERVAL = 5.0
DEFAULT_SIGNAL_BATCH = 50
DEFAULT_SIGNAL_DEBOUNCE = 30.0
"""Window of a signal type with no configured one: never zero, so a forgotten entry batches
more than intended instead of silently disabling squashing."""
DEFAULT_SIGNAL_MAX_RETRIES = 3
DEFAULT_SIGNAL_BACKOFF = 10.0
DEFAULT_SIGNAL_BACKOFF_CAP = 3600.0
DEFAULT_SIGNAL_STUCK_AFTER = 600.0
DEFAULT_SIGNAL_RETENTION_DAYS = 7.0
SIGNAL_RETENTION_REACTOR = "signal-retention"

SECRET_FIELDS = ("database_url", "direct_url", "secret", "password")
"""A setting whose name contains one of these is never echoed in an error."""

SCHEMA_NAME = re.compile(r"^[a-z_][a-z0-9_]{0,53}\Z")
"""At most 54 characters: the NOTIFY channels are named ``<schema>.finished`` (the longest),
and PostgreSQL names are at most 63 bytes (a longer channel fails every outcome write)."""
QUEUE_NAME = re.compile(r"^[A-Za-z0-9_.:-]{1,128}\Z")
SCHEDULE_NAME = re.compile(r"^[\w.:<>@+-]{1,200}\Z")
"""A schedule's name: it stands in URL paths and log lines, so no slashes, spaces or
control characters (letters, digits and ``_.:<>@+-``: a task's default name, such as
``app.jobs.<locals>.report``, fits)."""
DEFINITION_SCHEDULE_PREFIX = "definition:"
"""A definition's schedule is named ``definition:<id>``; no other schedule may be."""


MAX_SECONDS = 100 * 365 * 86400.0
"""The longest duration a setting may hold (100 years): far longer overflows the database's
timestamps when it is added to or subtracted from now."""


def seconds(default: float, *, zero: bool = False) -> Any:
    """A duration setting in seconds: positive (or 0 when ``zero``), finite, at most
    :data:`MAX_SECONDS`."""
    return Field(
        default, ge=0 if zero else None, gt=None if zero else 0, le=MAX_SECONDS, allow_inf_nan=False
    )


def default_data_dir() -> Path:
    """Where the embedded PostgreSQL keeps its data when no database URL is set."""
    return Path(platformdirs.user_data_dir("tickwork")) / "postgres"


class TcpSettings(BaseModel):
    """TCP settings of tickwork's database connections (libpq's ``keepalives*`` and
    ``tcp_user_timeout``): a connection whose peer is gone without a reset or close (a cut
    link, a partition, a server that lost power) fails within about ``user_timeout`` +
    ``keepalives_interval`` seconds (17 by default) instead of the operating system's minutes
    to hours, and the pool replaces it. A parameter the database URL sets itself wins."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)

    keepalives: bool = True
    """Send TCP keepalives on idle connections (libpq ``keepalives``)."""
    keepalives_idle: int = Field(DEFAULT_KEEPALIVES_IDLE, ge=1, le=MAX_KEEPALIVES_SECONDS)
    """Whole seconds of silence before the first keepalive probe (``keepalives_idle``)."""
    keepalives_interval: int = Field(DEFAULT_KEEPALIVES_INTERVAL, ge=1, le=MAX_KEEPALIVES_SECONDS)
    """Whole seconds between unanswered probes (``keepalives_interval``)."""
    keepalives_count: int = Field(DEFAULT_KEEPALIVES_COUNT, ge=1, le=MAX_KEEPALIVES_COUNT)
    """Unanswered probes before the connection is dropped (``keepalives_count``; on Linux
    ``user_timeout`` decides instead when it is set)."""
    user_timeout: float = Field(
        DEFAULT_TCP_USER_TIMEOUT, ge=0, le=MAX_TCP_USER_TIMEOUT, allow_inf_nan=False
    )
    """Seconds sent data (or, on Linux, keepalive probes) may stay unacknowledged before the
    connection is dropped (``tcp_user_timeout``, in milliseconds to libpq); 0: the operating
    system's default (about 15 minutes of retransmissions)."""
    server_side: bool = True
    """Ask the server to use the same keepalives and user timeout for tickwork's pooled
    sessions (``-c tcp_keepalives_idle=...`` in their startup options): a session whose client
    vanished, perhaps in an open transaction holding locks, then ends within the same bound
    instead of the server's default of two hours. The URL's ``options`` (or ``PGOPTIONS``)
    win over these."""

    def server_settings(self) -> dict[str, str]:
        """The server-side settings :attr:`server_side` sends (none when it is off)."""
        if not self.server_side:
            return {}
        found = {"tcp_user_timeout": str(round(self.user_timeout * 1000))}
        if self.keepalives:
            found |= {
                "tcp_keepalives_idle": str(self.keepalives_idle),
                "tcp_keepalives_interval": str(self.keepalives_interval),
                "tcp_keepalives_count": str(self.keepalives_count),
            }
        return found

    def libpq(self) -> dict[str, int]:
        """These settings as libpq connection parameters."""
        return {
            "keepalives": int(self.keepalives),
            "keepalives_idle": self.keepalives_idle,
            "keepalives_interval": self.keepalives_interval,
            "keepalives_count": self.keepalives_count,
            "tcp_user_timeout": round(self.user_timeout * 1000),
        }


class WorkerSettings(BaseModel):
    """How a worker process claims and runs jobs."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)

    queues: list[str] = Field(default_factory=lambda: [DEFAULT_QUEUE])
    """The queues a worker claims from."""
    concurrency: int = Field(DEFAULT_CONCURRENCY, ge=1, le=10_000)
    """Most jobs a worker runs at once, async and sync handlers together."""
    threads: int | None = Field(None, ge=1, le=10_000)
    """Most sync handlers a worker runs at once (its thread pool; never more than
    ``concurrency``): it claims no more jobs of sync tasks than it has threads free. Unset:
    ``concurrency`` when that is set, otherwise 10, so async handlers get many slots and
    blocking ones a small pool by default."""
    poll_interval: float = seconds(DEFAULT_POLL_INTERVAL)
    """Seconds between claims when no notification wakes the worker."""
    lease_ttl: float = seconds(DEFAULT_LEASE_TTL)
    """Seconds an attempt's lease lasts unless renewed: a crashed worker's jobs wait this long."""
    lease_renew_interval: float = seconds(DEFAULT_LEASE_RENEW_INTERVAL)
    """Seconds between lease renewals (one statement for all the worker's attempts)."""
    watchdog_interval: float = seconds(DEFAULT_WATCHDOG_INTERVAL)
    """Seconds between the watchdog's passes over expired leases."""
    watchdog_batch: int = Field(DEFAULT_WATCHDOG_BATCH, ge=1)
    """Expired attempts the watchdog reclaims per statement."""
    shutdown_grace: float = seconds(DEFAULT_SHUTDOWN_GRACE, zero=True)
    """Seconds in-flight attempts may finish after SIGTERM before they are handed back."""
    metrics_interval: float = seconds(DEFAULT_METRICS_INTERVAL, zero=True)
    """Seconds between the process's CPU and memory samples (worker_metrics); 0: none."""

    @property
    def sync_threads(self) -> int:
        """Threads for sync handlers: ``threads``, else ``concurrency`` when that was given,
        else :data:`DEFAULT_THREADS`; at most ``concurrency``."""
        if self.threads is not None:
            threads = self.threads
        elif "concurrency" in self.model_fields_set:
            threads = self.concurrency
        else:
            threads = DEFAULT_THREADS
        return min(threads, self.concurrency)

    @model_validator(mode="after")
    def _check(self) -> WorkerSettings:
        if self.lease_ttl <= self.lease_renew_interval:
            raise ValueError(
                f"worker.lease_ttl ({self.lease_ttl}s) must be greater than "
                f"worker.lease_renew_interval ({self.lease_renew_interval}s)"
            )
        for queue in self.queues:
            if not QUEUE_NAME.match(queue):
                raise ValueError(
                    f"worker.queues ({queue!r}) must be 1-128 characters of letters, digits, _.:-"
                )
        if not self.queues:
            raise ValueError("worker.queues ([]) must name at least one queue")
        return self


class LeaseSettings(BaseModel):
    """Leader leases: how often each process competes, and how long a win lasts."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)

    heartbeat: float = seconds(DEFAULT_LEASE_HEARTBEAT)
    """Seconds between a process's lease heartbeats (one statement for all its roles)."""
    ttl: float = seconds(DEFAULT_LEADER_LEASE_TTL)
    """Seconds a won lease lasts without a heartbeat; must exceed the heartbeat."""

    @model_validator(mode="after")
    def _check(self) -> LeaseSettings:
        if self.ttl <= self.heartbeat:
            raise ValueError(
                f"ttl ({self.ttl}s) must be greater than heartbeat "
                f"({self.heartbeat}s), or leases flap between holders"
            )
        return self


class SchedulerSettings(BaseModel):
    """The scheduler (run by every worker process; the SCHEDULER lease holder passes at each
    fire time, and ticks at least every ``interval``)."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)

    enabled: bool = True
    """Whether this process's scheduler ticks (turns due fire times into jobs)."""
    interval: float = seconds(DEFAULT_SCHEDULER_INTERVAL)
    """Seconds between the scheduler's ticks at most. It passes at each next fire time
    anyway, and when a schedule is written (NOTIFY): the tick bounds only how late a lost
    notification or a failover can make a fire time."""
    min_interval: float = Field(
        DEFAULT_SCHEDULE_MIN_INTERVAL,
        ge=DEFAULT_SCHEDULE_MIN_INTERVAL,
        le=MAX_SECONDS,
        allow_inf_nan=False,
    )
    """Seconds between two fire times of a schedule at least: a cron that fires more often
    is refused when a schedule or definition is stored with it (schedules stored already
    keep firing). The default, 1, is every second: the finest a cron can say, which the
    scheduler honours; raise it to keep schedules coarser."""


class RetentionSettings(BaseModel):
    """How long finished jobs are kept before workers delete them (with their executions)."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)

    enabled: bool = True
    """Whether this process runs retention passes."""
    finished_after: float = seconds(DEFAULT_FINISHED_RETENTION)
    """Seconds SUCCEEDED and CANCELLED jobs are kept after they finish: 1 day."""
    dead_letter_after: float = seconds(DEFAULT_DEAD_LETTER_RETENTION)
    """Seconds DEAD_LETTER jobs are kept: 7 days."""
    interval: float = seconds(DEFAULT_RETENTION_INTERVAL)
    """Seconds between retention passes."""
    activity_after: float = seconds(DEFAULT_ACTIVITY_RETENTION)
    """How long a definition's activity buckets (its charts) are kept: 30 days."""
    worker_metrics_after: float = seconds(DEFAULT_WORKER_METRICS_RETENTION)
    """How long the processes' CPU and memory samples are kept: 7 days (a worker's record
    goes with them, kept at least a day: it names the tasks an API may enqueue)."""
    throughput_after: float = seconds(DEFAULT_THROUGHPUT_RETENTION)
    """How long the per-minute counts of finished work (throughput charts) are kept: 7 days."""
    audit_after: float = seconds(DEFAULT_AUDIT_RETENTION)
    """How long audit events are kept: 365 days."""
    batch: int = Field(DEFAULT_RETENTION_BATCH, ge=1)
    """Jobs deleted per statement."""
    vacuum: Literal["auto", "always", "never"] = "auto"
    """After deleting, VACUUM the job tables: "auto" only when the server's autovacuum is
    off (every update of a job leaves a dead row that only vacuum reclaims). "never" also
    turns off the vacuum by dead rows (``vacuum_dead_rows``)."""
    vacuum_dead_rows: int = Field(DEFAULT_VACUUM_DEAD_ROWS, ge=0)
    """VACUUM the jobs table as soon as it holds this many dead rows (checked every second by
    the retention leader, whatever the server's autovacuum; 0: never): every claim steps over
    the index entries of the jobs claimed since the last vacuum, and autovacuum (a minute
    apart at best) lets hundreds of thousands pile up at a few thousand jobs a second."""


class AuthSettings(BaseModel):
    """Logins, tokens and the first administrator."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)

    jwt_secret: SecretStr | None = None
    """Signing key of access tokens; when unset one is generated once and stored."""
    issuer: str = Field(DEFAULT_JWT_ISSUER, min_length=1)
    """The ``iss`` claim of access tokens."""
    audience: str = Field(DEFAULT_JWT_AUDIENCE, min_length=1)
    """The ``aud`` claim of access tokens."""
    access_token_ttl: float = Field(DEFAULT_ACCESS_TOKEN_TTL, gt=0, le=MAX_ACCESS_TOKEN_TTL)
    """Seconds an access token is valid (at most 15 minutes)."""
    refresh_token_ttl: float = seconds(DEFAULT_REFRESH_TOKEN_TTL)
    """Seconds a login lasts without use of its refresh token: 30 days."""
    invite_ttl: float = seconds(DEFAULT_INVITE_TTL)
    """Seconds an invite may be accepted: 7 days."""
    login_window: float = seconds(DEFAULT_LOGIN_WINDOW)
    """Seconds over which failed logins are counted for throttling."""
    login_max_per_account: int = Field(DEFAULT_LOGIN_MAX_PER_ACCOUNT, ge=1)
    """Failed logins of one account within the window before it is throttled (429)."""
    login_max_per_address: int = Field(DEFAULT_LOGIN_MAX_PER_ADDRESS, ge=1)
    """Failed logins from one client address within the window before it is throttled."""
    admin_email: str | None = None
    """The first administrator, created at first start when no user exists."""
    admin_password: SecretStr | None = None
    """Their password; when unset a random one is generated and printed once."""

    @model_validator(mode="after")
    def _check(self) -> AuthSettings:
        secret = self.jwt_secret.get_secret_value() if self.jwt_secret else None
        if secret is not None and len(secret) < 32:
            raise ValueError("auth.jwt_secret (<redacted>) must be at least 32 characters")
        return self


CORS_ORIGIN = re.compile(r"https?://(\[[0-9a-fA-F:.]+\]|[A-Za-z0-9.-]+)(:[0-9]{1,5})?")
"""An origin as browsers send it: scheme, host (or bracketed IPv6) and optional port."""


class ApiSettings(BaseModel):
    """Where ``tickwork serve`` listens."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)

    host: str = DEFAULT_API_HOST
    """The address ``tickwork serve`` listens on."""
    port: int = Field(DEFAULT_API_PORT, ge=0, le=65535)
    """The port ``tickwork serve`` listens on (0: any free one, printed at start)."""
    public_url: str | None = None
    """The address users open (printed at start; decides Secure cookies when https)."""
    max_body_bytes: int = Field(DEFAULT_MAX_BODY_BYTES, ge=1024, le=1024**3)
    """Larger request bodies are refused (413) before they are read."""
    database_wait: float = Field(DEFAULT_DATABASE_WAIT, gt=0, le=300, allow_inf_nan=False)
    """Seconds a request waits for a database connection; then it answers 503."""
    request_deadline: float = Field(DEFAULT_REQUEST_DEADLINE, gt=0, le=3600, allow_inf_nan=False)
    """Seconds a request may take in all, from its body read to its answer; past it the
    request is abandoned (its database connection closed, never reused mid-statement) and
    answered 503 with Retry-After. Bounds a database that stopped answering, which the
    server-side ``statement_timeout`` cannot. The dashboard's event stream has bounds of its
    own and is not cut."""
    max_connections: int = Field(DEFAULT_MAX_CONNECTIONS, ge=1, le=1_000_000)
    """Connections served at once; past it a new connection may ask only the probes
    (``probe_reserve``) or is closed. Keep it plus ``probe_reserve`` below the process's
    open-file limit."""
    webhook_rate: int = Field(60, ge=1, le=1_000_000)
    """Calls of one definition's webhook a process accepts per minute; past it 429."""
    trusted_proxies: list[str] = Field(default_factory=list)
    """Addresses (or CIDR networks) of reverse proxies whose X-Forwarded-For and
    X-Forwarded-Proto are believed; none by default, so a client cannot choose its own
    address (which login throttling counts by)."""
    cors_origins: list[str] = Field(default_factory=list, max_length=100)
    """Origins (``https://ops.example.com``) of front ends served elsewhere whose pages may
    call the API with a bearer token (CORS); none by default, so a page of another origin
    cannot read the API's answers. Exact origins only: no wildcard, no path. The refresh
    cookie is never sent across origins either way."""

    # the HTTP server's connection bounds (docs/security.md, "Connections")
    header_timeout: float = Field(DEFAULT_HEADER_TIMEOUT, gt=0, le=3600, allow_inf_nan=False)
    """Seconds a connection has to send a request's complete headers, counted from its
    first byte (from when it connects, for its first request); then it is closed. An idle
    new connection and one that sends its headers a byte at a time end here."""
    body_timeout: float = Field(DEFAULT_BODY_TIMEOUT, gt=0, le=3600, allow_inf_nan=False)
    """Seconds a request body has to arrive, plus one for every ``body_min_rate`` bytes
    received; past it the request is answered 408 and the connection closed."""
    body_min_rate: int = Field(DEFAULT_BODY_MIN_RATE, ge=0, le=1024**3)
    """Bytes per second a body must keep up to earn more time than ``body_timeout`` (0: a
    body gets ``body_timeout`` whatever its size)."""
    keep_alive_timeout: float = Field(
        DEFAULT_KEEP_ALIVE_TIMEOUT, gt=0, le=3600, allow_inf_nan=False
    )
    """Seconds a connection may stay idle between requests before it is closed."""
    max_connections_per_client: int = Field(DEFAULT_MAX_CONNECTIONS_PER_CLIENT, ge=1, le=1_000_000)
    """Connections one client address (an IPv6 client: its /64) may hold open; a further one
    is closed at once. Connections from ``trusted_proxies`` are not capped (the proxy sees
    the real clients and should cap them); ``max_connections`` still counts them."""
    probe_reserve: int = Field(DEFAULT_PROBE_RESERVE, ge=0, le=1_000_000)
    """Connections past ``max_connections`` accepted only for ``/healthz`` and ``/readyz``
    (anything else on them answers 503); past these too, a new connection is closed at once."""
    probe_port: int | None = Field(None, ge=0, le=65535)
    """A second port that serves only ``/healthz`` and ``/readyz``, with connections of its
    own, for an orchestrator's probes (Kubernetes: point the probes here and do not expose it
    in the Service); unset: none (0: any free one)."""
    probe_host: str | None = None
    """The address of ``probe_port``; unset: ``host``."""

    @model_validator(mode="after")
    def _check(self) -> ApiSettings:
        for origin in self.cors_origins:
            if not CORS_ORIGIN.fullmatch(origin):
                raise ValueError(
                    f"api.cors_origins ({origin!r}) must be origins: a scheme, a host and an"
                    " optional port, like https://ops.example.com or http://localhost:5173"
                    " (no wildcard, no path, no trailing slash)"
                )
        if self.probe_port is not None and self.probe_port != 0 and self.probe_port == self.port:
            raise ValueError(
                f"api.probe_port ({self.probe_port}) must differ from api.port ({self.port})"
            )
        for proxy in self.trusted_proxies:
            try:
                ipaddress.ip_network(proxy, strict=False)
            except ValueError:
                raise ValueError(
                    f"api.trusted_proxies ({proxy!r}) must be IP addresses or networks"
                    " (like 10.0.0.5 or 10.0.0.0/8)"
                ) from None
        return self


class MetricsSettings(BaseModel):
    """What ``/metrics`` reports."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)

    statement_times: Literal["job_path", "all", "none"] | list[str] = "job_path"
    """Which named statements ``tickwork_statement_seconds`` reports a histogram for (14
    series each): ``job_path`` (enqueue, claim, completion, lease renewal and reclaim,
    heartbeats), ``all`` (every statement this process ran, up to about 160), ``none``, or a
    list of statement names."""


class McpSettings(BaseModel):
    """The MCP endpoint (``/mcp``) that assistants call with a person's API token."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)

    allowed_hosts: list[str] = Field(
        default_factory=lambda: ["127.0.0.1:*", "localhost:*", "[::1]:*"]
    )
    """Host headers ``/mcp`` answers (``name:*``: any port); ``api.public_url``'s host is
    added. Anything else is refused (421): a page on another site that makes its name point
    at this machine (DNS rebinding) cannot reach the endpoint."""
    allowed_origins: list[str] = Field(
        default_factory=lambda: ["http://127.0.0.1:*", "http://localhost:*", "http://[::1]:*"]
    )
    """Origin headers ``/mcp`` accepts (a request without one, as assistants send, is
    accepted); ``api.public_url``'s origin is added. Others are refused (403)."""
    rate: int = Field(600, ge=1, le=1_000_000)
    """Requests one person may make to ``/mcp`` per minute in one process (and refused
    tokens one address may send); past it 429."""
    max_body_bytes: int = Field(256 * 1024, ge=1024, le=16 * 1024 * 1024)
    """The largest ``/mcp`` request body (413 beyond): MCP messages are small, and each is
    parsed whole on the event loop every request shares."""


class ReactorSettings(BaseModel):
    """One reactor's subtree: the framework's keys, plus any keys the reactor owns."""

    model_config = ConfigDict(extra="allow", use_attribute_docstrings=True)

    enabled: bool = False
    """Silence never enables behaviour: a reactor nobody configured does nothing."""
    sweep_cron: str | None = None
    """Overrides the reactor's own sweep cron (5 or 6 fields, or @hourly and friends)."""
    organisations: list[str] = Field(default_factory=list)
    """Tenants an organisation-scoped reactor may act for; empty means NONE."""
    dry_run: bool = False
    """Invoke the reactor in dry-run mode: its writes are rolled back and it must cause no
    side effects of its own."""

    @property
    def extra(self) -> dict[str, Any]:
        """The reactor's own keys."""
        return dict(self.model_extra or {})


class SignalProcessorSettings(BaseModel):
    """The signal processor (run by the SIGNAL_MASTER lease holder)."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)

    enabled: bool = True
    """Whether the signal processor runs (emitted signals wait while it is off)."""
    poll_interval: float = seconds(DEFAULT_SIGNAL_POLL_INTERVAL)
    """Seconds between the processor's claims of ready signals."""
    batch_size: int = Field(DEFAULT_SIGNAL_BATCH, ge=1, le=10_000)
    """Signals claimed per pass."""
    max_retries: int = Field(DEFAULT_SIGNAL_MAX_RETRIES, ge=0, le=100)
    """Retries of a failing reactor (after its first try) before it is DEAD for a signal."""
    backoff: float = seconds(DEFAULT_SIGNAL_BACKOFF)
    """First retry delay in seconds; doubles per failure up to ``backoff_cap``."""
    backoff_cap: float = seconds(DEFAULT_SIGNAL_BACKOFF_CAP)
    """The longest retry delay of a failing reactor, in seconds."""
    stuck_after: float = seconds(DEFAULT_SIGNAL_STUCK_AFTER)
    """A signal PROCESSING this long with no retry scheduled was left by a dead processor."""


class SignalSettings(BaseModel):
    """Signals and sweeps (``[signals]`` in the config file)."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)

    enabled: bool = True
    """The master switch of processing and sweeps (emitting always works: nothing is lost)."""
    lease: LeaseSettings = Field(default_factory=lambda: LeaseSettings())
    """The leader leases of the signal processor and the sweeps."""
    processor: SignalProcessorSettings = Field(default_factory=lambda: SignalProcessorSettings())
    """The signal processor."""
    sweeps_enabled: bool = True
    """Whether reactors' sweeps run (on their crons)."""
    retention_days: float = Field(
        DEFAULT_SIGNAL_RETENTION_DAYS, gt=0, le=MAX_SECONDS / 86400, allow_inf_nan=False
    )
    """COMPLETED and DEAD signals are purged after this many days."""
    default_debounce: float = seconds(DEFAULT_SIGNAL_DEBOUNCE)
    """Window in seconds of a signal type with no entry in ``debounce`` (never zero)."""
    debounce: dict[str, float] = Field(default_factory=dict)
    """Window in seconds per signal type; 0 = never squash (every emit counts)."""
    reactors: dict[str, ReactorSettings] = Field(default_factory=dict)
    """Each reactor's configuration, by its name (``[signals.reactors.NAME]``)."""

    @model_validator(mode="after")
    def _check(self) -> SignalSettings:
        for name, window in self.debounce.items():
            if not 0 <= window <= MAX_SECONDS:  # NaN fails too
                raise ValueError(
                    f"signals.debounce.{name} ({window}) must be 0 to {MAX_SECONDS:.0f} seconds"
                )
        if self.processor.backoff_cap < self.processor.backoff:
            raise ValueError(
                f"signals.processor.backoff_cap ({self.processor.backoff_cap}) must be at least "
                f"signals.processor.backoff ({self.processor.backoff})"
            )
        return self

    def window(self, signal_type: str) -> float:
        """The debounce window of a signal type (the default when none is configured)."""
        return self.debounce.get(signal_type, self.default_debounce)

    def reactor(self, name: str) -> ReactorSettings:
        """A reactor's configuration; an unconfigured reactor is disabled, with no tenants
        (the framework's own retention reactor is enabled unless configured otherwise)."""
        found = self.reactors.get(name)
        if found is not None:
            return found
        return ReactorSettings(enabled=name == SIGNAL_RETENTION_REACTOR)


MAX_EXEC_TIMEOUT = 30 * 60.0
"""The longest a definition's one HTTP call or one script process may run (30 minutes)."""
EXEC_TIMEOUT_MARGIN = 5 * 60.0
"""A definition's job timeout is the cap plus this: a safety net for a run that somehow
outlives its own ``exec_timeout``, never the limit that normally applies."""
DEFAULT_EXEC_TIMEOUT = 60.0
RUNTIME_NAMES = ("http", "bash", "python", "node", "groovy")
"""The runtimes of definitions; each runs from its own queue (``definitions.records``)."""


class HttpRuntimeSettings(BaseModel):
    """The HTTP runtime: its queue's concurrency and what its calls may reach."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)

    concurrency: int = Field(20, ge=1, le=200)
    """HTTP runs at once per process."""
    allow_networks: list[str] = Field(default_factory=list)
    """Networks (CIDR) an HTTP definition may reach although they are private, loopback or
    otherwise refused by the SSRF guard, e.g. ``["10.20.0.0/16"]`` for internal services."""
    max_response_bytes: int = Field(256 * 1024, ge=0, le=16 * 1024 * 1024)
    """The body a run's result keeps (the rest is read and dropped, flagged truncated)."""
    max_redirects: int = Field(5, ge=0, le=20)
    """Redirects a call follows (each hop checked by the SSRF guard)."""

    @model_validator(mode="after")
    def _check(self) -> HttpRuntimeSettings:
        for network in self.allow_networks:
            try:
                ipaddress.ip_network(network, strict=False)
            except ValueError:
                raise ValueError(
                    f"runtimes.http.allow_networks ({network!r}) must be a network, e.g. "
                    "10.0.0.0/8 or 127.0.0.1/32"
                ) from None
        return self


class ScriptRuntimeSettings(BaseModel):
    """The script runtimes: isolation of each script process and its limits."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)

    concurrency: int = Field(5, ge=1, le=100)
    """Script runs at once per process, per runtime."""
    uid: int = Field(65532, ge=1)
    """The user scripts run as when the worker runs as root (never root itself)."""
    gid: int = Field(65532, ge=1)
    """The group scripts run as when the worker runs as root."""
    cpu_seconds: int = Field(600, ge=1)
    """RLIMIT_CPU of a script process (and each of its children)."""
    memory_bytes: int = Field(2 * 1024**3, ge=64 * 1024**2)
    """RLIMIT_AS of each script process. node and groovy (the JVM) reserve address space up
    front and need about 1 GiB of it to start (see docs/definitions.md)."""
    processes: int = Field(256, ge=1)
    """Processes of one run at once (a fork bomb stops here): its own pids cgroup's
    ``pids.max`` when the worker is root, else RLIMIT_NPROC (every process of the script
    user on the machine)."""
    isolation: Literal["auto", "namespaces", "process_group"] = "auto"
    """How a run is contained: ``namespaces`` (its own PID, mount and IPC namespaces, a
    private temp space; refused at start-up when this machine cannot make them),
    ``process_group`` (the older containment: a process group and ``timeout`` only), or
    ``auto``: namespaces when the machine can, else process_group with a warning naming
    what is not contained (docs/definitions.md)."""
    tmp_bytes: int = Field(256 * 1024**2, ge=1024**2)
    """The size of a run's private temp space: one tmpfs (in memory) that is its ``/tmp``,
    ``/var/tmp``, ``/dev/shm``, ``/run/lock`` and its working directory; gone with it."""
    file_bytes: int = Field(64 * 1024**2, ge=0)
    """RLIMIT_FSIZE: the largest file a script may write."""
    max_output_bytes: int = Field(64 * 1024, ge=0, le=16 * 1024 * 1024)
    """Of stdout and of stderr each, what a run's result keeps (flagged truncated beyond)."""
    kill_grace: float = Field(2.0, ge=0, le=60)
    """Seconds between SIGTERM and SIGKILL to a script's process group."""
    workdir: Path | None = None
    """Where each run's fresh working directory is made (the system's temp dir if unset)."""
    bash: str = "bash"
    """The bash interpreter (a name on PATH or a path)."""
    python: str = "/usr/bin/python3"
    """The Python interpreter of Python scripts."""
    node: str = "node"
    """The Node.js interpreter of JavaScript (and TypeScript) scripts."""
    groovy: str = "groovy"
    """The Groovy interpreter."""
    typescript: str = "esbuild"
    """The TypeScript transpiler (esbuild); its output runs on ``node``."""


class RuntimeSettings(BaseModel):
    """The runtimes of operator-defined HTTP and script jobs (docs/definitions.md)."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)

    http: HttpRuntimeSettings = Field(default_factory=lambda: HttpRuntimeSettings())
    """The HTTP runtime."""
    scripts: ScriptRuntimeSettings = Field(default_factory=lambda: ScriptRuntimeSettings())
    """The script runtimes."""
    serve: list[str] | None = None
    """The runtimes ``serve`` runs, each as its own executor: None (the default) every one
    whose interpreter this machine has; ``[]`` none (run them as ``tickwork worker
    --runtime <name>`` processes instead)."""

    @model_validator(mode="after")
    def _check(self) -> RuntimeSettings:
        for name in self.serve or []:
            if name not in RUNTIME_NAMES:
                raise ValueError(
                    f"runtimes.serve ({name!r}) must name runtimes of {', '.join(RUNTIME_NAMES)}"
                )
        return self


class Settings(BaseSettings):
    """All of tickwork's configuration."""

    model_config = SettingsConfigDict(
        env_prefix="TICKWORK_",
        env_nested_delimiter="__",
        extra="forbid",
        populate_by_name=True,
        use_attribute_docstrings=True,  # a field's docstring is its description (reference)
    )

    database_url: SecretStr | None = None
    """The PostgreSQL URL; unset: the embedded server (under ``data_dir``)."""
    database_pooler: Literal["none", "transaction"] = DEFAULT_DATABASE_POOLER
    """What ``database_url`` reaches: ``none``, PostgreSQL itself or a pooler in session
    mode; ``transaction``, a pooler in transaction mode (PgBouncer's ``pool_mode =
    transaction``), whose clients share server sessions: tickwork's pooled connections then
    prepare no statements and send no session settings (no ``options``), and every connection
    that needs a session of its own goes to ``database_direct_url``."""
    database_direct_url: SecretStr | None = None
    """PostgreSQL itself, for the connections that need a session of their own: LISTEN (the
    workers', the API's, ``wait``'s), migrations (a session advisory lock) and the other
    one-off connections; unset: ``database_url``. Required with ``database_pooler =
    "transaction"``, where each such connection checks that it does not go through a pooler."""
    schema_name: str = Field(
        DEFAULT_SCHEMA, validation_alias=AliasChoices("schema", "TICKWORK_SCHEMA", "schema_name")
    )
    """The PostgreSQL schema that holds everything tickwork stores (key ``schema``)."""
    data_dir: Path = Field(default_factory=default_data_dir)
    """Where the embedded PostgreSQL keeps its data (only without ``database_url``)."""
    pool_min_size: int = Field(DEFAULT_POOL_MIN_SIZE, ge=0)
    """Connections each pool keeps open."""
    pool_max_size: int = Field(DEFAULT_POOL_MAX_SIZE, ge=1)
    """Connections each pool opens at most."""
    connect_timeout: float = seconds(DEFAULT_CONNECT_TIMEOUT)
    """Seconds to wait for a new database connection."""
    statement_timeout: float = seconds(DEFAULT_STATEMENT_TIMEOUT, zero=True)
    """Seconds a statement on the pools of the API and the background services (scheduler,
    signals, sweeps, retention, leases, the sampler, the App's calls) may run before the
    server cancels it (PostgreSQL's ``statement_timeout``, sent at connect); 0: none. The
    worker's claim and outcome connections, retention's vacuum and your handlers' own
    connections are not bounded by it. Not sent behind a transaction pooler (set it on the
    role, or PgBouncer's ``query_timeout``); the URL's ``options`` win over it."""
    idle_in_transaction_timeout: float = seconds(DEFAULT_IDLE_IN_TRANSACTION_TIMEOUT, zero=True)
    """Seconds a session of those pools may stay idle inside an open transaction (a stalled
    process holding row locks) before the server ends it
    (``idle_in_transaction_session_timeout``); 0: none. Not sent behind a transaction pooler
    (PgBouncer's ``idle_transaction_timeout`` does it there)."""
    tcp: TcpSettings = Field(default_factory=lambda: TcpSettings())
    """TCP keepalives and the user timeout of database connections: how soon a dead link is
    noticed."""
    worker: WorkerSettings = Field(default_factory=lambda: WorkerSettings())
    """Workers: claiming and running jobs."""
    retention: RetentionSettings = Field(default_factory=lambda: RetentionSettings())
    """Retention of finished jobs and history."""
    leases: LeaseSettings = Field(default_factory=lambda: LeaseSettings())
    """The leader leases of the scheduler and retention."""
    scheduler: SchedulerSettings = Field(default_factory=lambda: SchedulerSettings())
    """The scheduler."""
    auth: AuthSettings = Field(default_factory=lambda: AuthSettings())
    """Logins, tokens and the first administrator."""
    api: ApiSettings = Field(default_factory=lambda: ApiSettings())
    """The API of ``tickwork serve``."""
    signals: SignalSettings = Field(default_factory=lambda: SignalSettings())
    """Signals and sweeps."""
    runtimes: RuntimeSettings = Field(default_factory=lambda: RuntimeSettings())
    """The runtimes of HTTP and script definitions."""
    mcp: McpSettings = Field(default_factory=lambda: McpSettings())
    """The MCP endpoint."""
    metrics: MetricsSettings = Field(default_factory=lambda: MetricsSettings())
    """What ``/metrics`` reports."""
    admin_email: str | None = None
    """``TICKWORK_ADMIN_EMAIL``: short for ``auth.admin_email`` (which wins when both are set)."""
    admin_password: SecretStr | None = None
    """``TICKWORK_ADMIN_PASSWORD``: short for ``auth.admin_password``."""

    @model_validator(mode="after")
    def _check(self) -> Settings:
        if self.auth.admin_email is None and self.admin_email is not None:
            self.auth.admin_email = self.admin_email
        if self.auth.admin_password is None and self.admin_password is not None:
            self.auth.admin_password = self.admin_password
        if not SCHEMA_NAME.match(self.schema_name):
            raise ValueError(
                f"schema ({self.schema_name!r}) must be a lower-case identifier of at most 54"
                " characters (letters, digits, underscore; not starting with a digit)"
            )
        if self.database_url is not None:
            _check_url(self.database_url.get_secret_value())
        if self.database_direct_url is not None:
            _check_url(self.database_direct_url.get_secret_value(), "database_direct_url")
        if self.database_pooler == "transaction":
            _check_pooler(self.database_url, self.database_direct_url)
        if self.pool_max_size < self.pool_min_size:
            raise ValueError(
                f"pool_max_size ({self.pool_max_size}) must be at least "
                f"pool_min_size ({self.pool_min_size})"
            )
        return self

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        sources: list[PydanticBaseSettingsSource] = [init_settings, env_settings]
        path = _config_file()
        if path is not None:
            sources.append(TomlConfigSettingsSource(settings_cls, toml_file=path))
        return tuple(sources)


def _check_url(url: str, field: str = "database_url") -> None:
    """Refuse a database URL libpq cannot parse, without echoing it (it may hold a
    password, and the driver's own message quotes the whole URL)."""
    try:
        conninfo_to_dict(url)
    except psycopg.Error:
        scheme = url.split("://", 1)[0] if "://" in url else None
        hint = f" (its scheme is {scheme!r})" if scheme and scheme.isalnum() else ""
        raise ValueError(
            f"{field} (<redacted>) must be a PostgreSQL URL, postgresql://user:password@"
            f"host:port/database, or a key=value connection string{hint}"
        ) from None


def _check_pooler(url: SecretStr | None, direct: SecretStr | None) -> None:
    """``database_pooler = "transaction"`` needs the pooler's URL, a direct URL that is not
    the same address, and no session settings sent at connect (a transaction pooler refuses
    the ``options`` startup parameter, and would hand those settings to other clients)."""
    if url is None:
        raise ValueError(
            "database_pooler ('transaction') needs database_url: the pooler's address (the"
            " embedded server has no pooler in front of it)"
        )
    if direct is None:
        raise ValueError(
            "database_pooler ('transaction') needs database_direct_url: PostgreSQL itself,"
            " for LISTEN and migrations, which a transaction pooler cannot carry"
        )
    pooled, direct_params = (
        conninfo_to_dict(url.get_secret_value()),
        conninfo_to_dict(direct.get_secret_value()),
    )
    if _address(pooled) == _address(direct_params):
        raise ValueError(
            "database_direct_url (<redacted>) must reach PostgreSQL itself, not the pooler at"
            f" database_url ({_address(pooled)})"
        )
    for source, given in (
        ("database_url's options", pooled.get("options")),
        ("PGOPTIONS", os.environ.get("PGOPTIONS")),
    ):
        if given and str(given).strip():
            raise ValueError(
                f"database_pooler ('transaction'): {source} ({given!r}) are session settings"
                " a transaction pooler refuses at connect (and would share between clients);"
                " set them on the role instead: ALTER ROLE ... SET name = value"
            )


def _address(params: dict[str, Any]) -> str:
    """``host:port`` of parsed connection parameters (libpq's defaults where not given)."""
    host = params.get("host") or params.get("hostaddr") or os.environ.get("PGHOST") or "local"
    port = params.get("port") or os.environ.get("PGPORT") or "5432"
    return f"{host}:{port}"


def _config_file() -> Path | None:
    named = os.environ.get("TICKWORK_CONFIG")
    if named:
        path = Path(named)
        if not path.is_file():
            raise ConfigError(f"TICKWORK_CONFIG ({named!r}) is not a readable file")
        return path
    local = Path(DEFAULT_CONFIG_FILE)
    return local if local.is_file() else None


def load_settings(**overrides: Any) -> Settings:
    """Read and validate settings once; raise :class:`ConfigError` naming each bad field."""
    try:
        return Settings(**overrides)
    except ValidationError as exc:
        raise ConfigError("invalid configuration: " + describe(exc)) from None
    except ValueError as exc:  # TOML syntax errors and similar
        raise ConfigError(f"configuration could not be read: {exc}") from None


def describe(exc: ValidationError, prefix: str = "") -> str:
    """One line per error: ``field (value): message``; secrets are never echoed."""
    lines = []
    for error in exc.errors():
        loc = ".".join(str(part) for part in (prefix, *error["loc"]) if part != "")
        message = error["msg"].removeprefix("Value error, ")
        if loc and not isinstance(error.get("input"), dict):
            value = error.get("input")
            if any(word in loc for word in SECRET_FIELDS):
                value = "<redacted>"
            lines.append(f"{loc} ({value!r}): {message}")
        elif loc and f"{loc}." not in message:  # a section-level rule: name the section
            lines.append(f"{loc}: {message}")
        else:
            lines.append(message)
    return "; ".join(lines)
