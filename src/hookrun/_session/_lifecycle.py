"""Entering and closing a monitored session: functions taking the session (``enter``,
``leave``, ``close``), which its ``__aenter__``, ``__aexit__`` and ``aclose`` call, and
what they keep: ``Setup``, fixed by the constructor, and ``Lifetime``, their bookkeeping.
They are functions, not an object of their own: entering and closing move the session's
state and read what every part of it holds (the dispatcher, the lanes, the callers
waiting, the steps in flight), and keep nothing but ``Lifetime``.

Entering (``enter``) opens the session's task group, runs every hook's ``begin``
(once, ever), creates every lane's session (``_lane_sessions.py``) and moves NEW → ENTERING →
OPEN; no step starts while it enters (``run()`` from another task is refused).
Closing (``aclose``, ``__aexit__``, or an entry that failed) moves any state to CLOSED:
every hook's ``end`` when the exit is clean and there is a session to end with (else
every started hook's ``on_exception``, ``_exits.py``), then the coordinator and the raw
session, shielded and bounded by the grace period, then the task group, left last so
that it outlives every task it holds.

A clean close from another task while a step runs (OPEN) waits for that step to end
(no new step starts once the close began: with one lane the callers waiting for that
step are refused at once, ``_turns.py``), then ends and closes: ``end`` comes after the
step's ``after_run`` and the session is never closed under its run. A step that
fails with a recoverable error meanwhile is not recovered (``SessionClosedError``);
``end`` receives that session, as it receives a failed session still waiting to be
replaced. A step (or an entry) waiting to retry stops waiting at once and raises
``SessionClosedError``, creating nothing. An ``iterate()`` waiting for the next item of
an async feed stops waiting at once and ends its loop, as it does on a stop (``stopped``,
which a stop of a hook, a step function or the coordinator calls too). A close from
inside that very step (a hook, a step function) is refused, as it would wait for itself;
a second close waits for the first one to be done.

The block, when it is left (cancelled, as a rule) while a close from another task is
under way, waits for that close before it tears its task group down, and first stops
that close's ``end``: the hooks are cancelled, each in the task that started it, and that
``aclose()`` raises ``SessionClosedError``. The workers of an ``end`` phase run in a task
group of the closing task, never the session's, so the block's cancellation reaches
them only that way.

A close from another task while the session is being entered wins: the entry creates
no session after it, closes the one created meanwhile (``after_create_session`` ran,
``end`` does not: ``on_exception`` receives the ``SessionClosedError``) and raises
``SessionClosedError``; the body never runs.

Invariants: every created session and coordinator is closed exactly once
(``LaneSessions`` takes them off the lanes before closing them); ``end`` never
receives ``None``; a clean close raises the first error closing met (the others as
notes); a close after an error adds them to that error as notes instead.
"""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

import anyio

from .._coordinator._tasks import watch_stops
from .._dispatch._workers import WorkerPool
from .._errors import CLEAN_STOP_TYPES, SessionClosedError
from .._log import log_warning
from ._exits import ExitHooks
from ._in_flight_iterate_exits import raise_left
from ._retry import flush_retry_log
from ._serving import claim_hooks
from ._state import CLOSABLE as _CLOSABLE
from ._state import OPENED as _OPENED
from ._state import State, move

if TYPE_CHECKING:
    from anyio.abc import TaskGroup

    from .._dispatch._plan import PhasePlan
    from .._global_step import StepCounter
    from .._observe._statistics import Collector
    from ._base import _MonitoredSessionBase
    from ._lane_sessions import LaneSessions
    from ._recovering import Recovery
    from ._retry import RetryPolicy

__all__ = ["Lifetime", "Setup", "close", "enter", "leave", "steps_ended", "stopped"]


