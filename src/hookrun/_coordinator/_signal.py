"""``StopSignal``: a coordinator's stop flag and first-error slot, and waiting on them.

Invariants:

* The recorded exception is the **first real** exception given to ``record``
  (``None`` stands for a plain stop request); it is only replaced after ``clear()``.
* ``stopped`` only goes from False to True, except through ``clear()``.
* Nothing polls: ``wait_until`` parks on an ``anyio.Event`` that ``notify`` sets;
  every change of what a waiter may test (a stop request here, a task finishing in
  the coordinator) calls ``notify``.

No tasks and no I/O: the coordinator (``_tasks.py``) owns one signal and hosts the
tasks that record into it. Beside it: which exception types only request stop
(``clean_types``), the checkpoint a wait that need not wait still makes, and
``_StopOnException``, the context manager that turns an error into a stop request.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from types import TracebackType

import anyio

from .._errors import CLEAN_STOP_TYPES
from .._log import logger
from .._validate import exception_types

__all__ = ["StopSignal", "checkpoint", "clean_types"]


class StopSignal:
    """The stop flag, the first real exception and its traceback, and one change event."""

    __slots__ = ("_changed", "exception", "stopped", "traceback", "watcher")

    def __init__(self) -> None:
        self.stopped = False
        #: Called whenever the flag is set (the monitored session's: ``watch_stops``).
        self.watcher: Callable[[], None] | None = None
        self.exception: BaseException | None = None
        self.traceback: TracebackType | None = None
        self._changed: anyio.Event | None = None

    def record(self, ex: BaseException | None) -> None:
        """Set the flag; keep ``ex`` if it is the first real exception (None: a plain stop)."""
        if ex is not None and self.exception is None:
            self.exception, self.traceback = ex, ex.__traceback__
        elif ex is not None:
            logger().debug("Coordinator ignores %r: it already recorded %r", ex, self.exception)
        self.stopped = True
        if self.watcher is not None:
            self.watcher()
        self.notify()

    def raise_recorded(self) -> None:
        """Raise the recorded exception, with its original traceback, if any."""
        if self.exception is not None:
            raise self.exception.with_traceback(self.traceback)

    def clear(self) -> None:
        """Forget the stop request and the recorded exception."""
        self.stopped = False
        self.exception = None
        self.traceback = None

    def notify(self) -> None:
        """Wake every ``wait_until``: something they may test has changed."""
        changed, self._changed = self._changed, None
        if changed is not None:
            changed.set()

    async def wait_until(self, condition: Callable[[], bool]) -> None:
        """Wait, without polling, until ``condition()`` holds; always a checkpoint."""
        if condition():
            await checkpoint()
        while not condition():
            if self._changed is None:
                self._changed = anyio.Event()
            await self._changed.wait()


def clean_types(types: Iterable[type[BaseException]] | None) -> tuple[type[BaseException], ...]:
    """The exception types that only request stop (``Coordinator(clean_stop_exception_types=...)``)."""
    if types is None:
        return CLEAN_STOP_TYPES
    return exception_types(types, "Coordinator(clean_stop_exception_types=...)")


async def checkpoint() -> None:
    """anyio's checkpoint, imported on first use: keeps `import hookrun` light."""
    from anyio.lowlevel import checkpoint

    await checkpoint()


class _StopOnException:
    """The context manager returned by ``Coordinator.stop_on_exception()``."""

    __slots__ = ("_request_stop",)

    def __init__(self, request_stop: Callable[[BaseException], None]) -> None:
        self._request_stop = request_stop

    def __enter__(self) -> None:
        return None

    def __exit__(self, exc_type: object, exc: BaseException | None, tb: object) -> bool:
        if isinstance(exc, Exception):
            self._request_stop(exc)
            return True
        return False

    async def __aenter__(self) -> None:
        return None

    async def __aexit__(self, exc_type: object, exc: BaseException | None, tb: object) -> bool:
        return self.__exit__(exc_type, exc, tb)
