"""``on_io_loop``: run a coroutine on a Dask client's IO loop and await it from any event loop.

A synchronous client does its work on its own IO-loop thread (a tornado IOLoop over
an asyncio loop). hookrun hands that loop the coroutine of a step (submit a task and
fetch its result, an actor call) and is woken when it is done: one hand-off there,
one back. The coroutine runs as a task of the IO loop whose end wakes the caller's
parked wait (``hookrun.remote._waiting``) itself, where
``asyncio.run_coroutine_threadsafe`` would add a ``concurrent.futures.Future`` (a
lock and a condition) and two more callbacks per step on the IO thread.

With ``together=True`` (step tasks) the hand-off is shared, as the wake-up back is: the
coroutines that one event loop run hands one IO loop are queued (``_HandOver``) and
handed over in one call, made once the event loop has run the tasks ready with them,
so the steps that lanes start together wake the IO thread once and reach it together
(one write of their tasks to the scheduler, not the first alone and the rest after
Dask's batching interval). An actor call's request is on its way before it is handed
over (Dask sends it from the caller's thread), so it is handed over at once.

Invariants: an awaitable handed over is awaited or closed, never dropped unawaited, and
starts in (a copy of) its caller's context, as ``call_soon_threadsafe`` would start it;
once the caller is cancelled (or its wait ended) the IO loop's task is cancelled, or
never started if it had not started yet, after ``cancel`` was called; the
awaitable's exception is re-raised in the caller as it is (a cancellation on the IO
loop as ``concurrent.futures.CancelledError``, never as the caller's own
cancellation); a closed IO loop is ``ClosedClientError`` (one found closed at a shared
hand-over fails every call queued for it).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import contextvars
import weakref
from collections.abc import Awaitable, Callable
from typing import Any

import anyio.lowlevel
from distributed.client import ClosedClientError

from ..remote._waiting import Waiting, call_soon_threadsafe, park

__all__ = ["on_io_loop"]


class _OnIoLoop(Waiting):
    """The caller's wait, and the IO loop's task that ends it (see the module docstring)."""

    __slots__ = ("_io_loop", "_stopped", "_task", "done", "error", "value")

    def __init__(self, io_loop: asyncio.AbstractEventLoop) -> None:
        super().__init__()
        self._io_loop = io_loop
        self._task: asyncio.Task[None] | None = None
        self._stopped = False
        self.done = False
        self.value: Any = None
        self.error: BaseException | None = None

    def start(self, awaitable: Awaitable[Any]) -> None:
        """On the IO loop: run ``awaitable`` unless the caller stopped waiting first."""
        if self._stopped:
            _close(awaitable)
        else:
            self._task = self._io_loop.create_task(self._run(awaitable))

    async def _run(self, awaitable: Awaitable[Any]) -> None:
        try:
            self.value = await awaitable
        except BaseException as exc:  # the caller's to raise (a cancellation too: stop())
            self.error = exc
        finally:
            self.done = True
            self.wake()

    def is_done(self) -> bool:
        return self.done

    def fail(self, error: BaseException, awaitable: Awaitable[Any]) -> None:
        """On the caller's thread: the awaitable never ran (closed here); ``error`` is raised."""
        _close(awaitable)
        self.error = error
        self.done = True
        self.wake()

    def stop(self) -> None:
        """On the caller's thread: cancel the IO loop's task (or keep it from starting)."""
        self._stopped = True
        with contextlib.suppress(RuntimeError):  # the IO loop is closed: nothing runs there any more
            self._io_loop.call_soon_threadsafe(self._cancel)

    def _cancel(self) -> None:
        if self._task is not None:
            self._task.cancel()


