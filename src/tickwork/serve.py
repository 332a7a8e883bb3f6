"""``tickwork serve``: one process runs the API and the background services.

Roles choose what runs: ``api`` (the REST API), ``executor`` (claims and runs jobs),
``scheduler``, ``watchdog``, ``retention`` and ``signals`` (the signal processor and the
sweeps, behind the SIGNAL_MASTER and SWEEP_MASTER leases). Singletons are gated by leases
in the database and everything they do is idempotent, so any number of ``serve``
processes may share one database. SIGTERM (or SIGINT) stops the API, drains the executor and
exits; a second one skips the grace period (in-flight attempts are released at once).

The API's address (and the probe port's, ``api.probe_port``) is bound before anything else
starts: when it cannot be (another process listens on the port), ``serve`` says so in one line
and exits with :data:`EXIT_CANNOT_LISTEN`, having started no service and touched no database.
The HTTP server bounds its connections itself (:mod:`tickwork.http_bounds`).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
import socket
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TextIO

import uvicorn

from tickwork.errors import ConfigError, TickworkError
from tickwork.http_bounds import Bounds, bounded_protocol, probes_only
from tickwork.runtimes import available
from tickwork.services.host import SERVICE_ROLES
from tickwork.worker.run import exit_past_running_handlers, handle_stop_signals

if TYPE_CHECKING:
    from tickwork.app import App
    from tickwork.config import ApiSettings
    from tickwork.worker.worker import Worker

log = logging.getLogger("tickwork.serve")

ROLES = ("api", "webhook", "mcp", *SERVICE_ROLES)
"""Everything ``serve`` can run; all of it by default. ``api`` serves the whole API (the
webhooks included); ``webhook`` without ``api`` serves only the definitions' webhooks and
the probes, for a process that faces the internet alone."""
LISTENING_ROLES = frozenset({"api", "webhook", "mcp"})

EXIT_CANNOT_LISTEN = 4
"""``tickwork serve``'s exit code when the API's host:port cannot be listened on."""


class CannotListen(TickworkError):
    """The API's address cannot be listened on (another process has the port, the host is
    not this machine's, ...); nothing was started."""

    def __init__(self, host: str, port: int, reason: str) -> None:
        self.host = host
        self.port = port
        self.reason = reason
        super().__init__(f"cannot listen on {address(host, port)}: {reason}")


def address(host: str, port: int) -> str:
    """``host:port``, with an IPv6 host in brackets."""
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def listen(host: str, port: int) -> socket.socket:
    """A socket listening on ``host:port`` (port 0: one the system picks), or
    :class:`CannotListen` saying why."""
    sock = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as uvicorn binds
        sock.bind((host, port))
        sock.listen()
    except OSError as exc:  # socket.gaierror included: a host name that does not resolve
        sock.close()
        raise CannotListen(host, port, str(exc.strerror or exc).lower()) from None
    return sock


class _Server(uvicorn.Server):
    """uvicorn's server without its own signal handling (serve's handlers stop everything),
    and with an event set once it listens (the URL is printed only then)."""

    def __init__(self, config: uvicorn.Config) -> None:
        super().__init__(config)
        self.listening = asyncio.Event()

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        await super().startup(sockets)
        if self.started:
            self.listening.set()

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield


def _http_config(
    asgi: Any, host: str, sock: socket.socket, bounds: Bounds, api: ApiSettings
) -> uvicorn.Config:
    """uvicorn's configuration of one listener: tickwork's bounded h11 protocol (whatever
    else is installed: the bounds are written for it), no WebSockets (no route uses them),
    and the connection caps in the protocol rather than uvicorn's ``limit_concurrency``,
    which answers 503 to the probes too."""
    return uvicorn.Config(
        asgi,
        host=host,
        port=sock.getsockname()[1],
        http=bounded_protocol(bounds),
        ws="none",
        log_config=None,
        access_log=False,
        lifespan="off",
        # forwarded headers only from configured proxies: anyone else could choose the
        # address that login throttling counts attempts by
        proxy_headers=bool(api.trusted_proxies),
        forwarded_allow_ips=list(api.trusted_proxies),
    )