class Setup:
    """What the constructor fixed for entering, recovering and closing a monitored session:
    read at entry, on a retry or a recovery and at close, never by a step that goes well
    (but a step that enters hooks' ``step_context``s or awaits a counter that is not local)."""

    __slots__ = (
        "after_create", "begin", "counter", "create_session", "end", "exits", "grace", "recovery", "retry", "retry_on",
        "sessions", "step_hooks", "traces_before_run",
    )

    def __init__(
        self,
        create_session: Callable[[], Awaitable[Any]],
        stats: Collector,
        *,
        grace: float,
        retry: RetryPolicy,
        retry_on: tuple[type[BaseException], ...],
        counter: StepCounter,
        step_hooks: tuple[Any, ...],
        traces_before_run: bool,
    ) -> None:
        #: The global step counter; a step reads the session's ``_local`` instead when it is
        #: a ``LocalStepCounter``, and this one only when it is not (it awaits it).
        self.counter = counter
        #: Hooks entering a context around every step (``step_context``), read by a step
        #: that enters them; none: no cost at all (the constructor picks a step without them).
        self.step_hooks = step_hooks
        #: A hook that may ask for a trace in before_run (``ProfilerHook``) needs that phase
        #: timed: read by a step whose options ask for no trace.
        self.traces_before_run = traces_before_run
        #: The lanes' raw sessions and the one coordinator, at every N (``_lane_sessions.py``),
        #: set once they exist; a step reads its lane (``_lane``) or the engine's lanes.
        self.sessions: LaneSessions
        #: Makes the first lane's raw session (``_lane_sessions.py``).
        self.create_session = create_session
        #: ``stop_grace_period``: how long a close waits for what it closes.
        self.grace = grace
        self.retry = retry
        #: Whether an error re-creates a session, and the one lane's retry loop
        #: (``_recovering.py``), set with ``sessions``.
        self.recovery: Recovery
        #: Errors of the raw run retried on the same session (``_stepping.run_retrying``).
        self.retry_on = retry_on
        self.after_create: PhasePlan = stats.plan("after_create_session")
        self.end: PhasePlan = stats.plan("end")
        #: The hooks' ``on_exception`` on an exit that does not end them (``_exits.py``).
        self.exits = ExitHooks(stats.plan("on_exception"), grace)
        #: ``begin``, each call marking its hook as started for ``exits``.
        self.begin: PhasePlan = self.exits.watch_begin(stats.plan("begin"))


class Lifetime:
    """What entering and closing a monitored session keep between them, and what a close
    waits on."""

    __slots__ = ("closing", "ending", "step_done", "stop_waits", "tg")

    def __init__(self) -> None:
        #: The session's task group, from entry to the end of the close.
        self.tg: TaskGroup | None = None
        #: With steps in flight: set by a clean close from another task that waits for the
        #: steps in flight to end; the last one's end sets it.
        self.step_done: anyio.Event | None = None
        #: Set once a close is done; None until one starts.
        self.closing: anyio.Event | None = None
        #: The scope of the hooks' end while a close runs it.
        self.ending: anyio.CancelScope | None = None
        #: The waits a stop or a close ends (``iterate()``'s for a feed: ``StepIterator._next_feed``),
        #: each one's cancel scope while it waits; ``stopped`` cancels them.
        self.stop_waits: list[anyio.CancelScope] = []


async def enter(self: _MonitoredSessionBase) -> None:
    """Enter ``self`` (its ``__aenter__``): begin, then every lane's session (see the module docstring)."""
    if self._state is not State.NEW:
        raise RuntimeError(f"{type(self).__name__} can be entered only once (it is {self._state.value})")
    claim_hooks(self)  # a hook that another open session serves is refused, before any begin
    self._state = move(self._state, State.ENTERING)
    setup = self._setup
    tg = self._lifetime.tg = anyio.create_task_group()
    await tg.__aenter__()
    try:
        await self._dispatcher.run(setup.begin, [()] * len(setup.begin.calls))
        if self._state is State.ENTERING:  # not closed by another task meanwhile
            await self._setup.sessions.create_all(setup.retry.budget())
        if self._state is State.CLOSED:  # another task closed it: close what was created since
            await self._setup.sessions.close_all(raise_errors=False)
            raise SessionClosedError(f"{type(self).__name__} was closed while it was being entered")
        self._state = move(self._state, State.OPEN)
        if self._coord is not None:
            watch_stops(self._coord, functools.partial(stopped, self))
    except BaseException as exc:
        await _teardown(self, call_end=False, error=exc)
        raise


