"""Running a worker as the main job of a process, with signal handling."""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import sys

from tickwork.db import embedded
from tickwork.worker.worker import Worker

log = logging.getLogger("tickwork.worker")


def run_blocking(worker: Worker) -> None:
    """Run ``worker`` until SIGTERM/SIGINT. The first signal drains gracefully (in-flight
    attempts get the grace period, the rest are released to PENDING); a second one skips
    the grace period."""
    asyncio.run(_main(worker))
    exit_past_running_handlers(worker)


def exit_past_running_handlers(worker: Worker) -> None:
    """Once ``worker`` has stopped: if a sync handler is still running, end the process now
    (its attempt was already released, and a thread cannot be interrupted), after stopping
    the embedded PostgreSQL it may have started, which ``os._exit`` would leave running. With
    no handler running, return: the process exits normally."""
    running = worker.handlers_running
    if not running:
        return
    log.warning("exiting with sync handlers still running", extra={"handlers": running})
    embedded.stop()
    logging.shutdown()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


async def _main(worker: Worker) -> None:
    loop = asyncio.get_running_loop()
    signals_seen = 0

    def on_signal(signum: int) -> None:
        nonlocal signals_seen
        signals_seen += 1
        log.info("stop requested", extra={"signal": signal.Signals(signum).name})
        worker.request_stop(immediate=signals_seen > 1)

    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, on_signal, signum)
    await worker.run()
