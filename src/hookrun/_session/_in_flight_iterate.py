"""``MonitoredSession.iterate`` with steps in flight: ``InFlightIterator`` keeps up to N
steps running and yields their results in feed order (``ordered=False``: as they end).
This module holds the iterator and its pipeline (``_Pipeline``: the steps admitted and
not yielded yet, the admission and the runners' job), everything a step's path goes
through; how the iteration ends otherwise than by its feeds or a stop (an error, a
cancellation, ``aclose()``, the caller letting go of it) is in
``_in_flight_iterate_exits.py``, functions of the pipeline off that path.

Steps run in runner tasks of the session's task group (``_runners.py``), which admit
them too, one admission at a time: the next feed, a free lane, the step's number and its
``before_run`` phase, so numbers follow the feeds. The runner that admitted a step runs
the rest of it (the raw run, ``after_run``) right after the admission; so each raw run
starts before the next step is admitted, and a fatal error in an admission cancels the
steps before it before any later raw run starts. A runner whose step ended admits the
next one itself when no admission is under way (in the same job, switched to a fresh
context); when one is under way the job parks (``ParkedJobs``, which says why) and is
handed a later one. The steps a runner runs one after another share one cancel scope,
the step's scope while it runs (another step's fatal error cancels it): a scope is
entered anew only after one was cancelled, where one a step cost about a tenth of a
step's time with 64 steps of 1 ms in flight on asyncio. The iterating task starts an
admission only when none is under way and there is room (at the first ``__anext__``, or
once its results made room). An admission that ends whole starts the next while lanes
are free.

Admission goes on while the caller's loop body runs: up to N steps in flight and at most
``2 N`` admitted and not yet yielded. Each step runs in a fresh copy of the iterating
task's context as of its latest ``__anext__``. A wait for a feed (async feeds) or for a
lane held by another caller of the session is under a cancel scope the iterator cancels
when it ends, so no admission outlives it; a stop or a close of the session, asked from
any task, cancels it too while it waits for a feed (``_next_feed``, as with one lane).

A step that a stop kept from being admitted, or that met a clean-stop error, yields
nothing; a step's clean-stop error stops the session (its runner requests the stop as
the step ends, as one lane's iterator does); once a stop is requested no step is
admitted, the steps in flight are drained and iteration ends. An error taking a feed is
raised in that feed's place, after the results before it. The other ways out (an error,
a cancellation, ``aclose()``, the caller letting go of the iterator) are
``_in_flight_iterate_exits.py``'s, which cancels and waits for the steps in flight and
says which error comes out; they are off the steps' path.
"""

from __future__ import annotations

import contextlib
from collections import deque
from collections.abc import Coroutine
from contextvars import Context, copy_context
from typing import TYPE_CHECKING, Any

import anyio

from .._dispatch._wake import Waker
from .._errors import CLEAN_STOP_TYPES
from ._in_flight_iterate_exits import close, dropped, failed, left
from ._in_flight_step import Rescope, Slot, step_body
from ._iterate import StepIterator
from ._runners import InContext, ParkedJobs, StepRunners
from ._state import State

if TYPE_CHECKING:
    from ._in_flight import InFlight
    from ._in_flight_step import Step

__all__ = ["InFlightIterator"]

_OPEN = State.OPEN  # read at each admission: a module global is cheaper than an enum attribute


class InFlightIterator(StepIterator):
    """The async iterator ``iterate`` returns on a session with steps in flight: the
    caller's handle on its pipeline (``_Pipeline``). The session's tasks hold the pipeline,
    never this handle, so the handle goes as soon as the caller's loop lets go of it
    (``__del__``: ``dropped``)."""

    __slots__ = ("_pipeline",)

    def __init__(self, engine: InFlight, fetches: object, feeds: object, *, ordered: bool) -> None:
        self._pipeline = _Pipeline(engine, fetches, feeds, ordered=ordered)

    def __repr__(self) -> str:
        return repr(self._pipeline)

    def __anext__(self) -> Coroutine[Any, Any, Any]:
        return self._pipeline.__anext__()

    def aclose(self) -> Coroutine[Any, Any, None]:
        """Stop iterating: cancel the steps in flight and wait for them; a task iterating
        meanwhile ends its loop (as the feeds' end would end it)."""
        return close(self._pipeline)

    def __del__(self) -> None:
        pipeline = getattr(self, "_pipeline", None)  # None: the constructor failed
        if pipeline is not None:
            dropped(pipeline)


