"""``MonitoredSession`` and friends: every state change of a monitored session happens here.

States: new → open (``__aenter__``: begin, create, after_create_session) →
closed (``aclose``/``__aexit__``). While open, ``run`` performs one step at a
time: before_run → merge → session run → step counter → after_run. Recovery
(``MonitoredSession`` only) closes the current session and coordinator without
``end``, creates new ones and re-runs the whole call.

Invariants: begin runs once; every created session and coordinator is closed
exactly once; after_run runs only after a successful session run; a hook stop
request is sticky at once; the session task group outlives every task it holds.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Hashable, Iterable, Mapping, Sequence
from types import MappingProxyType, TracebackType
from typing import TYPE_CHECKING, Any, TypeVar

import anyio

if TYPE_CHECKING:
    from anyio.abc import TaskGroup

from . import _nest
from ._coordinator import Coordinator
from ._dispatch import Dispatcher
from ._errors import (
    CLEAN_STOP_TYPES,
    RECOVERABLE_TYPES,
    DeadlineExceededError,
    RunAfterStopError,
    SessionClosedError,
)
from ._hooks import (
    RunMetadata,
    RunOptions,
    SessionRunContext,
    SessionRunValues,
    TimingRecord,
)
from ._iterate import StepIterator, check_feeds
from ._log import logger
from ._merge import DEFAULT_OPTIONS, FetchLayout, check_options, merge_feeds_and_options
from ._plan import hook_name
from ._recovery import RetryBudget, RetryPolicy
from ._sessions import check_values
from ._step import LocalStepCounter, StepCounter
from ._validate import (
    check_seconds,
    check_session,
    check_step_counter,
    check_step_fn,
    creator_function,
    exception_types,
    hook_list,
)

__all__ = ["MonitoredSession", "SingularMonitoredSession", "StepContext"]


T = TypeVar("T")
_NEW, _OPEN, _CLOSED = "new", "open", "closed"
_NO_FEEDS: Mapping[Any, Any] = MappingProxyType({})
_new_tuple = tuple.__new__  # builds a SessionRunValues without its Python-level __new__


class StepContext:
    """What ``run_step_fn`` gives the step function: the raw ``session`` (runs on it
    bypass hooks), ``run_with_hooks(...)`` (a full hooked run) and ``request_stop()``."""

    __slots__ = ("_owner", "session")

    def __init__(self, owner: _MonitoredSessionBase, session: Any) -> None:
        self._owner = owner
        self.session = session

    async def run_with_hooks(
        self,
        fetches: object = None,
        feed_dict: Mapping[Any, Any] | None = None,
        options: RunOptions | None = None,
        run_metadata: RunMetadata | None = None,
    ) -> Any:
        """One step with every hook, on the current session (no recovery of its own)."""
        return await self._owner._step(fetches, feed_dict, options, run_metadata)

    def request_stop(self) -> None:
        """Stop after this step function: ``should_stop()`` becomes True."""
        self._owner._set_hook_stop()


class _MonitoredSessionBase:
    #: Whether recoverable errors re-create the session (MonitoredSession) or propagate.
    _recovers = False

    def __init__(
        self,
        session_creator: object,
        hooks: Iterable[object] = (),
        *,
        stop_grace_period: float = 120.0,
        step_counter: StepCounter | None = None,
        hook_timeout: float | None = None,
        retry: RetryPolicy | None = None,
        recoverable: Iterable[type[BaseException]] = (),
    ) -> None:
        self._create_session = creator_function(session_creator)
        self.hooks = hook_list(hooks)
        check_seconds("stop_grace_period", stop_grace_period, allow_zero=True)
        if hook_timeout is not None:
            check_seconds("hook_timeout", hook_timeout, allow_zero=False)
        self._grace = float(stop_grace_period)
        self._counter = check_step_counter(step_counter)
        self._local = self._counter if type(self._counter) is LocalStepCounter else None
        self._retry = retry if retry is not None else RetryPolicy()
        if not isinstance(self._retry, RetryPolicy):
            raise TypeError(f"retry must be a hookrun.RetryPolicy, got {type(retry).__name__}")
        self._recoverable = RECOVERABLE_TYPES + exception_types(recoverable)
        self._dispatcher = Dispatcher(self.hooks, hook_timeout=hook_timeout, task_group=self._task_group)
        plans = self._dispatcher.plans
        self._begin, self._after_create = plans["begin"], plans["after_create_session"]
        self._before, self._after, self._end = plans["before_run"], plans["after_run"], plans["end"]
        self._hooked = bool(self._before.calls or self._after.calls)
        self._step = self._run_hooked if self._hooked else self._run_bare
        self._layout: FetchLayout | None = None  # the last step's fetch layout, reused while it fits
        #: A hook that may ask for a trace in before_run (ProfilerHook) needs that phase timed.
        self._time_before_run = any(getattr(hook, "traces_before_run", False) is True for hook in self.hooks)
        self._state = _NEW
        self._busy = False
        self._hook_stop = False
        self._tg: TaskGroup | None = None
        self._raw: Any = None
        self._coord: Coordinator | None = None
        #: Why there is no session while open: re-creating it failed.
        self._broken: BaseException | None = None
        self._on_stop = self._set_hook_stop

    def __repr__(self) -> str:
        names = ", ".join(hook_name(hook) for hook in self.hooks)
        return f"{type(self).__name__}({self._state}, hooks=[{names}])"

    # -- lifecycle -------------------------------------------------------------------------

    async def __aenter__(self: T) -> T:
        assert isinstance(self, _MonitoredSessionBase)
        if self._state is not _NEW:
            raise RuntimeError(f"{type(self).__name__} can be entered only once (it is {self._state})")
        self._state = _OPEN
        self._tg = anyio.create_task_group()
        await self._tg.__aenter__()
        try:
            await self._dispatcher.run(self._begin, ())
            await self._create(self._retry.budget())
        except BaseException as exc:
            await self._teardown(call_end=False, error=exc)
            raise
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> bool:
        clean = exc is None or isinstance(exc, CLEAN_STOP_TYPES)
        await self._teardown(call_end=clean, error=None if clean else exc)
        return exc is not None and clean

    async def aclose(self) -> None:
        """End cleanly: every hook's ``end``, then close the coordinator and the session.

        Closing twice does nothing. Leaving ``async with`` afterwards also does nothing more.
        """
        if self._state is _OPEN:
            await self._close(call_end=True, error=None)

    async def _teardown(self, *, call_end: bool, error: BaseException | None) -> None:
        try:
            if self._state is _OPEN:
                await self._close(call_end=call_end, error=error)
        finally:
            await self._exit_task_group()

    async def _close(self, *, call_end: bool, error: BaseException | None) -> None:
        """Close for good; with ``call_end`` run every ``end`` first and raise what failed."""
        self._state = _CLOSED
        failures: list[BaseException] = []
        interrupted: BaseException | None = None
        if call_end:
            try:
                await self._dispatcher.run(self._end, (self._raw,))
            except Exception as exc:
                failures.append(exc)
            except BaseException as exc:  # cancelled while ending: still close, then propagate
                interrupted = exc
        failures += await self._close_current(raise_errors=call_end and interrupted is None)
        if interrupted is not None:
            raise interrupted
        if failures and error is None:
            first = failures[0]
            for other in failures[1:]:
                first.add_note(f"hookrun: closing also failed: {other!r}")
            raise first
        for other in failures:
            assert error is not None
            error.add_note(f"hookrun: closing after this error also failed: {other!r}")

    async def _close_current(self, *, raise_errors: bool) -> list[BaseException]:
        """Close the current coordinator and session (shielded, bounded by the grace period)."""
        coord, raw = self._coord, self._raw
        self._coord = self._raw = None
        failures: list[BaseException] = []
        with anyio.move_on_after(2 * self._grace + 1.0, shield=True) as scope:
            if coord is not None:
                try:
                    await coord._close_hosted(self._grace, ignore_live_tasks=True)
                except Exception as exc:
                    failures.append(exc)
            if raw is not None:
                try:
                    await _aclose(raw)
                except Exception as exc:
                    failures.append(exc)
        if scope.cancelled_caught:
            logger().warning(
                "closing the session took longer than stop_grace_period=%ss; gave up waiting",
                self._grace,
            )
        if not raise_errors:
            for failure in failures:
                logger().warning("error while closing a session: %r", failure, exc_info=failure)
            return []
        return failures

    async def _exit_task_group(self) -> None:
        tg, self._tg = self._tg, None
        self._dispatcher.reset_pool()
        if tg is not None:
            # Nothing of ours runs there any more; the group's exit waits for its tasks
            # to unwind (it must be the innermost scope, so it cannot be shielded here).
            tg.cancel_scope.cancel()
            await tg.__aexit__(None, None, None)

    def _task_group(self) -> TaskGroup:
        if self._tg is None:
            raise SessionClosedError(f"{type(self).__name__} is not open")
        return self._tg

    # -- creation and recovery -------------------------------------------------------------

    async def _create(self, budget: RetryBudget) -> None:
        while True:
            try:
                await self._create_once()
                return
            except Exception as exc:
                if not (self._recovers and self._is_recoverable(exc)) or not await budget.wait_to_retry():
                    raise
                logger().warning("creating the session failed (%r); retrying", exc)

    async def _create_once(self) -> None:
        raw = await self._create_session()
        try:
            check_session(raw)
            coord = Coordinator(clean_stop_exception_types=(), step_counter=self._counter)
            assert self._tg is not None
            await coord._open_in(self._tg)
        except BaseException:
            with anyio.CancelScope(shield=True):
                await _aclose_logged(raw)
            raise
        self._raw, self._coord = raw, coord
        try:
            await self._dispatcher.run(self._after_create, (raw, coord))
        except BaseException:
            await self._close_current(raise_errors=False)
            raise

    async def _recover(self, budget: RetryBudget, cause: BaseException) -> None:
        logger().warning("recovering from %r: re-creating the session", cause)
        coord_error = self._coord.exception if self._coord is not None else None
        failures = await self._close_current(raise_errors=True)
        for exc in failures:
            if exc is coord_error and self._is_recoverable(exc):
                continue
            if self._is_recoverable(exc):
                logger().warning("error while closing a failed session: %r", exc)
                continue
            self._broken = exc
            raise exc
        await self._create_again(budget)

    async def _create_again(self, budget: RetryBudget) -> None:
        """Create the session after the previous one was closed; remember why if it fails."""
        try:
            await self._create(budget)
        except BaseException as exc:
            self._broken = exc
            raise
        self._broken = None

    def _is_recoverable(self, exc: BaseException) -> bool:
        return isinstance(exc, self._recoverable)

    def _recoverable_cause(self, exc: BaseException) -> BaseException | None:
        """The error to recover from: the step's, or a recoverable one the coordinator holds."""
        if self._is_recoverable(exc):
            return exc
        held = self._coord.exception if self._coord is not None else None
        if held is not None and self._is_recoverable(held):
            return held
        return None

    # -- stepping --------------------------------------------------------------------------

    def should_stop(self) -> bool:
        """True once a hook requested stop, the coordinator stopped, or the session closed."""
        if self._state is not _OPEN or self._hook_stop:
            return True
        coord = self._coord
        if coord is None:
            return True
        if coord._stopped:
            held = coord.exception
            return not (self._recovers and held is not None and self._is_recoverable(held))
        return False

    def _set_hook_stop(self) -> None:
        self._hook_stop = True

    def _refuse(self, what: str) -> None:
        if self._state is _NEW:
            raise SessionClosedError(f"{type(self).__name__}.{what} called outside 'async with'")
        if self._state is _CLOSED:
            raise SessionClosedError(f"{type(self).__name__}.{what} called after the session closed")
        if self._busy:
            raise RuntimeError(
                f"{type(self).__name__}.{what} called while another run() or run_step_fn() "
                "of this session is in progress (from another task, or re-entered from a hook); "
                "a monitored session runs one step at a time"
            )
        raise RunAfterStopError(f"{type(self).__name__}.{what} called after a hook requested stop")

    def _refuse_broken(self) -> None:
        if self._state is not _OPEN:
            self._refuse("run()")
        raise SessionClosedError(
            f"{type(self).__name__} has no session: re-creating it failed with {self._broken!r}"
        )

    async def run(
        self,
        fetches: object = None,
        feed_dict: Mapping[Any, Any] | None = None,
        options: RunOptions | None = None,
        run_metadata: RunMetadata | None = None,
    ) -> Any:
        """One step: before_run → session run → after_run; returns the caller's fetches."""
        if self._state is not _OPEN or self._busy or self._hook_stop:
            self._refuse("run()")
        self._busy = True
        try:
            if self._recovers and (self._coord is None or self._coord._stopped):
                return await self._with_recovery(self._step, fetches, feed_dict, options, run_metadata)
            try:
                return await self._step(fetches, feed_dict, options, run_metadata)
            except Exception as exc:
                if not self._recovers or self._recoverable_cause(exc) is None:
                    raise
                return await self._with_recovery(self._step, fetches, feed_dict, options, run_metadata, failed=exc)
        finally:
            self._busy = False

    def iterate(self, fetches: object = None, feeds: object = None) -> StepIterator:
        """Run one step per item of ``feeds`` and yield each step's results (``async for``).

        ``feeds`` is an iterable or async iterable of feed dicts (``None`` items feed
        nothing), or ``None``: run until a stop is requested. Ends when the feeds run
        out, when ``should_stop()`` is true, or when a step raises a clean-stop
        exception (``OutOfRangeError``, ``anyio.EndOfStream``...), which also stops
        the session.
        """
        if self._state is not _OPEN:
            self._refuse("iterate()")
        check_feeds(feeds)
        return StepIterator(self, fetches, feeds, self._set_hook_stop)

    async def run_step_fn(self, step_fn: Callable[[StepContext], Awaitable[T]]) -> T:
        """Call ``step_fn(step_context)`` (async) and return its value; recovered calls get
        a context with the new session."""
        check_step_fn(step_fn)
        if self._state is not _OPEN or self._busy or self._hook_stop:
            self._refuse("run_step_fn()")
        self._busy = True
        try:
            if self._recovers:
                return await self._with_recovery(self._call_step_fn, step_fn)
            return await self._call_step_fn(step_fn)
        finally:
            self._busy = False

    async def _call_step_fn(self, step_fn: Callable[[StepContext], Awaitable[T]]) -> T:
        if self._raw is None:
            self._refuse_broken()
        return await step_fn(StepContext(self, self._raw))

    async def _with_recovery(
        self, attempt: Callable[..., Awaitable[T]], *args: Any, failed: BaseException | None = None
    ) -> T:
        """Run ``attempt`` until it succeeds, recovering from recoverable errors per the policy.

        ``failed`` is the error of an attempt already made (the caller's fast path).
        """
        budget: RetryBudget | None = None
        while True:
            if failed is not None:
                cause = self._recoverable_cause(failed)
                if cause is None:
                    raise failed
                budget = budget or self._retry.budget()
                if not await budget.wait_to_retry():
                    raise cause from (failed if cause is not failed else None)
                await self._recover(budget, cause)
                failed = None
            try:
                if self._raw is None:  # lost to a failed or cancelled re-creation: try again
                    budget = budget or self._retry.budget()
                    await self._create_again(budget)
                coord = self._coord
                if coord is not None and coord.should_stop():
                    held = coord.exception
                    if held is not None and self._is_recoverable(held):
                        raise held
                return await attempt(*args)
            except Exception as exc:
                failed = exc

    async def _run_bare(
        self,
        fetches: object,
        feed_dict: Mapping[Any, Any] | None,
        options: RunOptions | None,
        run_metadata: RunMetadata | None,
    ) -> Any:
        """A step when no hook overrides before_run or after_run."""
        raw = self._raw
        if raw is None:
            self._refuse_broken()
        keys: list[Hashable] = []
        shape = None if fetches is None else _nest.index(fetches, "the caller", keys, {})
        metadata = RunMetadata() if run_metadata is None else run_metadata
        feeds = feed_dict or _NO_FEEDS
        if options is None:
            # ``_session_run`` written out for the default options: its coroutine frame is
            # a sixth of this whole step's cost (measured 1.56 -> 1.37x the reference, K=0).
            values = await raw.run(keys, feeds, DEFAULT_OPTIONS, metadata)
            if (type(values) is not list and type(values) is not tuple) or len(values) != len(keys):
                values = check_values(raw, keys, values)
        else:
            values = await self._session_run(raw, keys, feeds, check_options(options, "the caller"), metadata)
        if self._local is not None:
            self._local.increment_nowait(1)
        else:
            await self._counter.increment(1)
        return None if shape is None else _nest.pack(shape, values)

    async def _session_run(
        self, raw: Any, keys: Sequence[Hashable], feeds: Mapping[Any, Any], options: RunOptions, metadata: RunMetadata
    ) -> Sequence[Any]:
        """The raw session's run of one step, its values checked against the keys."""
        if options is DEFAULT_OPTIONS:
            values = await raw.run(keys, feeds, options, metadata)
        else:
            values = await self._session_run_with_options(raw, keys, feeds, options, metadata)
        if (type(values) is not list and type(values) is not tuple) or len(values) != len(keys):
            values = check_values(raw, keys, values)
        return values  # type: ignore[no-any-return]

    async def _session_run_with_options(
        self, raw: Any, keys: Sequence[Hashable], feeds: Mapping[Any, Any], options: RunOptions, metadata: RunMetadata
    ) -> Any:
        start = anyio.current_time() if options.trace else 0.0
        try:
            if options.timeout is None:
                return await raw.run(keys, feeds, options, metadata)
            with anyio.move_on_after(options.timeout):
                return await raw.run(keys, feeds, options, metadata)
            raise DeadlineExceededError(
                f"{type(raw).__name__}.run took longer than RunOptions.timeout={options.timeout}s"
            )
        finally:
            if options.trace:
                metadata.timings.append(TimingRecord("run", "run", start, anyio.current_time()))

    async def _run_hooked(
        self,
        fetches: object,
        feed_dict: Mapping[Any, Any] | None,
        options: RunOptions | None,
        run_metadata: RunMetadata | None,
    ) -> Any:
        """A step with hooks: before_run → merge → session run → step counter → after_run."""
        raw = self._raw
        if raw is None:
            self._refuse_broken()
        local = self._local
        step = local.value if local is not None else await self._counter.get()
        ctx = SessionRunContext((fetches, feed_dict, options), raw, step, self._on_stop)
        metadata = RunMetadata() if run_metadata is None else run_metadata
        if options is None:
            merged, trace = DEFAULT_OPTIONS, None
        else:
            merged = check_options(options, "the caller")
            trace = metadata.timings if merged.trace else None
        speculative = trace is None and self._time_before_run
        if speculative:
            trace = metadata.timings
        shapes: dict[int, Any] | None = None  # hook index -> shape of what it fetched
        feeds = feed_dict
        before = self._before
        requests: Sequence[Any] = ()
        if before.calls:
            started = self._dispatcher.start(before, (ctx,), trace)
            requests = started if isinstance(started, list) else await started
        if requests and requests.count(None) != len(requests):
            layout = self._layout
            if layout is None or not layout.fits(fetches, requests):
                layout = self._layout = FetchLayout(fetches, before.calls, requests)
            keys: Sequence[Hashable] = layout.keys
            shape, shapes = layout.caller_shape, layout.shapes or None
            feeds, merged = merge_feeds_and_options(before.calls, requests, feed_dict, merged)
        else:
            keys = []
            shape = None if fetches is None else _nest.index(fetches, "the caller", keys, {})
        if speculative and not merged.trace:
            del metadata.timings[:]  # timed in case a hook asked for a trace; none did
        values = await self._session_run(raw, keys, feeds or _NO_FEEDS, merged, metadata)
        after_step = local.increment_nowait(1) if local is not None else await self._counter.increment(1)
        after = self._after
        if after.calls:
            nothing = _new_tuple(SessionRunValues, (None, merged, metadata, after_step))
            args: Sequence[tuple[Any, ...]] | tuple[Any, ...]
            if shapes is None:
                args = (ctx, nothing)
            else:
                args = [
                    (ctx, nothing if call.index not in shapes else _new_tuple(
                        SessionRunValues, (_nest.pack(shapes[call.index], values), merged, metadata, after_step)
                    ))
                    for call in after.calls
                ]
            finishing = self._dispatcher.start(after, args, metadata.timings if merged.trace else None)
            if not isinstance(finishing, list):
                await finishing
        return None if shape is None else _nest.pack(shape, values)


