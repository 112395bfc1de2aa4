"""Steps in flight: the engine of a monitored session made with ``max_in_flight=N > 1``.

The session has N lanes (``_lanes.py``), each with its own raw session
(``_lane_sessions.py``). A step holds one lane from admission to its end:

1. admission (``begin``): a free lane (waiting for one: back-pressure), then the phase
   lock; a stop requested by then admits nothing; the step gets its number ``n`` (the
   global step its ``after_run`` sees) and runs its ``before_run`` phase, in admission
   order, under the lock. A step whose first ``before_run`` phase failed holds admission
   until that phase is whole (its re-run after recovery) or the step ends, so no hook sees
   ``before_run(n+1)`` before ``before_run(n)`` and a stop it requests admits no later step;
2. the raw run, on the lane's session, outside the lock: runs of several steps overlap;
3. the turnstile lets its ``after_run`` phase through once the steps before it are done
   (``n-1``'s ``after_run`` returned, or it was given up): the step counter moves and its
   ``after_run`` phase runs, under the lock.

The phase lock makes "one hook phase at a time" hold (``before_run`` phases,
``after_run`` phases and ``after_create_session``); the turnstile makes ``after_run`` come
in step order, so when ``after_run(n)`` runs, steps up to ``n`` are done.

Global step: ``run_context.global_step`` is ``n - 1``, ``run_values.global_step`` the
counter after its increment, ``n``: the counter moves to ``n`` in ``after_run(n)``, past the
numbers of the steps given up before it. When nothing is in flight the next number is read
from the counter again, so a number given up past the last one counted is handed out
again, as with one lane.

Failures: a recoverable error re-creates the step's lane alone and re-runs the step there
with its number (``before_run`` again); a clean-stop error stops admission and gives the
step up; any other error cancels every other step in flight (they raise a ``RuntimeError``
saying which step failed, and start no hook phase and no raw run) and propagates. Every
step, however it ends, gives its lane back and its number up, and marks its run context
ended. Its hook phases run under its cancel scope (one a step, not one a phase): a hook
failing beside a waiting one cancels it to stop the phase, so the step recovers under a
new one (``Rescope``).
"""

from __future__ import annotations

from collections.abc import Mapping
from contextlib import ExitStack
from typing import TYPE_CHECKING, Any

import anyio

from .._dispatch import _nest
from .._dispatch._merge import DEFAULT_OPTIONS, check_options
from .._dispatch._wake import Wakers
from .._errors import CLEAN_STOP_TYPES, RunAfterStopError, SessionClosedError
from .._global_step import step_at_start
from .._hook_protocol import InFlightRunContext, RunMetadata, RunOptions, SessionRunValues
from .._inside import enter_step, inside_error, inside_step, leave_step
from ._in_flight_step import Rescope, Step
from ._lane_sessions import LaneSessions
from ._lanes import Lane, LanePool, PhaseLock, Turnstile
from ._state import State
from ._stepping import NO_FEEDS, _after_run_args, _checked, _raw_run

if TYPE_CHECKING:
    from ._retry import RetryBudget

__all__ = ["InFlight", "Step"]

_new_tuple = tuple.__new__