def parse_roles(text: str | None) -> frozenset[str]:
    """``api,executor,...`` as a set; an unknown role is refused, naming it."""
    if text is None:
        return frozenset(ROLES)
    chosen = frozenset(r.strip() for r in text.split(",") if r.strip())
    unknown = sorted(chosen - set(ROLES))
    if unknown or not chosen:
        raise ConfigError(f"--roles ({text!r}): choose from {', '.join(ROLES)}")
    return chosen


@dataclass(frozen=True, slots=True)
class ServeOptions:
    """How ``serve`` runs (the rest comes from the settings)."""

    roles: frozenset[str] = frozenset(ROLES)
    queues: list[str] | None = None
    concurrency: int | None = None
    host: str | None = None
    port: int | None = None
    threads: int | None = None


def executor_queues(app: App, options: ServeOptions) -> list[str] | None:
    """The queues of ``serve``'s executor: ``--queues``, else ``worker.queues`` when set,
    else ``default`` and every queue the app's own tasks declare (a task of ``--app`` on a
    queue of its own runs without naming it again)."""
    if options.queues is not None:
        return options.queues
    if "queues" in app.settings.worker.model_fields_set:
        return None  # the settings' own
    return app.task_queues()


def run(app: App, options: ServeOptions, out: TextIO = sys.stdout) -> None:
    """Serve until SIGTERM/SIGINT (blocking). The API's address is bound first
    (:class:`CannotListen` before anything starts); queues that name a runtime's are refused
    before that (:func:`tickwork.runtimes.available.refuse_runtime_queues`)."""
    if "executor" in options.roles:
        queues = executor_queues(app, options)
        available.refuse_runtime_queues(app.settings.worker.queues if queues is None else queues)
    sock = probe_sock = None
    api = app.settings.api
    if options.roles & LISTENING_ROLES:
        host = options.host or api.host
        sock = listen(host, options.port if options.port is not None else api.port)
        if api.probe_port is not None:
            try:
                probe_sock = listen(api.probe_host or host, api.probe_port)
            except CannotListen:
                sock.close()
                raise
    started: list[Worker] = []
    try:
        asyncio.run(_serve(app, options, out, (sock, probe_sock), started))
    finally:
        for opened in (sock, probe_sock):
            if opened is not None:
                opened.close()
        for worker in started:  # also after an error: a stuck handler would hold the exit
            exit_past_running_handlers(worker)


def _import_api(roles: frozenset[str]) -> None:
    """Import the API (and the MCP endpoint) modules."""
    import tickwork.api

    if "mcp" in roles:
        import tickwork.mcp.server  # noqa: F401