async def leave(self: _MonitoredSessionBase, exc: BaseException | None) -> bool:
    """Leave the block (``__aexit__``) after ``exc``, if any: a clean exit ends the hooks;
    whether ``exc`` is swallowed (a clean-stop error)."""
    clean = exc is None or isinstance(exc, CLEAN_STOP_TYPES)
    await _teardown(self, call_end=clean, error=None if clean else exc)
    return exc is not None and clean


def stopped(self: _MonitoredSessionBase) -> None:
    """A stop may have been requested (by a hook or a step function, ``_set_hook_stop``;
    by the coordinator, from any task: its watcher) or the session closed: if it should
    stop now, the waits a stop ends (``iterate()``'s for the next item of an async feed,
    at every ``max_in_flight``) end at once, wherever they wait."""
    waits = self._lifetime.stop_waits
    if waits and self.should_stop():
        for scope in waits:
            scope.cancel()


async def _teardown(self: _MonitoredSessionBase, *, call_end: bool, error: BaseException | None) -> None:
    try:
        await close(self, call_end=call_end, error=error)
        if error is not None:  # another task closed it without ending: tell the hooks of this error
            await self._setup.exits.settle(None, ending=False, exception=error, step=self._step_now())
    except BaseException:
        await _stop_other_close(self)
        raise
    finally:
        await _exit_task_group(self)


async def _stop_other_close(self: _MonitoredSessionBase) -> None:
    """The block is being left (cancelled, as a rule) while a close from another task is
    under way: stop that close's ``end`` (its hooks are cancelled, in their own tasks)
    and wait, shielded and bounded, for it to close the rest, so the task group is torn
    down under nothing. That ``aclose()`` raises ``SessionClosedError``."""
    lifetime, grace = self._lifetime, self._setup.grace
    closing = lifetime.closing
    if closing is None or closing.is_set():
        return
    if lifetime.ending is not None:
        lifetime.ending.cancel()
    with anyio.move_on_after(2 * grace + 1.0, shield=True):
        await closing.wait()
    if not closing.is_set():
        log_warning(
            "the close under way in another task took longer than stop_grace_period=%ss "
            "to stop; gave up waiting", grace, step=self._step_now(),
        )


async def close(self: _MonitoredSessionBase, *, call_end: bool, error: BaseException | None) -> None:
    """Close for good, or wait for the close another task has under way (its
    ``closing``, set once it is done); nothing when never entered or already closed."""
    lifetime = self._lifetime
    if self._state not in _CLOSABLE:
        if lifetime.closing is not None:
            await lifetime.closing.wait()
        return
    lifetime.closing = closing = anyio.Event()
    try:
        await _close_now(self, call_end=call_end, error=error)
    finally:
        closing.set()


async def _close_now(self: _MonitoredSessionBase, *, call_end: bool, error: BaseException | None) -> None:
    """Close for good; with ``call_end`` run every ``end`` first and raise what failed."""
    was, self._state = self._state, move(self._state, State.CLOSED)
    stopped(self)  # an iterate() waiting for a feed ends its loop now
    self._turns.refuse_all()  # with one lane, callers waiting for a step are refused now
    self._setup.sessions.backoffs.cancel()  # another task waits to retry: it stops waiting at once
    if not call_end and self._busy:  # an error or a cancellation: the steps in flight end first
        await _abandon_steps(self, error)
    failures: list[BaseException] = []
    interrupted: BaseException | None = None
    # Leaving the block cancels ``ending`` when this close runs in another task.
    lifetime = self._lifetime
    ending = lifetime.ending = anyio.CancelScope()
    try:
        with ending:
            call_end = await _end_hooks(self, was, call_end, failures, error)
    except BaseException as exc:  # cancelled while waiting or ending: still close, then propagate
        interrupted, call_end = exc, False
    finally:
        lifetime.ending = None
    left = ending.cancelled_caught and not failures  # end done, with errors, before the cut: raise those
    cut = None if not left else SessionClosedError(
        f"the 'async with' block of {type(self).__name__} was left (cancelled) while aclose() "
        "ran in another task: the hooks' end was cut short; the coordinator and the session are closed"
    )
    if interrupted is not None or cut is not None:  # the hooks hear why, unless their end began
        if self._busy:
            await _abandon_steps(self, interrupted or cut)
        await self._setup.exits.settle(
            self.raw_session(), ending=False, exception=interrupted or cut, step=self._step_now()
        )
    failures += await self._setup.sessions.close_all(raise_errors=call_end and interrupted is None and not left)
    flush_retry_log(self._setup.retry)  # the retries still counted are written when the session closes
    if interrupted is not None:
        raise interrupted
    if cut is not None:
        raise cut
    if failures and error is None:
        first = failures[0]
        for other in failures[1:]:
            first.add_note(f"hookrun: closing also failed: {other!r}")
        raise first
    for other in failures:
        assert error is not None
        error.add_note(f"hookrun: closing after this error also failed: {other!r}")


