"""``MonitoredSession`` and ``SingularMonitoredSession``: the public classes, their
constructor and accessors, and the entry points of a step (``run``, ``iterate``,
``run_step_fn``, behind ``_admit``, the one check before a step starts).

A monitored session composes ``LaneSessions`` (``_lane_sessions.py``: its lanes, each
owning one raw session from creation to close, and its one coordinator) and, with
``max_in_flight > 1``, the steps-in-flight engine its entry points go to
(``_in_flight*.py``); its mixins are entering and closing (``_lifecycle.py``),
recovering a lane (``_recovering.py``), ``run`` (``_run.py``), the steps of one lane
at a time (``_stepping.py``) and the callers waiting for them (``_turns.py``). The
states (NEW, ENTERING, OPEN, STOPPED, CLOSED), what each allows and which changes exist
are tabled in ``_state.py``, whose ``move`` makes every change; ``_lifecycle.py`` makes
them all but a hook's stop request, OPEN → STOPPED (``_set_hook_stop``, here).

Orthogonal to the state: ``_busy`` (a step is running; with one lane, a caller from another
task, or a clean close, waits for it in ``_lifetime.waiting``: ``_turns.py``; with steps in
flight a clean close waits on ``_lifetime.step_done``). ``_admit`` is the one check of
``run``, ``iterate`` and ``run_step_fn``. What a session carries is declared once, in
``_state.py`` (``SessionAttributes``).

Invariants: begin runs once; every created session and coordinator is closed
exactly once; after_run runs only after a successful session run; a hook stop
request is sticky at once; the session task group outlives every task it holds.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any, TypeVar

if TYPE_CHECKING:
    from .._hook_protocol import RunMetadata, RunOptions
    from ._raw import SessionCreatorLike

from .._dispatch._dispatcher import Dispatcher
from .._dispatch._overrides import hook_list
from .._dispatch._plan import hook_name
from .._errors import RECOVERABLE_TYPES, SessionClosedError
from .._global_step import LocalStepCounter, StepCounter
from .._inside import STEPS_GET, STEPS_RESET, STEPS_SET, inside_error, inside_step
from .._observe._report import SessionStatistics
from .._observe._statistics import Collector, StatisticsOptions, statistics_options
from .._validate import (
    check_flag,
    check_seconds,
    check_step_counter,
    exception_types,
    refuse_awaitable,
)
from ._checks import check_step_fn
from ._factories import creator_function
from ._in_flight_iterate import InFlightIterator
from ._in_flight_setup import check_max_in_flight, in_flight_engine, with_occupancy
from ._in_flight_step_fn import run_step_fn as in_flight_step_fn
from ._iterate import StepIterator, check_feeds
from ._lane_sessions import LaneSessions
from ._lifecycle import Lifecycle, Lifetime, Setup
from ._recovering import Recovering
from ._retry import RetryPolicy
from ._run import Running, plain_steps
from ._state import OPENED as _OPENED
from ._state import State, move, refuse_step
from ._step_fn_context import StepContext
from ._stepping import LeftStep, Stepping, step_context_hooks
from ._turns import Turns

__all__ = ["MonitoredSession", "SingularMonitoredSession", "StepContext"]


T = TypeVar("T")

_OPEN = State.OPEN  # read on every step: a module global is cheaper than an enum attribute


class _MonitoredSessionBase(Lifecycle, Recovering, Stepping, Running, Turns):
    # Every attribute is a slot of ``SessionAttributes`` (``_state.py``), but the public
    # ``hooks`` and ``max_in_flight``.

    def __init__(
        self,
        session_creator: SessionCreatorLike,
        hooks: Iterable[object] | None = (),
        *,
        stop_grace_period: float = 120.0,
        step_counter: StepCounter | None = None,
        hook_timeout: float | None = None,
        retry: RetryPolicy | None = None,
        recoverable: Iterable[type[BaseException]] = (),
        retry_on: Iterable[type[BaseException]] = (),
        statistics: bool | StatisticsOptions = True,
        max_in_flight: int = 1,
    ) -> None:
        create_session = creator_function(session_creator)
        self.hooks = hook_list(hooks)
        self.max_in_flight = check_max_in_flight(type(self).__name__, max_in_flight, self.hooks)
        check_seconds("stop_grace_period", stop_grace_period, allow_zero=True)
        if hook_timeout is not None:
            check_seconds("hook_timeout", hook_timeout, allow_zero=False)
        counter = check_step_counter(step_counter)
        self._local = counter if type(counter) is LocalStepCounter else None
        retry = retry if retry is not None else RetryPolicy()
        if not isinstance(retry, RetryPolicy):
            raise TypeError(f"retry must be a hookrun.RetryPolicy, got {type(retry).__name__}")
        recoverable = RECOVERABLE_TYPES + exception_types(recoverable)
        retry_on = exception_types(retry_on, "retry_on")
        self._dispatcher = Dispatcher(self.hooks, hook_timeout=hook_timeout, task_group=self._task_group)
        plans = self._dispatcher.plans
        self._stats = Collector(plans, statistics_options(statistics))
        self._before, self._after = plans["before_run"], plans["after_run"]
        self._setup = Setup(
            create_session, self._stats, grace=float(stop_grace_period), retry=retry,
            recoverable=recoverable, retry_on=retry_on, counter=counter, step_hooks=step_context_hooks(self.hooks),
            traces_before_run=any(getattr(hook, "traces_before_run", False) is True for hook in self.hooks),
        )
        self._lifetime = Lifetime()
        self._step = self._run_in_step_contexts if self._setup.step_hooks else self._step_body()
        self._plain = max_in_flight == 1 and not retry_on and plain_steps(self)
        self._state = State.NEW
        self._busy = False
        self._coord = None
        self._setup.sessions = LaneSessions(self, session_creator, self.max_in_flight)
        self._lane = self._setup.sessions.lanes[0]
        self._on_stop = self._set_hook_stop
        # A creator that restores into the session (ChiefSessionCreator) and a hook that
        # saves it (CheckpointSaverHook) learn its hooks and counter.
        for party in (session_creator, *self.hooks):
            bind = getattr(party, "bind_session", None)
            bound = None if bind is None else bind(self.hooks, counter)
            if inspect.isawaitable(bound):
                refuse_awaitable(
                    bound,
                    f"{type(party).__name__}.bind_session returned an awaitable: it is called once, "
                    "synchronously, when the monitored session is constructed; make it a plain method",
                )
        self._in_flight = None if max_in_flight == 1 else in_flight_engine(self, session_creator, max_in_flight)

    def __repr__(self) -> str:
        names = ", ".join(hook_name(hook) for hook in self.hooks)
        return f"{type(self).__name__}({self._state.value}, hooks=[{names}])"

    # -- accessors -------------------------------------------------------------------------

    def raw_session(self) -> Any:
        """The current raw session (runs on it bypass the hooks), or ``None`` when there is
        none: before ``async with``, once closed, or after re-creating it failed. With
        ``max_in_flight > 1``: the first lane's that has one (also the one ``end`` receives)."""
        if self._in_flight is None:
            return self._lane.raw
        return next((lane.raw for lane in self._setup.sessions.lanes if lane.raw is not None), None)

    @property
    def step_counter(self) -> StepCounter:
        """The global step counter (the one hooks reach as ``coord.step_counter``)."""
        return self._setup.counter

    async def global_step(self) -> int:
        """The global step now: ``await sess.global_step()``."""
        return await self._setup.counter.get()

    def statistics(self) -> SessionStatistics:
        """What this session did so far: steps, sessions, recoveries, and every hook's calls,
        errors and latency (a frozen record; ``print`` it for a table).

        Kept unless the session was made with ``statistics=False``; then this raises
        ``RuntimeError``. Latencies come from sampled steps (see ``StatisticsOptions``).
        """
        if not self._stats.enabled:
            raise RuntimeError(
                f"{type(self).__name__} was made with statistics=False; pass statistics=True "
                "(the default) or a hookrun.StatisticsOptions to keep them"
            )
        snapshot = self._stats.snapshot()
        return snapshot if self.max_in_flight == 1 else with_occupancy(self, snapshot)

    def _step_now(self) -> int | None:
        """The global step for log lines, when it can be read without awaiting."""
        return self._local.value if self._local is not None else None

    # -- stepping --------------------------------------------------------------------------

    def should_stop(self) -> bool:
        """True once a hook requested stop, the coordinator stopped, or the session closed
        (False before ``async with``: nothing asked to stop yet)."""
        state = self._state
        if state is _OPEN:  # the common case first: identity checks only
            # (a failed lane is not a stop: a MonitoredSession's next run() recovers first)
            return self._coord.should_stop() and not (  # type: ignore[union-attr]  # OPEN: it exists
                self._RECOVERS and self._held_recoverable() is not None
            )
        return state is not State.NEW  # nothing asked to stop yet (TensorFlow's is made open)

    def _set_hook_stop(self) -> None:
        """A hook (or a step function) requested stop: sticky; nothing to stop unless open."""
        if self._state is _OPEN:
            self._state = move(self._state, State.STOPPED)
            self._stopped()  # an iterate() waiting for a feed (in any task) ends its loop now

    def _admit(self, what: str) -> bool:
        """The one check before a step starts: refuse it, saying why, unless it may run now
        (False) or once the step in progress, another task's, ended (True: ``_wait_turn``
        waits for it, in arrival order). From inside one of the session's own steps it is
        refused at once: it would wait for itself."""
        if self._state is _OPEN and not self._busy:
            return False
        if self._state in _OPENED and self._busy:
            if inside_step(self):
                raise inside_error(self, what)
            if self._state is _OPEN:
                return True
        refuse_step(self, self._state, what)
        return False  # pragma: no cover  # refuse_step raises

    def _refuse_broken(self) -> None:
        self._admit("run()")
        raise SessionClosedError(
            f"{type(self).__name__} has no session: re-creating it failed with {self._setup.sessions.broken()!r}"
        )

    def iterate(self, fetches: object = None, feeds: object = None, *, ordered: bool = True) -> StepIterator:
        """Run one step per item of ``feeds`` and yield each step's results (``async for``).

        ``feeds`` (the second argument: the first is the fetches) is an iterable or
        async iterable of feed dicts (``None`` items feed nothing), or ``None``: run
        until a stop is requested. Ends when the feeds run out, when ``should_stop()``
        is true, or when a step raises a clean-stop exception (``OutOfRangeError``,
        ``anyio.EndOfStream``...), which also stops the session.

        With ``max_in_flight=N > 1`` up to N steps are in flight and their results come in
        feed order, or as they complete with ``ordered=False``; steps go on being admitted
        while the loop body runs, until 2 N results wait to be taken (``aclose()`` stops).
        """
        check_flag("iterate(): ordered", ordered)
        # Stopped: the iterator ends at once, at every max_in_flight (it admits nothing).
        refused = self._state not in _OPENED or inside_step(self)
        if self._in_flight is not None:
            if refused:
                self._in_flight.check_entry("iterate()")
            check_feeds(feeds, fetches)
            return InFlightIterator(self._in_flight, fetches, feeds, ordered=ordered)
        if refused:
            self._admit("iterate()")
        check_feeds(feeds, fetches)
        return StepIterator(self, fetches, feeds, self._set_hook_stop)

    async def run_step_fn(self, step_fn: Callable[[StepContext], Awaitable[T]]) -> T:
        """Call ``step_fn(step_context)`` (async) and return its value; recovered calls get
        a context with the new session. Admitted as ``run()`` is (it waits for a lane)."""
        if self._in_flight is not None:  # on a free lane, waiting for one
            return await in_flight_step_fn(self._in_flight, step_fn)  # type: ignore[no-any-return]
        check_step_fn(step_fn)
        if self._admit("run_step_fn()"):  # another task's step is in progress: wait for it
            await self._wait_turn("run_step_fn()")
        self._busy = True
        inside = STEPS_SET((*STEPS_GET(), self))
        try:
            if self._RECOVERS:
                return await self._with_recovery(self._call_step_fn, step_fn)
            return await self._call_step_fn(step_fn)
        finally:
            STEPS_RESET(inside)
            self._pass_turn()  # to a caller (or a close) from another task waiting, if any

    async def _call_step_fn(self, step_fn: Callable[[StepContext], Awaitable[T]]) -> T:
        raw = self._lane.raw
        if raw is None:
            self._refuse_broken()
        return await step_fn(StepContext(self, raw))

    async def _run_with_hooks(
        self, fetches: object, feed_dict: Mapping[Any, Any] | None, options: RunOptions | None,
        run_metadata: RunMetadata | None,
    ) -> Any:
        """``StepContext.run_with_hooks`` with one lane: a step of that lane, admitted as
        ``run()`` is (none after a stop or a close), one at a time, whichever attempt of
        the step function started the one under way: one called while another is in
        progress (from another task) waits for it, in arrival order."""
        if self._state is not _OPEN:
            refuse_step(self, self._state, "run_with_hooks()")
        lane = self._lane
        if lane.hooked_run:
            if inside_step(lane):  # from inside that hooked run (a hook of it): it would wait for itself
                raise inside_error(self, "run_with_hooks()")
            await self._hooked_turn()
        lane.hooked_run = True
        inside = STEPS_SET((*STEPS_GET(), lane))  # what runs inside it knows (the lane stands for it)
        try:
            return await self._step(fetches, feed_dict, options, run_metadata)
        except LeftStep as left:  # a step_context raised leaving the step: the step function's error
            raise left.error from left.error.__cause__
        finally:
            STEPS_RESET(inside)
            self._pass_hooked()  # to the next hooked run of this step function waiting, if any


