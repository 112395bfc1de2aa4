"""One step task of a ``DaskStepSession``: submitted and fetched on the client's IO loop.

A synchronous client does its work on its own IO-loop thread; the event loop only hands
it calls. Called from the event loop, ``Client.submit`` hands the scheduler message
over to the IO loop, ``Future.add_done_callback`` runs its callback on yet another
thread (Dask's callback thread), ``Future.result()`` blocks the event loop for the
whole fetch (a round trip to the scheduler), and the future's release at the end is
one more hand-over. On a machine whose cores the scheduler and workers share, those
hand-overs and the blocked event loop cost more than the step's own overhead. So the
step is one coroutine on the IO loop (submit, then fetch the result as
``Future.result()`` does), and the event loop hands it over once, with the steps
started together (``on_io_loop(together=True)``), and is woken once through the
engine-free bridge.

A step's future is kept (``Kept``, one per session) until the session's next task is
submitted, or ``RELEASE_AFTER`` seconds at most. The client sends the scheduler its
messages in batches, at most one batch per interval (10 ms): a release sent as soon as
a result is fetched goes out alone at once, and the next step's task, submitted a
moment later, then waits out the interval. Released after that submission, it goes in
the same batch, as it does under ``distributed.as_completed``, whose loop drops a
future once it has submitted the next task. The session's close releases it at once
(``close_kept``: on the IO loop, awaited until the client has let go of its key) and
closes the ``Kept``, which keeps nothing after that: a step still in flight is
released when it ends, as a step without a ``Kept`` is.

Invariants: the feed is the caller's copy, taken before the hand-over; once the caller
is cancelled, a task not yet submitted never is, and one submitted is cancelled on the
scheduler (``Future.cancel``) before the cancellation propagates, as before; a kept
future is one whose result was fetched, touched on the IO loop only (while the
client runs), and released by the session's next submission, its timer or its close,
whichever comes first; a close cancelled while it waits still hands the release to
the IO loop, and one whose client is closing or closed (its IO loop may be gone)
drops the future on the caller's thread, where the client's close releases its keys;
a client that is closing or closed is called from the caller's thread (its IO loop
may be gone: ``Client.submit`` raises ``ClosedClientError`` there, or the task is
awaited through ``await_dask``); errors are classified by ``await_dask``'s rules.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
from collections.abc import Callable
from typing import Any

from distributed import Client, Future
from distributed.client import ClosedClientError

from ._errors import await_dask, is_recoverable, unavailable
from ._io_loop import on_io_loop

__all__ = ["RELEASE_AFTER", "Kept", "close_kept", "run_task"]

#: Seconds a step's future is kept at most after its result was fetched (see the module docstring).
RELEASE_AFTER = 0.05


class Kept:
    """The future of a session's latest step whose result was fetched, kept until its
    next task is submitted (see the module docstring). Used on the IO loop only, but
    for ``abandon``."""

    __slots__ = ("_closed", "_future", "_timer")

    def __init__(self) -> None:
        self._future: Future[Any] | None = None
        self._timer: asyncio.TimerHandle | None = None
        self._closed = False

    def keep(self, future: Future[Any]) -> None:
        """Keep ``future`` (releasing the one kept before) until ``release``, or the timer;
        once closed, keep nothing (the caller's reference is the last one)."""
        if self._closed:
            return
        self.release()
        self._future = future
        self._timer = asyncio.get_running_loop().call_later(RELEASE_AFTER, self.release)

    def release(self) -> None:
        """Let go of the kept future, if any (the client then releases its key)."""
        timer, self._timer = self._timer, None
        if timer is not None:
            timer.cancel()
        self._future = None

    def close(self) -> None:
        """Release the kept future now (its key release is queued on this IO loop) and
        keep nothing from now on."""
        self._closed = True
        future = self._future
        self.release()
        if future is not None:
            future.release()  # at once, whatever else may still refer to it

    def abandon(self) -> None:
        """On the caller's thread, once the client is closing or closed: keep nothing
        from now on, and drop the kept future (the client's close releases its key)."""
        self._closed = True
        self._future = None


class _Task:
    """The task of one step, shared by the IO loop (which submits it) and the caller
    (which may cancel it first): the lock makes "cancelled" and "submitted" exclusive."""

    __slots__ = ("cancelled", "future", "lock")

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.cancelled = False
        self.future: Future[Any] | None = None

    async def run(self, client: Client, fn: Callable[..., Any], feed: dict[Any, Any], kept: Kept | None = None) -> Any:
        """On the IO loop: submit ``fn(feed)`` unless cancelled, and fetch its result
        (its future then kept in ``kept``, where the submission released the one before)."""
        with self.lock:
            if self.cancelled:
                return None  # nobody waits for it any more
            future = self.future = client.submit(fn, feed, pure=False)
        if kept is not None:
            kept.release()  # after the submission: its message goes first
        try:
            value = await future._result()  # what Future.result() runs on the IO loop
            if kept is not None:
                kept.keep(future)
            return value
        finally:
            with self.lock:
                self.future = None  # the last reference dies here: released on the IO loop

    def cancel(self) -> None:
        """On the caller's thread: no submit from now on; cancel a task already submitted."""
        with self.lock:
            self.cancelled = True
            future = self.future
        if future is not None:
            future.cancel()


async def run_task(
    client: Client, fn: Callable[..., Any], feed: dict[Any, Any], what: str, *, own_client: bool,
    kept: Kept | None = None,
) -> Any:
    """The result of the task ``fn(feed)`` (``pure=False``) on ``client``, its future
    then kept in ``kept`` (if given); recoverable errors become ``UnavailableError``
    naming ``what`` (see the module docstring)."""
    try:
        if client.status in ("closing", "closed"):  # its IO loop is ending or gone: as Dask would
            return await await_dask(client.submit(fn, feed, pure=False), what, own_client=own_client)
        task = _Task()
        # ``task.cancel`` first: the coroutine, once cancelled, lets go of the future.
        return await on_io_loop(client.loop, task.run(client, fn, feed, kept), cancel=task.cancel, together=True)
    except Exception as exc:
        if is_recoverable(exc, own_client=own_client):
            raise unavailable(what, exc) from exc
        raise


async def close_kept(client: Client | None, kept: Kept) -> None:
    """Close ``kept`` (the session's, whose client is ``client``): on the IO loop, and
    return once the client has let go of the key it kept. Cancelled meanwhile, the
    close is still handed to the IO loop (see the module docstring)."""
    if client is None or client.status in ("closing", "closed"):
        kept.abandon()
        return
    loop: Any = client.loop  # a tornado IOLoop over an asyncio loop
    io_loop: asyncio.AbstractEventLoop = loop.asyncio_loop

    def close_soon() -> None:  # the caller is cancelled: close it there all the same
        try:
            io_loop.call_soon_threadsafe(kept.close)
        except RuntimeError:  # the IO loop is closed: nothing runs there any more
            kept.abandon()

    try:
        await on_io_loop(loop, _close_on_io_loop(kept), cancel=close_soon)
    except (ClosedClientError, concurrent.futures.CancelledError):  # the IO loop closed or ended meanwhile
        kept.abandon()


async def _close_on_io_loop(kept: Kept) -> None:
    kept.close()
    # The client's key release, queued on this loop by the close, runs before this resumes.
    await asyncio.sleep(0)