class InFlight:
    """The steps-in-flight engine of one monitored session (see the module docstring)."""

    def __init__(self, session: Any, creator: object, n: int) -> None:
        self.s = session
        self.n = n
        self.lanes = [Lane(i) for i in range(n)]
        self.wakers = Wakers()  # for the lanes, the turnstile, the iterators and their runners
        self.pool = LanePool(self.lanes, session._stats.now, self.wakers)
        self.turn = Turnstile(self.wakers)
        session._stats.spread(n)
        self.sessions = LaneSessions(session, creator, self.lanes, self.phase)
        self.steps: set[Step] = set()
        self._lock = PhaseLock(self.wakers)
        self._next: int | None = None  # the next step's number; None: read the counter
        self._counted = 0  # the number the counter was last moved to (valid while _next is set)
        self._held: Step | None = None  # a step whose first before_run phase failed
        self._resume: anyio.Event | None = None  # set once _held's before_run is whole or it ended

    def phase(self) -> PhaseLock:
        """The phase lock: one hook phase at a time (taken at once when free; waiters are
        served in arrival order)."""
        return self._lock

    # -- the session's view -----------------------------------------------------------------

    def should_stop(self) -> bool:
        s = self.s
        if s._state is not State.OPEN or s._hook_stop:
            return True
        coord = self.sessions.coord
        if coord is None or not coord.should_stop():  # the common case
            return False
        held = coord.exception
        return not (s._recovers and held is not None and s._is_recoverable(held))

    def check_entry(self, what: str) -> None:
        """``check_open``, and refuse a call from inside one of the session's own steps."""
        if inside_step(self.s):
            raise inside_error(self.s, what)
        self.check_open(what)

    def check_open(self, what: str) -> None:
        """Refuse a step, saying why, unless the session is open and no stop was requested."""
        s = self.s
        if s._state is State.OPEN and not s._hook_stop:
            return
        name = type(s).__name__
        if s._state is State.NEW:
            raise SessionClosedError(f"{name}.{what} called outside 'async with'")
        if s._state is State.ENTERING:
            raise SessionClosedError(f"{name}.{what} called while the session is being entered (from another task)")
        if s._state is State.CLOSED:
            raise SessionClosedError(f"{name}.{what} called after the session closed")
        raise RunAfterStopError(f"{name}.{what} called after a hook requested stop")

    # -- lanes ------------------------------------------------------------------------------

    async def take_lane(self, args: tuple[Any, Any, Any, Any], scope: anyio.CancelScope | None = None) -> Step:
        """A step holding a free lane (waits for one), under ``scope`` (default: a new one);
        the session is busy until it ends."""
        return self._holding(await self.pool.acquire(), args, scope)

    def take_free_lane(self, args: tuple[Any, Any, Any, Any], scope: anyio.CancelScope) -> Step:
        """``take_lane`` when ``pool.free()``: without a wait, and without a coroutine."""
        return self._holding(self.pool.take(), args, scope)

    def _holding(self, lane: Lane, args: tuple[Any, Any, Any, Any], scope: anyio.CancelScope | None) -> Step:
        step = Step(lane, args, self.new_scope() if scope is None else scope)
        self.steps.add(step)
        self.s._busy = True
        return step

    def new_scope(self) -> anyio.CancelScope:
        """A cancel scope of the running backend's own class."""
        return self.s._dispatcher.new_scope()  # type: ignore[no-any-return]

    def end(self, step: Step) -> None:
        """``step`` is over, whatever happened: its number and lane go."""
        if step.number:
            self.turn.done(step.number)
        if step.ctx is not None:
            step.ctx.ended = True  # a periodic hook forgets what it expected of the step
        self.unhold(step)
        self.steps.discard(step)
        self.pool.release(step.lane)
        if not self.steps:
            self._next = None  # nothing in flight: the next number comes from the counter
            s = self.s
            s._busy = False
            if s._step_done is not None:
                s._step_done.set()

    def fail_others(self, origin: Step, error: BaseException) -> None:
        """A non-recoverable error: cancel every other step in flight (unless ``origin`` was
        itself cancelled by another step's failure: those steps are cancelled already)."""
        if origin.cause is not None:
            return
        for step in self.steps:
            if step is not origin and step.cause is None:
                step.cause = error
                step.scope.cancel()

    async def abandon(self, why: BaseException | None) -> None:
        """The session closes after an error or a cancellation (``why``): cancel every step
        in flight and wait for them to end (shielded, bounded by the grace period); their
        callers get ``SessionClosedError``. No step is admitted any more (it is closed)."""
        s = self.s
        closed = SessionClosedError(f"{type(s).__name__} was closed (after {why!r}) while this step was in flight")
        for step in self.steps:
            if step.cause is None:
                step.cause = closed
                step.scope.cancel()
        if not self.steps:
            return
        s._step_done = done = anyio.Event()
        try:
            with anyio.move_on_after(2 * s._grace + 1.0, shield=True):
                await done.wait()  # set by the last step's end
        finally:
            s._step_done = None

    def cancelled_error(self, step: Step) -> RuntimeError:
        assert step.cause is not None
        if isinstance(step.cause, SessionClosedError):
            return step.cause
        error = RuntimeError(
            f"step {step.number or '(not admitted yet)'} was cancelled: another step in flight failed with {step.cause!r}"
        )
        error.__cause__ = step.cause
        return error

    async def ready(self, step: Step, budget: RetryBudget | None) -> RetryBudget | None:
        """Re-create the step's lane first if it has no session, or if the coordinator holds
        a recoverable error (a background task's): the first step to see it takes it (the
        coordinator forgets it) and re-creates its own lane; the other lanes go on."""
        s, lane = self.s, step.lane
        coord = self.sessions.coord
        held = coord.exception if coord is not None and coord.should_stop() else None
        if lane.raw is not None and not (held is not None and s._is_recoverable(held)):
            return budget
        budget = budget or s._retry.budget()
        if lane.raw is None:
            await self.sessions.create(lane, budget)
        else:
            assert held is not None and coord is not None
            if not s._recovers:
                raise held
            coord.clear_stop()  # taken: no other step recovers for it
            if not await self.sessions.recover(lane, held, budget):
                raise held
        return budget

    # -- one step ---------------------------------------------------------------------------

    async def admit(self, step: Step) -> bool:
        """Admission: the ``before_run`` phase under the phase lock, with the step's number.
        False: a stop was requested (or the session closed) before it was admitted."""
        s = self.s
        while True:
            if self._resume is not None:  # an earlier step's first before_run failed: it goes first
                await self._resume.wait()
            async with self.phase():
                self.check_cause(step)
                if self._resume is not None:  # held while this step waited for the lock
                    continue
                if s._state is not State.OPEN or s._hook_stop:
                    return False
                if self._next is None:
                    local = s._local
                    value = local.value if local is not None else await step_at_start(s._counter)
                    self._counted = value
                    self._next = value + 1
                    self.turn.restart(self._next)
                step.number = self._next
                self._next += 1
                try:
                    await self._before(step)
                except Exception:
                    self._held, self._resume = step, anyio.Event()
                    raise
            return True

    def unhold(self, step: Step) -> None:
        """``step`` no longer holds admission (its ``before_run`` phase is whole, or it ended)."""
        if self._held is step:
            assert self._resume is not None
            self._resume.set()
            self._held = self._resume = None

    def check_cause(self, step: Step) -> None:
        """None of ``step``'s phases or runs starts once another step's failure cancelled it."""
        if step.cause is not None:
            raise self.cancelled_error(step)

    async def _before(self, step: Step) -> None:
        """The step's ``before_run`` phase (under the lock); its errors are counted."""
        try:
            await self._before_phase(step)
        except BaseException as exc:
            self._failed(step, exc)
            raise

    def _failed(self, step: Step, exc: BaseException) -> None:
        stats = self.s._stats
        stats.failed(step.where, exc)
        if step.sampled:
            stats.end_sample(step.number, step.started, None, False, self._sharing(step), step.sampled)
            step.sampled = 0

    async def _before_phase(self, step: Step) -> None:
        s, stats = self.s, self.s._stats
        fetches, feed_dict, options, run_metadata = step.args
        if step.ctx is not None:  # a re-run: the attempt before it is over
            step.ctx.ended = True
        step.ctx = ctx = InFlightRunContext((fetches, feed_dict, options), step.lane.raw, step.number - 1, s._on_stop)
        step.metadata = metadata = RunMetadata() if run_metadata is None else run_metadata
        if s._step_hooks:  # entered here, in the task and context the whole step runs in
            contexts = ExitStack()
            step.contexts = contexts
            for hook in s._step_hooks:
                contexts.enter_context(hook.step_context(ctx, metadata))
        step.where = "before_run"
        stats.steps = count = stats.steps + 1
        if count >= stats.next_sample:
            step.sampled = count
            step.started = stats.start_sample()
            step.occupied = self.pool.occupancy()
            # The next step to time, picked now: the steps admitted while this one is in
            # flight are not all timed (its end picks again, from the same count).
            stats.next_sample = count + stats.gap
        merged = DEFAULT_OPTIONS if options is None else check_options(options, "the caller")
        before = stats.before if step.sampled else s._before
        trace = metadata.timings if merged.trace or s._time_before_run else None
        requests = None
        if before.calls:  # under the step's scope, which a failing hook may cancel (``Rescope``)
            started = s._dispatcher.start(before, [(ctx,)] * len(before.calls), step.scope, trace)
            requests = started if type(started) is list else await started
        if requests is not None and requests.count(None) != len(requests):
            step.keys, step.shape, step.shapes, step.feeds, merged = s._gather(fetches, feed_dict, merged, requests)
        else:
            step.keys, step.shapes, step.feeds = [], None, feed_dict
            step.shape = None if fetches is None else _nest.index(fetches, "the caller", step.keys, {})
        if trace is not None and not merged.trace:
            del metadata.timings[:]
        step.merged = merged

    async def _run_and_after(self, step: Step) -> Any:
        """The raw run, then (in step order, under the lock) the counter and ``after_run``."""
        s, stats = self.s, self.s._stats
        raw, metadata, merged = step.lane.raw, step.metadata, step.merged
        assert metadata is not None and step.ctx is not None
        step.where = "run"
        self.check_cause(step)
        clock = stats.now
        run_started = clock()
        values = await _raw_run(raw, step.keys, step.feeds or NO_FEEDS, merged, metadata)
        run_seconds = clock() - run_started
        values = _checked(raw, step.keys, values)
        results = None if step.shape is None else _nest.pack(step.shape, values)
        if step.on_ran is not None:
            step.on_ran(results)
        await self.turn.wait(step.number)
        async with self.phase():
            self.check_cause(step)
            step.where = "after_run"
            if step.counted is None:  # to its number, past the numbers given up before it
                moves, self._counted = step.number - self._counted, step.number
                local = s._local
                step.counted = local.increment_nowait(moves) if local is not None else await s._counter.increment(moves)
            after = stats.after if step.sampled else s._after
            if after.calls:
                nothing = _new_tuple(SessionRunValues, (None, merged, metadata, step.counted))
                args = _after_run_args(after.calls, step.ctx, step.shapes, values, nothing)
                started = s._dispatcher.start(after, args, step.scope, metadata.timings if merged.trace else None)
                if type(started) is not list:
                    await started
        if step.sampled:
            stats.end_sample(step.number, step.started, run_seconds, True, self._sharing(step), step.sampled)
        return results

    def _sharing(self, step: Step) -> int:
        """How many steps shared a timed step's time: the mean in flight over its life."""
        elapsed: float = self.s._stats.now() - step.started
        if elapsed <= 0:
            return max(1, self.pool.busy)
        return max(1, round((self.pool.occupancy() - step.occupied) / elapsed))

    async def attempt(self, step: Step, budget: RetryBudget | None, *, admitted: bool) -> Any:
        """One attempt at the rest of a step (``before_run`` again unless ``admitted``)."""
        if not admitted:
            async with self.phase():
                self.check_cause(step)
                await self._before(step)
            self.unhold(step)
        try:
            return await self._run_and_after(step)
        except BaseException as exc:
            self._failed(step, exc)
            raise

    async def finish(self, step: Step, budget: RetryBudget | None = None, failed: Exception | None = None) -> Any:
        """The step after admission (``failed``: its admission's error), recovering its lane
        per the retry policy; any other error is raised (a clean-stop one stops admission)."""
        s = self.s
        while True:
            if failed is not None:
                if isinstance(failed, CLEAN_STOP_TYPES):
                    s._set_hook_stop()
                    raise failed
                if not self.recovers_from(step, failed):
                    self.fail_others(step, failed)
                    raise failed
                if step.scope.cancel_called and step.cause is None:  # a failing hook stopped its phase so
                    raise Rescope(failed, budget)  # nothing more can wait under that scope
                step.leave_contexts(failed)  # the attempt is over; the re-run enters them anew
                budget = budget or s._retry.budget()
                if not await self.sessions.recover(step.lane, failed, budget):
                    self.fail_others(step, failed)
                    raise failed
            try:
                return await self.attempt(step, budget, admitted=failed is None)
            except Exception as exc:
                failed = exc

    def recovers_from(self, step: Step, exc: BaseException) -> bool:
        """Whether ``exc`` re-creates the step's lane and re-runs the step."""
        s = self.s
        if step.cause is not None:  # cancelled by another step's failure
            return False
        return s._recovers and s._is_recoverable(exc) and s._state is not State.CLOSED and step.number > 0

    async def run_step(self, step: Step) -> tuple[bool, Any]:
        """A whole step on the lane it holds, under its own cancel scope: ``(False, None)``
        when a stop kept it from being admitted, else ``(True, results)``. Ends the step."""
        again: Rescope | None = None
        while True:
            try:
                with step.scope:
                    return await self.run_sharing_scope(step, again)
                raise self.cancelled_error(step)  # cancelled by another step's failure (the step ended)
            except Rescope as exc:  # recover, and go on, under a new scope
                again = exc
                step.scope = self.new_scope()

    async def run_sharing_scope(self, step: Step, again: Rescope | None = None) -> tuple[bool, Any]:
        """The step under ``step.scope``, which the caller entered: ``run_step`` enters one
        a step, ``iterate``'s runners one for the steps they run one after another (entering
        one a step costs about 4 us on asyncio). A cancellation of that scope goes through
        as it is, for the caller's scope to catch (the step then failed with
        ``cancelled_error``), and so does ``Rescope``: the step is not over, and goes on
        when the caller, under a new scope, calls again with it. Every other way out ends
        the step."""
        ended = True
        error: BaseException | None = None
        inside = enter_step(self.s)
        try:
            return await self._run_in_scope(step, again)
        except Rescope:
            ended = False
            raise
        except Exception as exc:
            error = exc
            if step.cause is None and not isinstance(exc, CLEAN_STOP_TYPES):
                self.fail_others(step, exc)
            raise
        except BaseException as exc:
            error = exc
            raise
        finally:
            if ended:
                step.leave_contexts(error)
                self.end(step)
            leave_step(inside)

    async def _run_in_scope(self, step: Step, again: Rescope | None) -> tuple[bool, Any]:
        """The step under ``step.scope``, entered: admission unless ``again`` (it goes on
        from a recovery), then ``finish``."""
        if again is not None:
            return True, await self.finish(step, again.budget, again.error)
        whole = False
        failed: Exception | None = None
        budget: RetryBudget | None = None
        try:
            budget = await self.ready(step, None)
            try:
                whole = await self.admit(step)
            except Exception as exc:
                failed = exc
        finally:
            if step.on_admitted is not None:
                step.on_admitted(whole)
        if not (whole or failed):
            return False, None
        return True, await self.finish(step, budget, failed)

    # -- the public entry points -----------------------------------------------------------

    async def run(
        self, fetches: object = None, feed_dict: Mapping[Any, Any] | None = None,
        options: RunOptions | None = None, run_metadata: RunMetadata | None = None,
    ) -> Any:
        """``MonitoredSession.run`` with steps in flight: one step on a free lane."""
        self.check_entry("run()")
        if feed_dict is not None and type(feed_dict) is not dict:
            from .._hook_protocol import check_feed_dict

            check_feed_dict(feed_dict, "the caller")
        step = await self.take_lane((fetches, feed_dict, options, run_metadata))
        admitted, results = await self.run_step(step)
        if not admitted:
            self.check_open("run()")  # says why
            raise RunAfterStopError(f"{type(self.s).__name__}.run() called after the session stopped")
        return results