async def _serve(
    app: App,
    options: ServeOptions,
    out: TextIO,
    socks: tuple[socket.socket | None, socket.socket | None],
    started: list[Worker],
) -> None:
    from tickwork.auth import AuthService

    sock, probe_sock = socks
    await asyncio.to_thread(app.migrate)
    if sock is not None:  # imported here, not in the loop once the services run: the seconds
        await asyncio.to_thread(_import_api, options.roles)  # it takes would hold them up
    # API requests wait this long for a connection, then answer 503 (so do the services
    # sharing the pool, which retry on their own)
    pool = await app.db.async_pool(
        timeout=app.settings.api.database_wait if options.roles & LISTENING_ROLES else None
    )
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    signals = 0
    # one host for every background service of this process: one lease manager (one holder
    # id) for its singletons, which it heartbeats in one statement
    runtimes = available.for_serve(app.settings.runtimes) if "executor" in options.roles else []
    services = app.services(
        pool,
        options.roles - LISTENING_ROLES,
        runtimes,
        queues=executor_queues(app, options),
        concurrency=options.concurrency,
        threads=options.threads,
    )
    started.extend(services.executors)

    def on_signal(signum: int) -> None:
        nonlocal signals
        signals += 1
        log.info("stop requested", extra={"signal": signal.Signals(signum).name})
        stop.set()
        if signals > 1:  # a second signal skips the grace period and the open requests
            services.request_stop(immediate=True)
            for server in servers:
                server.force_exit = True

    servers: list[_Server] = []
    sessions: asyncio.Task[None] | None = None
    handle_stop_signals(loop, on_signal)

    running: list[asyncio.Task[None]] = [
        asyncio.create_task(services.run(), name="tickwork-services")
    ]
    background_stop = asyncio.Event()

    held = contextlib.AsyncExitStack()
    if sock is not None:
        from tickwork.api import create_api, create_webhook_api

        webhooks_only = not options.roles & {"api", "mcp"}

        auth = AuthService(
            pool, app.db.store, app.settings.auth, connect_listener=app.db.connect_listener
        )
        await auth.start()
        sessions = asyncio.create_task(auth.watch_sessions(background_stop), name="sessions")
        running.append(sessions)
        if "api" in options.roles:  # a webhook or MCP process makes no users
            admin_password = app.settings.auth.admin_password
            boot = await auth.bootstrap_admin(
                app.settings.auth.admin_email,
                admin_password.get_secret_value() if admin_password else None,
            )
            if boot.created:
                print(f"created the first administrator: {boot.email}", file=out)
                if boot.generated_password:
                    print(
                        f"  password (shown once, change it after logging in): "
                        f"{boot.generated_password}",
                        file=out,
                    )
        host = options.host or app.settings.api.host
        port = sock.getsockname()[1]  # the one the system picked for port 0
        rest = None if webhooks_only else create_api(app, auth, pool, services.signals)
        served: Any = rest if "api" in options.roles else None
        if served is None and "webhook" in options.roles:
            served = create_webhook_api(app, auth, pool)
        if rest is not None and "mcp" in options.roles:
            from tickwork.mcp.server import http_endpoint

            served = http_endpoint(app.settings, auth, rest, served)
            await held.enter_async_context(served.lifespan())
        api_settings = app.settings.api
        listeners = [("tickwork-api", served, sock, Bounds.of(api_settings))]
        if probe_sock is not None:  # the probes only, with connections of their own
            probes = probes_only(served, other=404)
            listeners.append(
                ("tickwork-probes", probes, probe_sock, Bounds.probe_port(api_settings))
            )
        for name, asgi, listening_sock, bounds in listeners:
            server = _Server(_http_config(asgi, host, listening_sock, bounds, api_settings))
            servers.append(server)
            api_task = asyncio.create_task(server.serve(sockets=[listening_sock]), name=name)
            running.append(api_task)
            listening = asyncio.create_task(server.listening.wait())
            await asyncio.wait([listening, api_task], return_when=asyncio.FIRST_COMPLETED)
            if api_task.done():
                listening.cancel()
                await api_task  # it could not start: say why
        url = app.settings.api.public_url or f"http://{address(host, port)}"
        if "api" in options.roles:
            print(f"tickwork is serving on {url} (API docs: {url}/api/docs)", file=out)
        elif "webhook" in options.roles:
            print(f"tickwork is serving webhooks on {url}/api/webhooks/", file=out)
        if "mcp" in options.roles:
            print(f"MCP endpoint: {url}/mcp (a personal API token as bearer token)", file=out)
        if probe_sock is not None:
            probe_at = address(api_settings.probe_host or host, probe_sock.getsockname()[1])
            print(f"probes: http://{probe_at}/healthz and /readyz", file=out)
    print(f"roles: {', '.join(sorted(options.roles))}", file=out, flush=True)
    if runtimes:
        print(f"runtimes: {', '.join(runtimes)}", file=out, flush=True)

    stopper = asyncio.create_task(stop.wait())
    done, _ = await asyncio.wait([stopper, *running], return_when=asyncio.FIRST_COMPLETED)
    crashed = [t for t in done if t is not stopper and t.exception() is not None]
    log.info("stopping", extra={"reason": "crash" if crashed else "signal"})
    for server in servers:
        server.should_exit = True
    services.request_stop()
    background_stop.set()
    if sessions is not None:  # it holds nothing to finish: not waited for (it polls each 1 s)
        sessions.cancel()
    await asyncio.gather(*running, return_exceptions=True)
    await held.aclose()
    stopper.cancel()
    await app.aclose()
    for task in crashed:
        exc = task.exception()
        assert exc is not None
        raise exc
