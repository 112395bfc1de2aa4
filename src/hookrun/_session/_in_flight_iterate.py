"""``MonitoredSession.iterate`` with steps in flight: ``InFlightIterator`` keeps up to N
steps running and yields their results in feed order (``ordered=False``: as they end).

The iterating task admits each step itself (a lane, its number, its ``before_run``, under
the step's cancel scope, so another step's fatal error cuts it short), so numbers follow
the feeds; the rest of the step (the raw run, ``after_run``) runs in a task of the
session's task group (a parked runner, ``_runners.py``): the raw runs start in step
order, each before the next step is admitted. A step that a stop kept from being
admitted, or that met a clean-stop error, yields nothing; once a stop is requested no
step is admitted, the steps
in flight are drained and iteration ends. Any other error cancels the steps in flight and
is raised (the error of the step that failed first, not the cancellations it caused);
with ``ordered=False`` a step's results are yielded as soon as its raw run returns, which
may be before its ``after_run`` (still called in step order; an error it raises comes
from a later ``__anext__``);
cancelling the iterating task, or ``aclose()``, cancels them and waits for them (shielded,
bounded by the grace period), so no task of the iterator is left running once it ended.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import anyio
import anyio.lowlevel

from .._dispatch._wake import Waker
from .._errors import CLEAN_STOP_TYPES
from ._iterate import StepIterator
from ._runners import StepRunners

if TYPE_CHECKING:
    from ._in_flight import InFlight, Step
    from ._retry import RetryBudget

__all__ = ["InFlightIterator"]


class _Slot:
    __slots__ = ("admitted", "delivered", "done", "error", "ran", "results", "step", "wake")

    def __init__(self, step: Step, wake: Callable[[], None]) -> None:
        self.step = step
        self.wake = wake
        self.done = False  # the step is over (its after_run returned, or it failed)
        self.ran = False  # its raw run returned: its results are known
        self.delivered = False  # yielded (ordered=False: maybe before its after_run)
        self.admitted = False
        self.results: Any = None
        self.error: BaseException | None = None

    def on_ran(self, results: Any) -> None:
        if not self.ran:
            self.ran, self.results = True, results
            self.wake()


class InFlightIterator(StepIterator):
    """The async iterator ``iterate`` returns on a session with steps in flight."""

    __slots__ = ("_engine", "_exhausted", "_ordered", "_pending", "_runners", "_wake")

    def __init__(self, engine: InFlight, fetches: object, feeds: object, *, ordered: bool) -> None:
        super().__init__(engine.s, fetches, feeds, engine.s._set_hook_stop)
        self._engine = engine
        self._ordered = ordered
        self._pending: deque[_Slot] = deque()
        self._exhausted = False  # no more steps are admitted
        self._wake: Waker | None = None  # set when a step's results are known or it ended
        self._runners = StepRunners(engine.s._task_group, engine.wakers)

    async def __anext__(self) -> Any:
        if self._busy:
            raise RuntimeError("iterate(): another task is already running a step of this iterator")
        if self._done and not self._pending:
            self._runners.close()
            raise StopAsyncIteration
        self._busy = True
        try:
            return await self._next()
        except StopAsyncIteration:
            self._done = True
            self._runners.close()
            raise
        except BaseException as exc:
            self._done = self._exhausted = True
            await self._abandon(exc)
            self._runners.close()
            origin = self._origin(exc)
            self._pending.clear()
            if origin is exc:
                raise
            raise origin from None
        finally:
            self._busy = False

    async def aclose(self) -> None:
        """Stop iterating: cancel the steps in flight and wait for them."""
        self._done = True
        self._exhausted = True
        await self._abandon(RuntimeError("iterate(): the iterator was closed"))
        self._runners.close()
        self._pending.clear()

    async def _next(self) -> Any:
        while True:
            await self._fill()
            if not self._pending:
                raise StopAsyncIteration
            slot = await self._finished()
            if not slot.done:  # ordered=False: its results, before its after_run
                slot.delivered = True
                self._steps += 1
                return slot.results
            self._pending.remove(slot)
            if slot.error is not None:
                if isinstance(slot.error, CLEAN_STOP_TYPES):
                    self._exhausted = True
                    continue
                raise slot.error
            if slot.admitted and not slot.delivered:
                self._steps += 1
                return slot.results

    async def _fill(self) -> None:
        """Admit steps while a lane is free, up to N in flight."""
        engine = self._engine
        while not self._exhausted and len(self._pending) < engine.n and (not self._pending or engine.pool.free()):
            # The step submitted last starts its raw run first: no raw run starts after a
            # later step's admission, which may fail fatally (a tenth of the rate of 1 ms
            # steps at N = 64 on asyncio, the price of that rule).
            while self._runners.queued():
                await anyio.lowlevel.checkpoint()
            if self._exhausted:  # a step failed meanwhile (``_step_task``)
                return
            if engine.should_stop():
                self._exhausted = True
                return
            try:
                feed = await self._next_feed()
            except StopAsyncIteration:
                self._exhausted = True
                return
            step = await engine.take_lane((self._fetches, feed, None, None))
            failed: Exception | None = None
            budget: RetryBudget | None = None
            admitted = True
            try:
                with step.scope:  # another step's fatal error cancels the admission too
                    try:
                        budget = await engine.ready(step, None)
                        admitted = await engine.admit(step)
                    except Exception as exc:
                        failed = exc
            except BaseException:
                engine.end(step)
                raise
            if not admitted:
                engine.end(step)
                self._exhausted = True
                return
            step.scope = engine.s._dispatcher.new_scope()  # the rest of the step, in its task
            if step.cause is not None:  # cancelled by another step's failure: it says so, no more admitted
                failed = failed or engine.cancelled_error(step)
                self._exhausted = True
            slot = _Slot(step, self._wakeup)
            if not self._ordered:
                step.on_ran = slot.on_ran
            self._pending.append(slot)
            self._runners.submit(self._step_task(slot, budget, failed))

    async def _step_task(self, slot: _Slot, budget: RetryBudget | None, failed: Exception | None) -> None:
        try:
            slot.admitted, slot.results = await self._engine.run_step(
                slot.step, admitted=True, budget=budget, failed=failed
            )
        except Exception as exc:
            slot.error = exc
            self._exhausted = True  # a clean stop or an error: either way no step follows it
        except BaseException as exc:
            slot.error = exc
            self._exhausted = True
            raise
        finally:
            slot.done = True
            self._wakeup()

    def _wakeup(self) -> None:
        wake, self._wake = self._wake, None
        if wake is not None:
            wake.set()

    async def _finished(self) -> _Slot:
        """The next slot to take: the oldest once done (ordered), else the first whose
        results are known and not yielded yet, or that is done."""
        while True:
            if self._ordered:
                if self._pending[0].done:
                    return self._pending[0]
            else:
                for slot in self._pending:
                    if slot.done or (slot.ran and not slot.delivered):
                        return slot
            await self._sleep()

    async def _sleep(self) -> None:
        """Wait for the next ``_wakeup``."""
        if self._wake is None:
            self._wake = self._engine.wakers()
        await self._wake.wait()

    async def _abandon(self, why: BaseException) -> None:
        """Cancel this iterator's steps in flight and wait for them (shielded, bounded)."""
        for slot in self._pending:
            if not slot.done and slot.step.cause is None:
                slot.step.cause = why
                slot.step.scope.cancel()
        grace = self._engine.s._grace
        with anyio.move_on_after(2 * grace + 1.0, shield=True):
            while any(not slot.done for slot in self._pending):
                await self._sleep()

    def _origin(self, exc: BaseException) -> BaseException:
        """The error of the step that failed first, when ``exc`` is a cancellation it caused."""
        cause = exc.__cause__
        if cause is None or not isinstance(exc, RuntimeError):
            return exc
        for slot in self._pending:
            if slot.error is cause:
                return cause
        return exc
