"""A task parked until remote work is done, woken from any thread, in batches.

An engine reports that a call is done on one of its own threads. ``Waiting`` is the
awaiting task's side: the engine's thread calls ``wake`` (or another task calls
``end``), and the task, parked in ``park``, resumes. The hand-off to the event loop
is the cost of every remote step, so it is shared: each event loop run has one
``_Wakeups``, a queue of the events to set, and a thread that wakes a task asks the
loop to run ``_Wakeups.set_all`` only if no such run is pending already; calls done
close together cost one hand-off (one write to the loop's wake-up pipe, one loop
iteration), not one each. ``PlacedWaits`` groups the waiting calls by the place
doing their work (a node, a worker) so that all of them can be ended at once.

Invariants: ``wake`` and ``end`` never block and never raise into the engine's
thread (once the event loop has finished they do nothing); every event queued is set
by a run of ``set_all`` that was scheduled after it was queued or was running then;
``park`` cancels the work (``cancel``) if the task is cancelled, or ended, before the
work is done, and the wait leaves its set however it ends.
"""

from __future__ import annotations

import collections
from collections.abc import Callable

import anyio
import anyio.lowlevel

from .._log import logger

__all__ = ["PlacedWaits", "WaitEnded", "Waiting", "call_soon_threadsafe", "park"]


class WaitEnded(Exception):
    """A wait was ended (``Waiting.end``) before its work was done; the work was cancelled."""


class _Wakeups:
    """The events of one event loop run to set, set in one callback per batch (see the
    module docstring)."""

    __slots__ = ("_call_soon", "_events", "_finished", "_scheduled")

    def __init__(self, call_soon: Callable[[Callable[[], object]], object]) -> None:
        self._call_soon = call_soon
        self._events: collections.deque[anyio.Event] = collections.deque()
        self._scheduled = False
        self._finished = False

    def put(self, event: anyio.Event) -> None:
        """From any thread: have the loop set ``event`` soon."""
        if self._finished:
            return
        self._events.append(event)
        # Two threads may both see False and both schedule: set_all then runs twice, harmlessly.
        if not self._scheduled:
            self._scheduled = True
            try:
                self._call_soon(self.set_all)
            except RuntimeError:  # the event loop has finished: nobody waits any more
                self._finished = True
                self._events.clear()

    def set_all(self) -> None:
        """On the loop: set every event queued. Cleared first, so that an event queued
        while this runs either is set here or schedules a run of its own."""
        self._scheduled = False
        events = self._events
        while events:
            events.popleft().set()


_WAKEUPS: anyio.lowlevel.RunVar[_Wakeups | None] = anyio.lowlevel.RunVar("hookrun_wakeups", None)


def _wakeups() -> _Wakeups:
    wakeups = _WAKEUPS.get()
    if wakeups is None:
        wakeups = _Wakeups(call_soon_threadsafe())
        _WAKEUPS.set(wakeups)
    return wakeups


class Waiting:
    """One task waiting on remote work; made in the task's event loop, woken from any thread.

    ``wake`` (also a valid done-callback: it ignores its argument) says the work is
    done; ``end`` says the wait is over although it may not be (``park`` then cancels
    the work and raises ``WaitEnded``).
    """

    __slots__ = ("_event", "_wakeups", "ended")

    def __init__(self) -> None:
        self._event = anyio.Event()
        self._wakeups = _wakeups()
        self.ended = False

    def wake(self, _: object = None) -> None:
        """From any thread: wake the waiting task."""
        self._wakeups.put(self._event)

    def end(self) -> None:
        """End the wait: the waiting task cancels the work and raises ``WaitEnded``."""
        self.ended = True
        self._wakeups.put(self._event)


class PlacedWaits:
    """The calls waiting on remote work, by the place that does it (a node, a worker):
    while a call waits it is in ``calls(place)`` (``park``'s ``waits``), and
    ``end(place)`` ends them all (each cancels its work and raises ``WaitEnded``)."""

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


async def park(
    waiting: Waiting, waits: set[Waiting] | None, done: Callable[[], bool], cancel: Callable[[], object], what: object
) -> None:
    """Wait until ``waiting`` is woken (``done()`` is then true) or ended (then
    ``WaitEnded``). If the task is cancelled or ended before ``done()``, ``cancel()``
    is called (a failure of it is logged, naming ``what``). While it waits,
    ``waiting`` is in ``waits`` (if given)."""
    if waits is not None:
        waits.add(waiting)
    try:
        await waiting._event.wait()
    except BaseException:
        if not done():
            cancel_quietly(what, cancel)
        raise
    finally:
        if waits is not None:
            waits.discard(waiting)
    if waiting.ended and not done():
        cancel_quietly(what, cancel)
        raise WaitEnded


def cancel_quietly(what: object, cancel: Callable[[], object]) -> None:
    """Cancel the work of ``what``; a failure is logged, never raised over the cancellation."""
    try:
        cancel()
    except Exception as exc:
        logger().warning("cancelling %r failed: %r", what, exc, exc_info=exc)


def call_soon_threadsafe() -> Callable[[Callable[[], object]], object]:
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
