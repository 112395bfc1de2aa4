"""Steps in flight: the engine of a monitored session made with ``max_in_flight=N > 1``.

The session has N lanes (``_lanes.py``), each with its own raw session
(``_lane_sessions.py``), and one coordinator. A step goes through (its body, in one
coroutine with its admission and its run: ``step_body`` in ``_in_flight_step.py``):

1. admission (``admit``): a ticket (at most ``2 N`` steps admitted and not yet ended),
   a free lane (waiting for both: back-pressure), then the phase lock; a stop requested
   by then admits nothing; the step gets its number ``n`` (the global step its
   ``after_run`` sees) and runs its ``before_run`` phase, in admission order, under the
   lock. A step whose first ``before_run`` phase failed holds admission until that phase
   is whole (its re-run after recovery) or the step ends;
2. the raw run, on the lane's session, outside the lock: runs of several steps overlap.
   When it returns the lane is free for the next admission;
3. the turnstile lets its ``after_run`` phase through once the steps before it are done:
   the step counter moves to ``n`` (past the numbers given up before it) and its
   ``after_run`` phase runs, under the lock (``_in_flight_step.py``).

So hooks see one phase at a time, ``before_run`` and ``after_run`` each in step order;
between ``before_run(n)`` and ``after_run(n)`` come at most the ``before_run`` of steps
``n+1 .. n+2N-1``. ``run_context.global_step`` is ``n - 1``, ``run_values.global_step``
is ``n``. With nothing in flight the next number is read from the counter again.

Failures: a recoverable error marks the lane the step failed on (its next step replaces
its session first), re-creates it and re-runs the step there with its number (a step whose
run had returned takes that lane again first, or the first lane free when a step function
holds it); a
clean-stop error gives the step up and is its caller's alone (as with one lane: ``run``
raises it and the session goes on; ``iterate`` ends its loop and stops the session, in
its runner, so no step is admitted after it); any other error cancels every
other step in flight (they raise a ``RuntimeError`` saying which step failed, and start
no hook phase and no raw run) and propagates. Every step, however it ends, gives its
lane, ticket and number up, leaves its hooks' ``step_context``s and marks its run context
ended. Its hook phases run under its cancel scope: a hook failing beside a waiting one
cancels it to stop the phase, so the step recovers under a new one (``step_body`` returns
a ``Rescope`` to its caller, which enters one). A step's cancel scope is entered by its
caller: one a step for ``run``, one for the steps an ``iterate`` runner runs in turn.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import anyio

from .._dispatch._wake import Wakers
from .._errors import CLEAN_STOP_TYPES, AbortedError, RunAfterStopError, SessionClosedError
from .._global_step import step_at_start
from .._hook_protocol import RunMetadata, RunOptions
from .._inside import inside_error, inside_step
from ._in_flight_step import Rescope, Slot, Step, count_failure, end_before, start_before, step_body
from ._lane_sessions import LaneSessions
from ._lanes import Lane, LanePool, Occupancy, PhaseLock, Tickets, Turnstile
from ._state import State, refuse_step

if TYPE_CHECKING:
    from ._recovering import Recovery
    from ._retry import RetryBudget

__all__ = ["InFlight", "Step"]

_new_tuple = tuple.__new__


class InFlight:
    """The steps-in-flight engine of one monitored session (see the module docstring)."""

    def __init__(self, session: Any, creator: object, n: int) -> None:
        self.s = session
        self.n = n
        #: The lanes and their raw sessions, the coordinator and the phase lock: the session's.
        self.sessions: LaneSessions = session._setup.sessions
        #: Whether an error re-creates a lane, and the error the coordinator holds: the session's.
        self.recovery: Recovery = session._setup.recovery
        self.lanes = self.sessions.lanes
        self.wakers = Wakers()  # for the lanes, the turnstile, the iterators and their runners
        self.pool = LanePool(self.lanes, self.wakers)
        self.occupancy = Occupancy(session._stats.clock)
        #: The steps admitted and not yet ended hold one of these: at most ``window`` of them.
        self.window = 2 * n
        self.tickets = Tickets(self.window, self.wakers)
        self.turn = Turnstile(self.wakers)
        session._stats.spread(n)
        self.steps: set[Step] = set()
        self._lock: PhaseLock = self.sessions.lock
        self._next: int | None = None  # the next step's number; None: read the counter
        self._counted = 0  # the number the counter was last moved to (valid while _next is set)
        self._held: Step | None = None  # a step whose first before_run phase failed
        self._resume: anyio.Event | None = None  # set once _held's before_run is whole or it ended
        #: What a step's code runs inside of when no other session's step encloses it.
        self.inside: tuple[object, ...] = (session,)
        #: The requests of a ``before_run`` phase no hook has (every hook asked for nothing).
        self.no_requests: list[None] = [None] * len(session._before.calls)
        #: The ``KeyboardInterrupt``s and ``SystemExit``s of ``iterate()``'s steps no caller of
        #: their iterator raised yet, with their pipeline and slot: the close raises them.
        self.left: list[tuple[Any, Slot]] = []

    # -- the session's view -----------------------------------------------------------------

    def check_entry(self, what: str) -> None:
        """``check_open``, and refuse a call from inside one of the session's own steps."""
        if inside_step(self.s):
            raise inside_error(self.s, what)
        self.check_open(what)

    def check_open(self, what: str) -> None:
        """Refuse a step, saying why, unless the session is open and no stop was requested."""
        s = self.s
        if s._state is not State.OPEN:
            refuse_step(s, s._state, what)

    # -- lanes ------------------------------------------------------------------------------

    def free(self) -> bool:
        """Whether a step may take a ticket and a lane now, without waiting."""
        tickets, pool = self.tickets, self.pool
        return tickets.used < tickets.size and bool(pool.idle) and not pool.waiters

    async def take_lane(self, args: tuple[Any, Any, Any, Any], scope: anyio.CancelScope | None = None) -> Step:
        """A step holding a ticket and a free lane (waits for them, in that order), under
        ``scope`` (default: a new one); the session is busy until it ends."""
        await self.tickets.acquire()
        try:
            lane = await self.pool.acquire()
        except BaseException:
            self.tickets.release()
            raise
        return self.take_free_lane(args, self.new_scope() if scope is None else scope, lane)

    def take_free_lane(self, args: tuple[Any, Any, Any, Any], scope: anyio.CancelScope, lane: Lane | None = None) -> Step:
        """``take_lane`` when ``free()``: without a wait, and without a coroutine (``lane``:
        the ticket and that lane were taken already, by ``take_lane``)."""
        if lane is None:
            self.tickets.used += 1
            lane = self.pool.idle.popleft()
        step = Step(lane, args, scope)
        step.holds_lane = True
        self.steps.add(step)
        self.occupancy.change(1, 1)  # a step in flight, on its lane until its run returns
        self.s._busy = True
        return step

    def free_lane(self, step: Step) -> None:
        """``step``'s run returned: its lane goes to the next admission (the step keeps its
        ticket until it ends)."""
        if step.holds_lane:
            step.holds_lane = False
            self.occupancy.change(0, -1)
            self.pool.release(step.lane)
            if step.on_freed is not None:
                step.on_freed(step)

    async def lane_again(self, step: Step) -> bool:
        """A step that failed is re-run on the lane it failed on: one that gave it back takes
        it again if it is free, else the first lane free (the lane it failed on is marked:
        its next step replaces its session). Whether the lane's session must be re-created
        first (else a recovery of another step replaced it meanwhile, or the step moved to a
        sound lane)."""
        if not step.holds_lane:
            if not self.pool.take(step.lane):  # its holder may wait for this step (a step function's
                step.lane = await self.pool.acquire()  # hooked run waits for its turn): the first lane free
            step.holds_lane = True
            self.occupancy.change(0, 1)
        raw = step.lane.raw
        return raw is None or step.lane.renew or step.ctx is None or step.ctx.session is raw

    def new_scope(self) -> anyio.CancelScope:
        """A cancel scope of the running backend's own class."""
        return self.s._dispatcher.new_scope()  # type: ignore[no-any-return]

    def end(self, step: Step) -> None:
        """``step`` is over, whatever happened: its number and lane go."""
        self.steps.discard(step)
        self.phases_over(step)
        if step.holds_lane:  # (its run never returned)
            self.free_lane(step)
        self.tickets.release()
        self.occupancy.change(-1, 0)
        if not self.steps:
            s = self.s
            s._busy = False
            if s._lifetime.step_done is not None:
                s._lifetime.step_done.set()

    def phases_over(self, step: Step, holder: Step | None = None) -> None:
        """``step``'s phases are over, whatever happened (for a step of ``run_with_hooks``:
        ``holder``, the step function's step, is still in flight): its number passes the
        turnstile, its run context ends, it no longer holds admission. Once nothing else
        is in flight, the next number comes from the counter again (a number given up is
        handed out again)."""
        if step.number:
            self.turn.done(step.number)
        if step.ctx is not None:
            step.ctx._ended = True  # a periodic hook forgets what it expected of the step
        if self._held is step:
            self.unhold(step)
        steps = self.steps
        if not steps or (len(steps) == 1 and holder in steps):
            self._next = None

    def fail_others(self, origin: Step, error: BaseException) -> None:
        """``origin`` failed for good with ``error``: cancel every other step in flight. Not
        for a clean stop (its caller's alone) nor a cancellation, and not when ``origin`` was
        itself cancelled by another step's failure (those steps are cancelled already).
        ``KeyboardInterrupt`` or ``SystemExit`` ends them as an error does."""
        if origin.cause is not None or isinstance(error, (*CLEAN_STOP_TYPES, anyio.get_cancelled_exc_class())):
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
        s._lifetime.step_done = done = anyio.Event()
        try:
            with anyio.move_on_after(2 * s._setup.grace + 1.0, shield=True):
                await done.wait()  # set by the last step's end
        finally:
            s._lifetime.step_done = None

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
        lane, recovery = step.lane, self.recovery
        held = recovery.held()
        if not lane.renew and held is None:
            return budget
        budget = budget or recovery.retry.budget()
        if lane.renew:  # no session, or one a step lost: replaced (closed, then created)
            await self.sessions.recover(lane, None, budget, waited=True)  # (no wait: never given up)
        else:
            assert held is not None
            if not recovery.recovers:
                raise held
            recovery.take_held()  # taken: no other step recovers for it
            if not await self.sessions.recover(lane, held, budget):
                raise held
        return budget

    # -- one step (its body: ``step_body``, in ``_in_flight_step.py``) ------------------------

    async def admit(self, step: Step) -> bool:
        """Admission: the ``before_run`` phase under the phase lock, with the step's number.
        False: a stop was requested (or the session closed) before it was admitted."""
        s, lock = self.s, self._lock
        renew = False
        while True:
            if self._resume is not None:  # an earlier step's first before_run failed: it goes first
                await self._resume.wait()
            if renew:  # (outside the lock, which the new session's after_create_session takes)
                renew = False
                await self.ready(step, None)
            if not lock.try_take():
                await lock.acquire()
            try:
                if step.cause is not None:  # none of its phases starts once another step's failure cancelled it
                    raise self.cancelled_error(step)
                if self._resume is not None:  # held while this step waited for the lock
                    continue
                if step.lane.renew:  # its lane's session was lost (by another step) as it waited
                    if not step.holds_lane:  # a step function's hooked run: the function's loss
                        raise AbortedError(
                            f"the session of lane {step.lane.index} was lost by another step; the step "
                            "function is called again with a new one"
                        )
                    renew = True
                    continue
                if s._state is not State.OPEN:
                    return False
                if self._next is None:
                    local = s._local
                    value = local.value if local is not None else await step_at_start(s._setup.counter)
                    self._counted = value
                    self._next = value + 1
                    self.turn.restart(self._next)
                step.number = self._next
                self._next += 1
                try:  # the before_run phase (``before``, inlined)
                    started = start_before(self, step)
                    if started is not None and type(started) is not list:  # a call suspended
                        started = await started
                    end_before(self, step, started)
                except BaseException as exc:
                    count_failure(self, step, exc)
                    if isinstance(exc, Exception):
                        self._held, self._resume = step, anyio.Event()
                    raise
            finally:
                lock.release()
            return True

    def unhold(self, step: Step) -> None:
        """``step`` no longer holds admission (its ``before_run`` phase is whole, or it ended)."""
        if self._held is step:
            assert self._resume is not None
            self._resume.set()
            self._held = self._resume = None

    async def before(self, step: Step) -> None:
        """The step's ``before_run`` phase (under the lock); its errors are counted."""
        try:
            started = start_before(self, step)
            if started is not None and type(started) is not list:  # a call suspended
                started = await started
            end_before(self, step, started)
        except BaseException as exc:
            count_failure(self, step, exc)
            raise

    async def after_failure(self, step: Step, failed: Exception, budget: RetryBudget | None) -> RetryBudget | Rescope:
        """``step``'s admission or attempt failed with ``failed``: the budget to re-run it
        with, its lane recovered per the retry policy; a ``Rescope`` when a failing hook
        cancelled its scope (it recovers under a new one). Any other error is raised (a
        clean-stop one only to the step's caller; one that does not recover cancels the other
        steps)."""
        s = self.s
        if isinstance(failed, CLEAN_STOP_TYPES):  # the caller's (``iterate`` stops the session on it)
            raise failed
        lost = self.recovery.recovers_from(failed)
        if lost:  # the lane's session is lost, whether this step recovers or not: whoever takes
            # the lane next replaces it first (however this step ends: given up, cancelled, or
            # cancelled already by another step's failure).
            self.recovery.fail_over(step.lane, None if step.ctx is None else step.ctx.session)
        if not self.recovers_from(step, failed):
            self.fail_others(step, failed)
            if s._state is State.CLOSED and step.cause is None and lost:
                raise self.sessions.closed_when_failed(step.lane) from failed
            raise failed
        if step.scope.cancel_called and step.cause is None:  # a failing hook stopped its phase so
            return Rescope(failed, budget)  # nothing more can wait under that scope
        step.leave_contexts(failed)  # the attempt is over; the re-run enters them anew
        budget = budget or self.recovery.retry.budget()
        if not await self._recover(step, failed, budget):
            self.fail_others(step, failed)
            raise failed
        return budget

    async def _recover(self, step: Step, failed: BaseException, budget: RetryBudget) -> bool:
        """Re-create the lane ``step`` failed on, for its re-run there; False when the retry
        policy gives up. A step whose run had returned gave its lane back: the policy says
        first whether to retry, then the step takes a lane again (``lane_again``), whose
        session is re-created if it is the lost one or marked lost."""
        sessions = self.sessions
        if step.holds_lane:
            return await sessions.recover(step.lane, failed, budget)
        action = f"recovering: re-running step {step.number} (its session on lane {step.lane.index} failed)"
        if not await sessions.wait_to_retry(budget, failed, action):
            return False
        return not await self.lane_again(step) or await sessions.recover(step.lane, failed, budget, waited=True)

    def recovers_from(self, step: Step, exc: BaseException) -> bool:
        """Whether ``exc`` re-creates the step's lane and re-runs the step."""
        if step.cause is not None:  # cancelled by another step's failure
            return False
        return self.recovery.recovers_from(exc) and self.s._state is not State.CLOSED and step.number > 0

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
        args = (fetches, feed_dict, options, run_metadata)
        step = self.take_free_lane(args, self.new_scope()) if self.free() else await self.take_lane(args)
        again: Rescope | None = None
        while True:  # the step under its own cancel scope, a new one after a ``Rescope``
            out: tuple[bool, Any] | Rescope | None = None
            with step.scope:
                out = await step_body(self, step, again)
            if out is None:  # cancelled by another step's failure (the step ended)
                raise self.cancelled_error(step)
            if not isinstance(out, Rescope):
                break
            again, step.scope = out, self.new_scope()
        admitted, results = out
        if not admitted:
            self.check_open("run()")  # says why
            raise RunAfterStopError(f"{type(self.s).__name__}.run() called after the session stopped")
        return results