async def _abandon_steps(self: _MonitoredSessionBase, why: BaseException | None) -> None:
    """Cancel the steps in flight and wait for them to end (shielded, bounded by the grace
    period), so that no hook call runs beside ``on_exception`` (``InFlight.abandon``).
    One step at a time runs in its caller's task, which this cannot cancel: nothing to do."""
    engine = self._in_flight
    if engine is not None:
        await engine.abandon(why)


async def _end_hooks(
    self: _MonitoredSessionBase, was: State, call_end: bool, failures: list[BaseException], error: BaseException | None
) -> bool:
    """Wait for a step running in another task, then every hook's ``end`` (its errors go
    to ``failures``); whether ``end`` was called."""
    if call_end and was in _OPENED and self._busy and not all(lane.renew for lane in self._setup.sessions.lanes):
        # A step runs in another task (no new one starts: the state is CLOSED): end and
        # close after it, never under it. Cancelled while waiting: close without end.
        # Not for steps renewing their lanes: they stop at the close (a wait to retry is
        # cut short, a session created after it is closed at once).
        await steps_ended(self)
    if self._in_flight is not None:  # a step's KeyboardInterrupt or SystemExit no iterator raised
        raise_left(self._in_flight, error)
    raw = self.raw_session()
    if call_end and raw is None:
        # No session to end with (re-creating it failed, or it is being created in
        # another task): ``end`` never receives None.
        broken = self._setup.sessions.broken()
        if broken is not None:
            why = f"re-creating it failed: {broken!r}"
        else:  # another task is creating it: entering, or recovering
            why = "it is being created" if self._stats.sessions_created == 0 else "it is being re-created"
        log_warning("closing without a session (%s); the hooks' end is not called", why, step=self._step_now())
        call_end = False
    # Every hook either ends or hears why not: ``on_exception``, shielded (``_exits.py``).
    setup = self._setup
    end = setup.end
    await setup.exits.settle(raw, ending=call_end, exception=error or setup.sessions.broken(), step=self._step_now())
    if not call_end or not end.calls:
        return call_end
    # The phase's workers run in a task group of this task, not the session's: the
    # block, when it is cancelled, cancels the session's group's tasks too, even under
    # a close running in another task. No exception leaves this group (on trio it
    # would come out wrapped in an exception group): it is raised after it.
    stopped: BaseException | None = None
    try:
        async with anyio.create_task_group() as tg:
            try:
                await self._dispatcher.run(end, [(raw,)] * len(end.calls), pool=WorkerPool(lambda: tg))
            except Exception as exc:
                failures.append(exc)
            except BaseException as exc:
                stopped = exc
            tg.cancel_scope.cancel()  # the phase is done: its workers, parked, retire
    finally:
        if stopped is not None:
            raise stopped
    return True


async def steps_ended(self: _MonitoredSessionBase) -> None:
    """A clean close from another task waits for the step in progress (with one lane, like a
    caller: ``Turns.step_ended``), or with steps in flight for them all to end
    (``InFlight.end`` sets ``step_done``)."""
    if self._in_flight is None:
        await self._turns.step_ended()
        return
    lifetime = self._lifetime
    lifetime.step_done = done = anyio.Event()
    try:
        await done.wait()
    finally:
        lifetime.step_done = None


async def _exit_task_group(self: _MonitoredSessionBase) -> None:
    lifetime = self._lifetime
    tg, lifetime.tg = lifetime.tg, None
    self._dispatcher.reset_pool()
    if tg is not None:
        # Nothing of ours runs there any more; the group's exit waits for its tasks
        # to unwind (it must be the innermost scope, so it cannot be shielded here).
        tg.cancel_scope.cancel()
        await tg.__aexit__(None, None, None)