class MonitoredSession(_MonitoredSessionBase):
    """Drives a session step by step with hooks, a coordinator and recovery.

    A creator or hook with ``bind_session(hooks, step_counter)`` (a
    ``ChiefSessionCreator``, a ``CheckpointSaverHook``) is told this session's hooks and
    step counter here. Errors of the recoverable types re-create the session and re-run
    the whole call, following ``retry``. With ``max_in_flight=N > 1`` every hook must
    declare ``overlapping_steps = True`` (see "Steps in flight" in the docs).

    Args:
        session_creator: Makes each raw session: at entry, on every recovery, once per lane.
        hooks: The hooks, their results merged in this order (``SessionRunHook``s or alike).
        stop_grace_period: Seconds the coordinator's tasks get to finish when the session closes.
        retry: How recovery waits and gives up. ``None``: ``RetryPolicy()``, retrying for ever.
        recoverable: More types of a lost session, besides ``AbortedError``, ``UnavailableError``.
        retry_on: Errors of the session's run (a transient one, an HTTP 503 say) retried on
            the same session, following ``retry``: no new session, and the hooks see the
            step once.
        step_counter: The global step counter. ``None``: a new ``LocalStepCounter`` at 0.
        hook_timeout: Seconds an async hook call may take, then ``HookTimeoutError``.
        statistics: Keep statistics (``True``), none (``False``), or as ``StatisticsOptions`` say.
        max_in_flight: How many steps may run at once, each on a lane of its own.
    """

    _RECOVERS = True

    def __init__(
        self,
        session_creator: SessionCreatorLike,
        hooks: Iterable[object] | None = (),
        *,
        stop_grace_period: float = 120.0,
        retry: RetryPolicy | None = None,
        recoverable: Iterable[type[BaseException]] = (),
        retry_on: Iterable[type[BaseException]] = (),
        step_counter: StepCounter | None = None,
        hook_timeout: float | None = None,
        statistics: bool | StatisticsOptions = True,
        max_in_flight: int = 1,
    ) -> None:
        super().__init__(
            session_creator,
            hooks,
            stop_grace_period=stop_grace_period,
            step_counter=step_counter,
            hook_timeout=hook_timeout,
            retry=retry,
            recoverable=recoverable,
            retry_on=retry_on,
            statistics=statistics,
            max_in_flight=max_in_flight,
        )

    async def __aenter__(self) -> MonitoredSession:
        await super().__aenter__()
        return self