async def on_io_loop(
    loop: Any, awaitable: Awaitable[Any], *, cancel: Callable[[], object] | None = None,
    waits: set[Waiting] | None = None, together: bool = False,
) -> Any:
    """Await ``awaitable`` (a coroutine, an ``ActorFuture``) on a Dask client's IO loop
    (``loop``: a tornado IOLoop over an asyncio loop) and return its result. Cancelling
    the caller calls ``cancel`` first, then cancels it there; while it waits the call is
    in ``waits`` (if given), where ending it does the same and raises ``WaitEnded``. A
    closed IO loop is ``ClosedClientError``. ``together``: handed over with the others
    the event loop hands that IO loop meanwhile (see the module docstring)."""
    io_loop: asyncio.AbstractEventLoop = loop.asyncio_loop
    if io_loop.is_closed():  # the client's IO loop is closed
        _close(awaitable)
        raise ClosedClientError("the Dask client's IO loop is closed")
    waiting = _OnIoLoop(io_loop)
    if together:
        _hand_over(io_loop).put(waiting, awaitable)
    else:
        try:
            io_loop.call_soon_threadsafe(waiting.start, awaitable)
        except RuntimeError as exc:  # the client's IO loop closed meanwhile
            _close(awaitable)
            raise ClosedClientError(f"the Dask client's IO loop is closed ({exc})") from exc

    def stop() -> None:
        if cancel is not None:
            cancel()
        waiting.stop()

    await park(waiting, waits, waiting.is_done, stop, awaitable)
    error = waiting.error
    if error is None:
        return waiting.value
    if isinstance(error, asyncio.CancelledError):  # not the caller's cancellation
        raise concurrent.futures.CancelledError() from error
    raise error


class _HandOver:
    """The coroutines one event loop run hands one IO loop, handed over in one call per
    batch (see the module docstring). Used on the event loop's thread only; between
    batches it holds no reference to the IO loop (its key in ``_HAND_OVERS``)."""

    __slots__ = ("_call_soon", "_queue", "_scheduled")

    def __init__(self) -> None:
        self._call_soon = call_soon_threadsafe()  # the event loop's own: runs after the tasks ready now
        self._queue: list[tuple[contextvars.Context, _OnIoLoop, Awaitable[Any]]] = []
        self._scheduled = False

    def put(self, waiting: _OnIoLoop, awaitable: Awaitable[Any]) -> None:
        """Queue ``awaitable``, to start on the IO loop in the caller's context (a copy)."""
        self._queue.append((contextvars.copy_context(), waiting, awaitable))
        if not self._scheduled:
            self._scheduled = True
            self._call_soon(self._hand_over)

    def _hand_over(self) -> None:
        self._scheduled = False
        queued, self._queue = self._queue, []
        if not queued:
            return
        try:
            queued[0][1]._io_loop.call_soon_threadsafe(_start_all, queued)
        except RuntimeError as exc:  # the client's IO loop closed meanwhile
            error = ClosedClientError(f"the Dask client's IO loop is closed ({exc})")
            for _, waiting, awaitable in queued:
                waiting.fail(error, awaitable)


def _start_all(queued: list[tuple[contextvars.Context, _OnIoLoop, Awaitable[Any]]]) -> None:
    for context, waiting, awaitable in queued:
        context.run(waiting.start, awaitable)


#: Per event loop run: the hand-over to each IO loop (gone with its IO loop).
_HAND_OVERS: anyio.lowlevel.RunVar[weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _HandOver] | None] = (
    anyio.lowlevel.RunVar("hookrun_dask_hand_overs", None)
)


def _hand_over(io_loop: asyncio.AbstractEventLoop) -> _HandOver:
    hand_overs = _HAND_OVERS.get()
    if hand_overs is None:
        hand_overs = weakref.WeakKeyDictionary()
        _HAND_OVERS.set(hand_overs)
    hand_over = hand_overs.get(io_loop)
    if hand_over is None:
        hand_over = hand_overs[io_loop] = _HandOver()
    return hand_over


def _close(awaitable: Awaitable[Any]) -> None:
    close = getattr(awaitable, "close", None)
    if callable(close):
        close()