class MonitoredSession(_MonitoredSessionBase):
    """Drives a session step by step with hooks, a coordinator and recovery.

    ``session_creator`` is an object with ``async create_session()`` or an async
    factory. Errors of the recoverable types (``AbortedError``,
    ``UnavailableError`` and ``recoverable``) re-create the session and re-run
    the whole call, following ``retry``.
    """

    _recovers = True

    def __init__(
        self,
        session_creator: object,
        hooks: Iterable[object] = (),
        *,
        stop_grace_period: float = 120.0,
        retry: RetryPolicy | None = None,
        recoverable: Iterable[type[BaseException]] = (),
        step_counter: StepCounter | None = None,
        hook_timeout: float | None = None,
    ) -> None:
        super().__init__(
            session_creator,
            hooks,
            stop_grace_period=stop_grace_period,
            step_counter=step_counter,
            hook_timeout=hook_timeout,
            retry=retry,
            recoverable=recoverable,
        )

    async def __aenter__(self) -> MonitoredSession:
        await super().__aenter__()
        return self


class SingularMonitoredSession(_MonitoredSessionBase):
    """A monitored session that never recovers: every error propagates."""

    def __init__(
        self,
        session_creator: object,
        hooks: Iterable[object] = (),
        *,
        stop_grace_period: float = 120.0,
        step_counter: StepCounter | None = None,
        hook_timeout: float | None = None,
    ) -> None:
        super().__init__(
            session_creator,
            hooks,
            stop_grace_period=stop_grace_period,
            step_counter=step_counter,
            hook_timeout=hook_timeout,
        )

    async def __aenter__(self) -> SingularMonitoredSession:
        await super().__aenter__()
        return self

    def raw_session(self) -> Any:
        """The current raw session, or ``None`` once closed."""
        return self._raw


async def _aclose(raw: object) -> None:
    close = getattr(raw, "aclose", None)
    if close is not None:
        await close()


async def _aclose_logged(raw: object) -> None:
    try:
        await _aclose(raw)
    except Exception as exc:
        logger().warning("error while closing a session: %r", exc, exc_info=exc)