class _Pipeline(StepIterator):
    """What an ``InFlightIterator`` iterates: its steps, its admission and its runners."""

    _copy_feeds = True  # the steps in flight keep their feeds

    __slots__ = (
        "_admitting", "_closed", "_context", "_dropped", "_engine", "_exhausted", "_on_admitted", "_on_freed", "_ordered",
        "_parked", "_pending", "_runners", "_wake", "_wakes", "_window",
    )

    def __init__(self, engine: InFlight, fetches: object, feeds: object, *, ordered: bool) -> None:
        super().__init__(engine.s, fetches, feeds, engine.s._set_hook_stop)
        self._engine = engine
        self._ordered = ordered
        self._pending: deque[Slot] = deque()  # admitted and not yielded yet, in admission order
        self._window = 2 * engine.n  # at most this many pending
        self._exhausted = False  # no more steps are admitted
        self._closed = False  # aclose() was called: the loop ends, whatever the steps it cancelled raise
        self._admitting = False  # an admission is under way (one at a time)
        self._dropped = False  # the caller let go of the iterator: what its steps raise is ``left``'s
        self._waiting: anyio.CancelScope | None = None  # an admission's wait for a feed or a lane
        self._context: Context = copy_context()  # the iterating task's, at its latest __anext__
        #: Set when a step's results are known, it ended, or an admission did: one per task
        #: waiting (the iterating task, and one closing the iterator from another task).
        self._wakes: list[Waker] = []
        self._runners = StepRunners(engine.s._task_group, engine.wakers)
        #: A runner's job whose step ended while another admission was under way parks here:
        #: a new job (maybe a new runner) is submitted only when none is parked.
        self._parked = ParkedJobs(engine.wakers, self._is_exhausted, self._end_admission)
        # Bound once, not per step: a bound method a step holds lives as long as the step,
        # and with many steps in flight the steps' objects are what the GC walks.
        self._wake = self._wakeup
        self._on_admitted = self._admitted
        self._on_freed = self._lane_freed

    async def __anext__(self) -> Any:
        if self._busy:
            raise RuntimeError("iterate(): another task is already running a step of this iterator")
        if self._done and not self._pending:
            self._close_runners()
            raise StopAsyncIteration
        self._busy = True
        try:
            self._context = copy_context()
            while True:
                if not self._admitting and self._may_admit(waiting=not self._pending):
                    self._start_admission()
                pending = self._pending
                slot = pending[0] if self._ordered and pending and pending[0].done else await self._finished()
                if slot is None or self._closed:  # closed from another task meanwhile: the loop ends
                    raise StopAsyncIteration
                if not slot.done:  # ordered=False: its results, before its after_run
                    slot.delivered = True
                    self._steps += 1
                    return slot.results
                pending.remove(slot)
                if slot.error is not None:
                    # A step's clean stop ends the loop; the feeds' own error (no step) is raised.
                    if slot.step is not None and isinstance(slot.error, CLEAN_STOP_TYPES):
                        self._exhausted = True
                        continue
                    raise slot.error
                if slot.admitted and not slot.delivered:
                    self._steps += 1
                    return slot.results
        except StopAsyncIteration:
            self._done = True
            self._close_runners()
            raise
        except BaseException as exc:
            origin = await failed(self, exc)  # the steps in flight cancelled and waited for
            if origin is exc:
                raise
            raise origin from None
        finally:
            self._busy = False

    def _may_admit(self, *, waiting: bool = False) -> bool:
        """Whether one more step may be admitted now (``waiting``: even if it must wait for
        a lane, as when nothing is pending)."""
        return not self._exhausted and len(self._pending) < self._window and (waiting or self._engine.free())

    # -- in the runners ---------------------------------------------------------------------

    async def _admit_and_run(self) -> None:
        """A runner's job, holding the admission: admit the next step and run it here; then,
        if no admission is under way, take it again and admit the next one, in a fresh copy
        of the iterating task's context, and so on. The steps run one after another under
        one cancel scope, entered anew once a step's scope was cancelled."""
        engine = self._engine
        slot: Slot | None = None
        step: Step | None = None
        out: tuple[bool, Any] | Rescope | None = None
        again: Rescope | None = None  # the step goes on under a new scope
        while True:
            scope = engine.new_scope()
            running = renew = False
            with scope:
                while True:
                    if again is None:
                        slot = await self._admission(scope)
                        if slot is None:
                            return
                    else:
                        assert slot is not None and slot.step is not None
                        slot.step.scope = scope
                    step = slot.step
                    assert step is not None
                    running = True
                    resumed, again = again, None
                    try:  # the step (admitted by ``step_body``), its outcome kept in its slot
                        out = await step_body(engine, step, resumed)
                        if isinstance(out, Rescope):  # its scope was cancelled: it goes on under a new one
                            again = out
                            renew = True
                            break
                        slot.admitted, slot.results = out
                        if not slot.admitted:  # a stop kept it from being admitted
                            self._exhausted = True
                    except BaseException as exc:  # a clean stop or an error: either way no step follows it
                        slot.error = exc
                        self._exhausted = True
                        left(self, slot)  # (a KeyboardInterrupt is the close's too; a dropped iterator's error is logged)
                        if isinstance(exc, CLEAN_STOP_TYPES):  # the end of the input: the session stops
                            self._stop()  # (as with one lane), before any other step is admitted
                        if isinstance(exc, anyio.get_cancelled_exc_class()):
                            raise  # for ``scope`` to catch; any other error (KeyboardInterrupt too) is
                            # the iterating task's to raise, from the slot
                    finally:
                        if again is None:  # the step is over: wake the iterating task if it waits for it
                            slot.done = True
                            if not self._ordered or self._exhausted or self._pending[0] is slot:
                                self._wakeup()
                    running = False
                    slot = step = out = resumed = None  # a parked job keeps no step alive
                    if not self._parked.take_over():  # (else: it was handed to a parked job not run yet)
                        if not self._admitting and self._may_admit():
                            self._admitting = True
                        elif not await self._parked.park():
                            return
                    await InContext((self._context.copy(),))  # as a job of its own would run
                    if scope.cancel_called:  # its step ended whole all the same (a hook swallowed it)
                        renew = True
                        break
            if renew:
                continue
            # The scope caught the cancellation of its step (only a step's is ever cancelled):
            # another step failed, or the iterator ended; either way nothing follows it.
            assert running and slot is not None and slot.step is not None
            slot.error = engine.cancelled_error(slot.step)
            return

    def _close_runners(self) -> None:
        """No more jobs: the runners leave (the parked jobs now, the busy ones once their
        step ended)."""
        self._runners.close()
        self._parked.leave()

    async def _admission(self, scope: anyio.CancelScope) -> Slot | None:
        """The next feed and a lane for it, as a pending slot whose step (under ``scope``)
        ``step_body`` admits (the admission ends there); ``None``: nothing to admit
        (the admission ends here)."""
        engine = self._engine
        s = engine.s
        step: Step | None = None
        try:
            # open, its coordinator not stopped: no stop; else the session says why (or that a held error recovers)
            if self._exhausted or ((s._state is not _OPEN or s._coord.should_stop()) and s.should_stop()):
                self._exhausted = True
            elif not self._async_items and engine.free():  # neither the feed nor the lane waits
                step = engine.take_free_lane((self._fetches, self._take_feed(), None, None), scope)
            else:
                try:
                    with engine.new_scope() as self._waiting:
                        feed = await self._next_feed()
                        step = await engine.take_lane((self._fetches, feed, None, None), scope)
                finally:
                    self._waiting = None
        except StopAsyncIteration:
            self._exhausted = True
        except BaseException as exc:
            if isinstance(exc, anyio.get_cancelled_exc_class()):
                self._end_admission()
                raise
            # The feed could not be taken: raised in its place, by the iterating task
            # (KeyboardInterrupt or SystemExit too: never out of a runner of the session's).
            self._exhausted = True
            slot = Slot(None, self._wake)
            slot.error, slot.done = exc, True
            self._pending.append(slot)
            left(self, slot)
        if step is not None and self._exhausted:  # the iterator ended while it waited
            engine.end(step)
            step = None
        if step is None:
            self._end_admission()
            return None
        slot = Slot(step, self._wake)
        if not self._ordered:
            step.on_ran = slot.on_ran
        step.on_admitted = self._on_admitted
        step.on_freed = self._on_freed
        self._pending.append(slot)
        return slot

    def _start_admission(self) -> None:
        """Hand the admission to a parked job, else to a new one."""
        self._admitting = True
        if self._parked.hand():
            return
        try:
            self._runners.submit(self._admit_and_run(), self._context.copy())
        except BaseException:
            self._admitting = False
            raise

    def _admitted(self, whole: bool) -> None:
        """``step_body``'s admission is over: after a whole one, the next starts while lanes are free."""
        self._admitting = False
        if whole and self._may_admit():
            # The session's task group closing refuses it: the next ``__anext__`` says so.
            with contextlib.suppress(RuntimeError):
                self._start_admission()

    def _lane_freed(self, step: Step) -> None:
        """A step's run returned and freed its lane: unless its ``after_run`` is next (then
        the runner that runs it admits the next step right after, in the same job), the next
        admission starts now, if none is under way and there is room."""
        if step.number == self._engine.turn.next:
            return
        if not self._admitting and self._may_admit():
            with contextlib.suppress(RuntimeError):  # the session's task group is closing
                self._start_admission()

    def _is_exhausted(self) -> bool:
        return self._exhausted

    def _end_admission(self) -> None:
        self._admitting = False
        self._wakeup()  # the iterating task may wait for it

    def _wakeup(self) -> None:
        if self._wakes:
            wakes, self._wakes = self._wakes, []
            for wake in wakes:
                wake.set()

    # -- in the iterating task --------------------------------------------------------------

    async def _finished(self) -> Slot | None:
        """The next slot to take: the oldest once done (ordered), else the first whose
        results are known and not yielded yet, or that is done; ``None``: nothing is
        pending and no admission is under way."""
        while True:
            pending = self._pending
            if pending:
                if self._ordered:
                    if pending[0].done:
                        return pending[0]
                else:
                    for slot in pending:
                        if slot.step is None and slot is not pending[0]:
                            continue  # a feed that could not be taken: raised after the steps before it
                        if slot.done or (slot.ran and not slot.delivered):
                            return slot
            elif not self._admitting:
                return None
            await self._waker().wait()

    def _waker(self) -> Waker:
        """A wake-up for the calling task, set by the next ``_wakeup``."""
        wake = self._engine.wakers()
        self._wakes.append(wake)
        return wake
