"""The threads sync handlers run in, and how many of them are running a handler right now.

A pool's threads outlive the calls they ran: they wait idle for the next one, and after
``shutdown(wait=False)`` they take a moment to end. So the threads alive say nothing about
whether a handler is still running; this pool counts the calls themselves.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, ParamSpec, TypeVar

__all__ = ["HandlerThreads"]

P = ParamSpec("P")
T = TypeVar("T")


class HandlerThreads(ThreadPoolExecutor):
    """A :class:`ThreadPoolExecutor` that knows how many of its calls are running."""

    def __init__(self, max_workers: int, thread_name_prefix: str) -> None:
        super().__init__(max_workers=max_workers, thread_name_prefix=thread_name_prefix)
        self._running = 0
        self._outstanding = 0
        self._count_lock = threading.Lock()

    @property
    def running(self) -> int:
        """Calls started and not returned yet (a handler that ignores its interrupt stays
        counted until it returns)."""
        with self._count_lock:
            return self._running

    @property
    def outstanding(self) -> int:
        """Calls submitted and not returned yet: running or waiting for a thread."""
        with self._count_lock:
            return self._outstanding

    def submit(self, fn: Callable[P, T], /, *args: P.args, **kwargs: P.kwargs) -> Future[T]:
        def counted() -> T:
            with self._count_lock:
                self._running += 1
            try:
                return fn(*args, **kwargs)
            finally:
                with self._count_lock:
                    self._running -= 1
                    self._outstanding -= 1

        with self._count_lock:
            self._outstanding += 1
        try:
            future = super().submit(counted)
        except BaseException:  # refused (shut down): it will never run
            with self._count_lock:
                self._outstanding -= 1
            raise
        # a call cancelled before it started never runs counted()
        future.add_done_callback(self._cancelled)
        return future

    def _cancelled(self, future: Future[Any]) -> None:
        if future.cancelled():
            with self._count_lock:
                self._outstanding -= 1
