"""Await a ``concurrent.futures``-style future from anyio code, on asyncio and trio alike.

``await_future`` is the one bridge between hookrun and a distributed engine: an
engine's future (a ``concurrent.futures.Future``, Ray's ``ref.future()``, a Dask
``Future`` of a synchronous client) completes on one of the engine's threads; the
bridge parks the awaiting task on an ``anyio.Event`` that the future's done-callback
sets through the event loop's own thread-safe, non-blocking hand-off. No thread
waits on the future, and cancelling the awaiting task cancels the future.

Invariants: the done-callback never blocks the engine's thread and never raises into
it (an event loop that has already finished is ignored); the caller is freed as soon
as it is cancelled; the engine's own exception is re-raised unchanged.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
from collections.abc import Callable
from typing import Any, Protocol, TypeVar, runtime_checkable

import anyio
import anyio.lowlevel

from .._log import logger

__all__ = ["FutureLike", "PlacedWaits", "WaitEnded", "Waiting", "await_future", "wait_future"]

T_co = TypeVar("T_co", covariant=True)


@runtime_checkable
class FutureLike(Protocol[T_co]):
    """What ``await_future`` needs from a future (``concurrent.futures.Future`` has it)."""

    def done(self) -> bool: ...

    def result(self, timeout: float | None = None) -> T_co: ...

    def add_done_callback(self, fn: Callable[[Any], object], /) -> None: ...


async def await_future(
    future: FutureLike[T_co], *, cancel: Callable[[], object] | None = None
) -> T_co:
    """Wait for ``future`` without parking a thread and return its result.

    ``future`` is anything with ``done()``, ``result()`` and ``add_done_callback()``
    (a ``concurrent.futures.Future``, ``ray.ObjectRef.future()``, a future of a
    synchronous ``distributed.Client``). Its exception, if any, is raised as it is.

    If the awaiting task is cancelled (or times out) before the future is done,
    ``cancel()`` is called, by default ``future.cancel()``, and the cancellation
    propagates at once, without waiting for the future. Pass ``cancel`` to also
    stop the remote work, for example ``lambda: ray.cancel(ref)``.

    Args:
        future: The future to wait for (``done()``, ``result()`` and
            ``add_done_callback()``).
        cancel: Called if the awaiting task is cancelled first. ``None``:
            ``future.cancel()``.

    Returns:
        The future's result.
    """
    _check_future(future)
    return await wait_future(future, cancel)


class WaitEnded(Exception):
    """A wait was ended (``Waiting.end``) before its future was done; the future was cancelled."""


class Waiting:
    """One task waiting on a future: the future's done-callback and ``end`` wake it.

    ``wake`` and ``end`` may be called from any thread; once the event loop has
    finished they do nothing.
    """

    __slots__ = ("_call_soon", "_set", "ended")

    def __init__(self, set_event: Callable[[], object], call_soon: Callable[[Callable[[], object]], object]) -> None:
        self._set = set_event
        self._call_soon = call_soon
        self.ended = False

    def wake(self, _: object = None) -> None:
        # RuntimeError: the event loop has finished, so nobody waits any more.
        with contextlib.suppress(RuntimeError):
            self._call_soon(self._set)

    def end(self) -> None:
        """End the wait: the waiting task cancels the future and raises ``WaitEnded``."""
        self.ended = True
        self.wake()


class PlacedWaits:
    """The calls waiting on remote work, by the place that does it (a node, a worker):
    while a call waits it is in ``calls(place)`` (``wait_future``'s ``waits``), and
    ``end(place)`` ends them all (each cancels its future and raises ``WaitEnded``)."""

    __slots__ = ("_calls",)

    def __init__(self) -> None:
        self._calls: dict[str, set[Waiting]] = {}

    def calls(self, place: str) -> set[Waiting]:
        """The calls waiting on ``place`` now."""
        return self._calls.setdefault(place, set())

    def end(self, place: str) -> int:
        """End every call waiting on ``place``; how many there were."""
        waiting = list(self._calls.get(place, ()))
        for call in waiting:
            call.end()
        return len(waiting)


async def wait_future(
    future: FutureLike[T_co], cancel: Callable[[], object] | None, waits: set[Waiting] | None = None
) -> T_co:
    """``await_future`` without the check of ``future``'s type; while it waits, its
    ``Waiting`` is in ``waits`` (if given), so that others can end it (``WaitEnded``)."""
    if future.done():
        await anyio.lowlevel.checkpoint()
        return future.result()
    done = anyio.Event()
    waiting = Waiting(done.set, _call_soon_threadsafe())
    future.add_done_callback(waiting.wake)
    if waits is not None:
        waits.add(waiting)
    try:
        await done.wait()
    except BaseException:
        if not future.done():
            _cancel_quietly(future, cancel)
        raise
    finally:
        if waits is not None:
            waits.discard(waiting)
    if waiting.ended and not future.done():
        _cancel_quietly(future, cancel)
        raise WaitEnded
    return future.result()


def _check_future(future: object) -> None:
    # The exact type first: Ray's ref.future() is one, and a runtime protocol check costs
    # microseconds on every remote step.
    if type(future) is concurrent.futures.Future or isinstance(future, FutureLike):
        return
    hint = ""
    if callable(getattr(future, "future", None)):
        hint = f"; {type(future).__name__} has a .future() method: pass its result"
    raise TypeError(
        "await_future needs a concurrent.futures-style future (done(), result() and "
        f"add_done_callback()), got {type(future).__name__}{hint}"
    )


def _call_soon_threadsafe() -> Callable[[Callable[[], object]], object]:
    """The running event loop's non-blocking, thread-safe 'run this callback soon'."""
    native = anyio.lowlevel.current_token().native_token
    call_soon = getattr(native, "call_soon_threadsafe", None)  # an asyncio event loop
    if call_soon is None:
        call_soon = getattr(native, "run_sync_soon", None)  # a trio token
    if call_soon is None:
        raise RuntimeError(
            f"await_future: the event loop's token {type(native).__name__} offers no "
            "thread-safe call_soon (neither call_soon_threadsafe nor run_sync_soon)"
        )
    return call_soon  # type: ignore[no-any-return]


def _cancel_quietly(future: object, cancel: Callable[[], object] | None) -> None:
    """Cancel the future's work; a failure is logged, never raised over the cancellation."""
    if cancel is None:
        cancel = getattr(future, "cancel", None)
        if cancel is None:
            return
    try:
        cancel()
    except Exception as exc:
        logger().warning("cancelling %r failed: %r", future, exc, exc_info=exc)
