"""``_MonitoredSessionBase``: what a monitored session composes, its constructor and
accessors, and its entry points (``run``, ``iterate``, ``run_step_fn``, entering and
closing), each the class's own method. See ``_monitored.py`` for the parts it composes.

``run`` keeps the step of plain hook calls in its own coroutine (``_run.py`` says why);
any other step goes to the step body the constructor chose (``_step``: a function of
``_stepping.py``, called with the session). ``_admit`` is the one check of ``run``,
``iterate`` and ``run_step_fn``; ``_set_hook_stop`` makes a hook's stop request, OPEN →
STOPPED (``_lifecycle.py`` makes every other change of state).
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable, Hashable, Iterable, Mapping
from types import TracebackType
from typing import TYPE_CHECKING, Any, TypeVar

if TYPE_CHECKING:
    from anyio.abc import TaskGroup

    from ._raw import SessionCreatorLike

from .._dispatch import _nest
from .._dispatch._dispatcher import Dispatcher
from .._dispatch._merge import DEFAULT_OPTIONS
from .._dispatch._overrides import hook_list
from .._dispatch._plan import hook_name
from .._dispatch._start import call_after, call_before
from .._errors import RECOVERABLE_TYPES, SessionClosedError
from .._global_step import LocalStepCounter, StepCounter
from .._hook_protocol import (
    RunMetadata,
    RunOptions,
    SessionRunContext,
    SessionRunValues,
    check_feed_dict,
)
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
from ._checks import check_step_fn, step_context_hooks
from ._diagnose import note_missing_fetch
from ._factories import creator_function
from ._in_flight_iterate import InFlightIterator
from ._in_flight_setup import check_max_in_flight, in_flight_engine, with_occupancy
from ._in_flight_step_fn import run_step_fn as in_flight_step_fn
from ._iterate import StepIterator, check_feeds
from ._lane_sessions import LaneSessions
from ._lifecycle import Lifetime, Setup, close, enter, leave, stopped
from ._raw import check_values
from ._recovering import Recovery
from ._retry import RetryPolicy
from ._run import plain_steps
from ._state import CLOSABLE, SessionAttributes, State, move, refuse_step
from ._state import OPENED as _OPENED
from ._step_fn_context import StepContext
from ._stepping import (
    NO_FEEDS,
    LeftStep,
    call_step_fn,
    general_step,
    run_in_step_contexts,
    run_with_hooks,
    step_body,
)
from ._turns import Turns

__all__ = ["_MonitoredSessionBase"]


T = TypeVar("T")

_OPEN = State.OPEN  # read on every step: a module global is cheaper than an enum attribute
_new_tuple = tuple.__new__  # builds a SessionRunValues without its Python-level __new__


class _MonitoredSessionBase(SessionAttributes):
    # Every attribute is a slot of ``SessionAttributes`` (``_state.py``), but the public
    # ``hooks`` and ``max_in_flight``. Every method is the class's own: none is inherited
    # from a part, and none is set on an instance.

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
        self._setup = setup = Setup(
            create_session, self._stats, grace=float(stop_grace_period), retry=retry,
            retry_on=retry_on, counter=counter, step_hooks=step_context_hooks(self.hooks),
            traces_before_run=any(getattr(hook, "traces_before_run", False) is True for hook in self.hooks),
        )
        self._lifetime = Lifetime()
        self._turns = Turns(self)
        self._step = run_in_step_contexts if setup.step_hooks else step_body(self)
        self._plain = max_in_flight == 1 and not retry_on and plain_steps(self)
        self._state = State.NEW
        self._busy = False
        self._coord = None
        setup.sessions = sessions = LaneSessions(self, session_creator, self.max_in_flight)
        setup.recovery = Recovery(self, sessions, recovers=self._RECOVERS, types=recoverable, retry=retry)
        self._lane = sessions.lanes[0]
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

    # -- entering and closing (``_lifecycle.py``) ------------------------------------------

    def __enter__(self) -> None:
        raise TypeError(f"{type(self).__name__} is an async context manager: use 'async with', not 'with'")

    def __exit__(self, *exc_info: object) -> None:  # never reached: __enter__ refuses
        raise TypeError(f"{type(self).__name__} is an async context manager: use 'async with', not 'with'")

    async def __aenter__(self) -> _MonitoredSessionBase:
        await enter(self)
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None,
    ) -> bool:
        return await leave(self, exc)

    async def aclose(self) -> None:
        """End cleanly: every hook's ``end``, then close the coordinator and the session.

        Closing twice does nothing more; a close while another task closes the session
        returns once that close is done. Leaving ``async with`` afterwards does nothing more.
        Called from another task, it raises ``SessionClosedError`` if the block is left
        (cancelled) before the hooks' ``end`` is done: that cancellation cuts ``end`` short.
        """
        if self._state in CLOSABLE and inside_step(self):
            raise inside_error(self, "aclose()")
        await close(self, call_end=True, error=None)

    def _task_group(self) -> TaskGroup:
        """The session's task group, while it is open (the dispatcher's workers, the coordinator's tasks)."""
        tg = self._lifetime.tg
        if tg is None:
            raise SessionClosedError(f"{type(self).__name__} is not open")
        return tg

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
            return self._coord.should_stop() and not self._setup.recovery.pending()  # type: ignore[union-attr]  # OPEN: it exists
        return state is not State.NEW  # nothing asked to stop yet (TensorFlow's is made open)

    def _set_hook_stop(self) -> None:
        """A hook (or a step function) requested stop: sticky; nothing to stop unless open."""
        if self._state is _OPEN:
            self._state = move(self._state, State.STOPPED)
            stopped(self)  # an iterate() waiting for a feed (in any task) ends its loop now

    def _admit(self, what: str) -> bool:
        """The one check before a step starts: refuse it, saying why, unless it may run now
        (False) or once the step in progress, another task's, ended (True: ``Turns.wait``
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

    async def run(
        self,
        fetches: object = None,
        feed_dict: Mapping[Any, Any] | None = None,
        options: RunOptions | None = None,
        run_metadata: RunMetadata | None = None,
    ) -> Any:
        """One step: before_run → session run → after_run; returns the caller's fetches.

        Called from another task while every lane is busy (with the default
        ``max_in_flight=1``: while a step is in progress), it waits for a lane, in arrival
        order, then runs, or raises as a call then would (``RunAfterStopError`` after a
        stop, ``SessionClosedError`` after a close). Called from inside one of the
        session's own steps (a hook, the raw run, a step function), it raises
        ``RuntimeError`` at once.
        """

        if self._in_flight is not None:  # on a free lane, waiting for one
            return await self._in_flight.run(fetches, feed_dict, options, run_metadata)
        stats = self._stats
        plain = self._plain and (  # every hook call a plain function, and the common step
            self._state is _OPEN and not self._busy
            and (feed_dict is None or type(feed_dict) is dict) and options is None
            and stats.steps + 1 < stats.next_sample
            and not (self._lane.renew or self._coord.should_stop())  # type: ignore[union-attr]  # (a recovery first)
        )
        if not plain:
            queued = (self._state is not _OPEN or self._busy) and self._admit("run()")
            if feed_dict is not None and type(feed_dict) is not dict:
                check_feed_dict(feed_dict, "the caller")  # a list or a string is refused here
            if queued:  # another task's step is in progress: its end hands the lane to this one
                await self._turns.wait("run()")
        self._busy = True
        inside = STEPS_SET((*STEPS_GET(), self))
        try:
            if not plain and (self._lane.renew or self._coord.should_stop()) and self._setup.recovery.recovers:  # type: ignore[union-attr]
                return await self._setup.recovery.with_recovery(self._step, self, fetches, feed_dict, options, run_metadata)
            try:
                if not plain:
                    return await self._step(self, fetches, feed_dict, options, run_metadata)
                # The step of plain hook calls, here (see the module docstring).
                raw, local = self._lane.raw, self._local
                before, after = self._before, self._after
                ctx: Any = None  # no hook call, no context
                if before.calls or after.calls:
                    ctx = SessionRunContext((fetches, feed_dict, None), raw, local.value, self._on_stop)  # type: ignore[union-attr]
                metadata = RunMetadata() if run_metadata is None else run_metadata
                stats.steps += 1
                try:
                    asked = call_before(before, ctx) if before.calls else None
                except BaseException as exc:
                    stats.failed("before_run", exc)
                    raise
                if asked is not None:  # a hook asked for something: the general step goes on from here
                    stats.steps -= 1  # and counts it
                    return await general_step(self, fetches, feed_dict, None, metadata, None, ctx, asked)
                where = "run"
                try:
                    keys: list[Hashable] = []
                    shape = None if fetches is None else _nest.index(fetches, "the caller", keys, {})
                    try:
                        values = await raw.run(keys, feed_dict or NO_FEEDS, DEFAULT_OPTIONS, metadata)
                    except KeyError as exc:  # a missing fetch: the caller's, as no hook asked for any
                        note_missing_fetch(exc, fetches, before.calls, ())
                        raise
                    if (type(values) is not list and type(values) is not tuple) or len(values) != len(keys):
                        values = check_values(raw, keys, values)
                    after_step = local.increment_nowait(1)  # type: ignore[union-attr]
                    where = "after_run"
                    if after.calls:
                        nothing = _new_tuple(SessionRunValues, (None, DEFAULT_OPTIONS, metadata, after_step))
                        call_after(after, ctx, nothing)  # no hook fetched anything
                except BaseException as exc:
                    stats.failed(where, exc)
                    raise
                return None if shape is None else _nest.pack(shape, values)
            except Exception as exc:
                recovery = self._setup.recovery
                if not recovery.recovers or recovery.cause_of(exc) is None:
                    raise
                recovery.fail_over(self._lane)
                return await recovery.with_recovery(
                    self._step, self, fetches, feed_dict, options, run_metadata, failed=exc
                )
        except LeftStep as left:  # a step_context raised leaving a step that went well: not re-run
            raise left.error from left.error.__cause__
        finally:
            STEPS_RESET(inside)
            if self._turns.waiting:  # a caller (or a close) from another task waits for this step
                self._turns.pass_on()
            else:  # (``Turns.pass_on``'s case of nobody waiting, without its call on every step)
                self._busy = False

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
            await self._turns.wait("run_step_fn()")
        self._busy = True
        inside = STEPS_SET((*STEPS_GET(), self))
        try:
            if self._setup.recovery.recovers:
                return await self._setup.recovery.with_recovery(call_step_fn, self, step_fn)
            return await call_step_fn(self, step_fn)
        finally:
            STEPS_RESET(inside)
            self._turns.pass_on()  # to a caller (or a close) from another task waiting, if any

    #: ``StepContext.run_with_hooks`` with one lane (``_stepping.py``).
    _run_with_hooks = run_with_hooks