class SingularMonitoredSession(_MonitoredSessionBase):
    """A monitored session that never recovers: every error propagates.

    Args:
        session_creator: Makes each raw session: at entry, and once per lane.
        hooks: The hooks, their results merged in this order (``SessionRunHook``s or alike).
        stop_grace_period: Seconds the coordinator's tasks get to finish when the session closes.
        step_counter: The global step counter. ``None``: a new ``LocalStepCounter`` at 0.
        hook_timeout: Seconds an async hook call may take, then ``HookTimeoutError``.
        statistics: Keep statistics (``True``), none (``False``), or as ``StatisticsOptions`` say.
        max_in_flight: How many steps may run at once, each on a lane of its own.
    """

    def __init__(
        self,
        session_creator: SessionCreatorLike,
        hooks: Iterable[object] | None = (),
        *,
        stop_grace_period: float = 120.0,
        step_counter: StepCounter | None = None,
        hook_timeout: float | None = None,
        statistics: bool | StatisticsOptions = True,
        max_in_flight: int = 1,
    ) -> None:
        super().__init__(
            session_creator,
            hooks,
            stop_grace_period=stop_grace_period,
            step_counter=step_counter,
            hook_timeout=hook_timeout,
            statistics=statistics,
            max_in_flight=max_in_flight,
        )

    async def __aenter__(self) -> SingularMonitoredSession:
        await super().__aenter__()
        return self
