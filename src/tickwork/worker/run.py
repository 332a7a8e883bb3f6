"""Running a worker as the main job of a process, with signal handling."""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import sys
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING

from tickwork.db import embedded

if TYPE_CHECKING:
    from tickwork.services.host import ServiceHost
    from tickwork.worker.worker import Worker

log = logging.getLogger("tickwork.worker")

STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)
"""Signals that stop a worker or serve process gracefully (SIGHUP: its terminal closed)."""
_early: list[int] = []  # stop signals that arrived before the event loop took them over


def catch_stop_signals_early() -> None:
    """From now until the process's event loop handles them, a stop signal is remembered
    instead of killing the process half-started (the default action, exit -15 with nothing
    cleaned up): the loop acts on it as soon as it runs (:func:`handle_stop_signals`), so
    a process told to stop while it starts stops cleanly once it has. A second one aborts
    the start (``KeyboardInterrupt``)."""
    for signum in _stop_signals():
        signal.signal(signum, _remember)


def _stop_signals() -> list[int]:
    """The stop signals this process was not started ignoring (``nohup`` ignores SIGHUP: it
    stays ignored)."""
    return [s for s in STOP_SIGNALS if signal.getsignal(s) is not signal.SIG_IGN]


def _remember(signum: int, frame: object) -> None:
    if _early:
        raise KeyboardInterrupt
    _early.append(signum)


def handle_stop_signals(loop: asyncio.AbstractEventLoop, on_signal: Callable[[int], None]) -> None:
    """Send every stop signal to ``on_signal`` on ``loop``, the ones remembered since
    :func:`catch_stop_signals_early` first."""
    for signum in _stop_signals():
        loop.add_signal_handler(signum, on_signal, signum)
    for early in _early:
        loop.call_soon(on_signal, early)
    _early.clear()


def run_blocking(
    start: Callable[[], Awaitable[ServiceHost]], *, close: Callable[[], Awaitable[None]]
) -> None:
    """Run the services host that ``start`` builds until SIGTERM/SIGINT, then ``close``. The
    first signal drains gracefully (in-flight attempts get the grace period, the rest are
    released to PENDING); a second one ends the grace period, even one already begun."""
    started: list[ServiceHost] = []
    try:
        asyncio.run(_main(start, close, started))
    finally:  # also after an error: a stuck handler thread would hold the exit forever
        for host in started:
            if host.executor is not None:
                exit_past_running_handlers(host.executor)


def exit_past_running_handlers(worker: Worker) -> None:
    """Once ``worker`` has stopped: if a sync handler is still running, end the process now
    (its attempt was already released, and a thread cannot be interrupted), after stopping
    the embedded PostgreSQL it may have started, which ``os._exit`` would leave running. The
    thread ends with the process, mid-call: no ``finally`` of the handler runs. (Without this
    the interpreter would join the pool's threads at exit: it would wait for the handler.)
    With no handler running, return: the process exits normally."""
    running = worker.handlers_running
    if not running:
        return
    log.warning("exiting with sync handlers still running", extra={"handlers": running})
    embedded.stop()
    logging.shutdown()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


async def _main(
    start: Callable[[], Awaitable[ServiceHost]],
    close: Callable[[], Awaitable[None]],
    started: list[ServiceHost],
) -> None:
    try:
        host = await start()
        started.append(host)
        signals_seen = 0

        def on_signal(signum: int) -> None:
            nonlocal signals_seen
            signals_seen += 1
            log.info("stop requested", extra={"signal": signal.Signals(signum).name})
            host.request_stop(immediate=signals_seen > 1)

        handle_stop_signals(asyncio.get_running_loop(), on_signal)
        await host.run()
    finally:
        await close()
