"""Await a ``concurrent.futures``-style future from anyio code, on asyncio and trio alike.

``await_future`` is the one bridge between hookrun and a distributed engine: an
engine's future (a ``concurrent.futures.Future``, Ray's ``ref.future()``, a Dask
``Future`` of a synchronous client) completes on one of the engine's threads; the
bridge parks the awaiting task (``_waiting.Waiting``) and the future's done-callback
wakes it through the event loop's own thread-safe, non-blocking hand-off, shared by
the calls done close together. No thread waits on the future, and cancelling the
awaiting task cancels the future.

Invariants: the done-callback never blocks the engine's thread and never raises into
it (an event loop that has already finished is ignored); the caller is freed as soon
as it is cancelled; the engine's own exception is re-raised unchanged.
"""

from __future__ import annotations

import concurrent.futures
from collections.abc import Callable
from typing import Any, Protocol, TypeVar, runtime_checkable

import anyio
import anyio.lowlevel

from ._waiting import Waiting, park

__all__ = ["FutureLike", "await_future", "wait_future"]

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


async def wait_future(
    future: FutureLike[T_co], cancel: Callable[[], object] | None, waits: set[Waiting] | None = None
) -> T_co:
    """``await_future`` without the check of ``future``'s type; while it waits, its
    ``Waiting`` is in ``waits`` (if given), so that others can end it (``WaitEnded``)."""
    if future.done():
        await anyio.lowlevel.checkpoint()
        return future.result()
    waiting = Waiting()
    future.add_done_callback(waiting.wake)
    stop = cancel if cancel is not None else getattr(future, "cancel", _nothing)
    await park(waiting, waits, future.done, stop, future)
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


def _nothing() -> None:
    """The cancel of a future that cannot be cancelled."""
