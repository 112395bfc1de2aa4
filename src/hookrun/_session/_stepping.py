"""One step on the current raw session at one lane: before_run → merge → session run →
step counter → after_run; and a step function's attempt there (``call_step_fn``) and its
hooked run (``run_with_hooks``). No state changes of the monitored session happen here
(``_state.py`` draws them and checks each, ``_lifecycle.py`` and ``_base.py`` make them);
a step either returns the caller's results or raises.

Why a step body of its own at one lane, beside the lanes' (``step_body`` in
``_in_flight_step.py``, which runs the same phases, from the same plans, through the same
dispatcher): a step on one lane needs none of what lets steps overlap (the phase lock,
the turnstile, the lane pool, the step record and its cancel scope, the admission
window). Routing one-lane steps through the lanes' body, measured side by side in one
process (``python -m benchmarks.peers --hooks 1``, CPU clock), made a step with one
async hook cost 15-16 us on asyncio and 19 us on trio against 3.0 us here (and one with
a plain hook 13-18 us against 1.7 us in ``run()``'s plain plan): five to ten times the
step, on the rows whose target is the peers' (pluggy: 2.6 us). What the two bodies share is
written once: the plans and the dispatcher, the fetch layout (``Lane.layout_for``), the
merge (``gather``), the after_run arguments (``_after_run_args``), the raw run with
its options and retries (``_raw_run``), the check of its values and the statistics.

The step bodies are functions taking the monitored session as ``self`` (as the lanes'
``step_body`` takes the engine); the constructor picks one into the session's ``_step``
(``step_body``, or ``run_in_step_contexts`` when a hook has a ``step_context``), and the
session's entry points call it with the session. They read the hooks' plans, the
dispatcher, the counter and the current raw session from it. A step whose
phases may need cancelling (a phase with several async hooks) runs under one cancel
scope, entered once for both phases (see ``_dispatch/_dispatcher.py``).

How a step starts a phase, by the phase's plan (an untraced step; a traced one always
goes through the dispatcher, which records every call's span):

======================================  ==================================================
the phase                               started by
======================================  ==================================================
plain functions only (``plan.plain``)   ``call_before`` / ``call_after``: in turn, here
one async call (``plan.lone``)          ``start_one``, then ``drive`` if it suspended
anything else                           ``Dispatcher.start`` (``_dispatcher.py``)
======================================  ==================================================
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Hashable, Mapping, Sequence
from contextlib import ExitStack
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, TypeVar

import anyio

from .._dispatch import _nest
from .._dispatch._merge import DEFAULT_OPTIONS, check_options, merge_feeds_and_options
from .._dispatch._start import Suspended, call_after, call_before, drive, start_one
from .._errors import CLEAN_STOP_TYPES, DeadlineExceededError
from .._global_step import step_at_start
from .._hook_protocol import (
    RunMetadata,
    RunOptions,
    SessionRunContext,
    SessionRunValues,
    TimingRecord,
)
from .._inside import STEPS_GET, STEPS_RESET, STEPS_SET, inside_error, inside_step
from ._diagnose import note_missing_fetch
from ._raw import check_values
from ._state import State, refuse_step
from ._step_fn_context import StepContext

if TYPE_CHECKING:
    from .._dispatch._plan import Call
    from ._base import _MonitoredSessionBase
    from ._lanes import Lane
    from ._retry import RetryBudget

__all__ = [
    "LeftStep", "call_step_fn", "gather", "general_step", "leave_step_contexts", "run_in_step_contexts",
    "run_with_hooks", "scoped_step", "step_body",
]

T = TypeVar("T")


NO_FEEDS: Mapping[Any, Any] = MappingProxyType({})
_new_tuple = tuple.__new__  # builds a SessionRunValues without its Python-level __new__


def step_body(self: _MonitoredSessionBase) -> Callable[..., Awaitable[Any]]:
    """The step inside the hooks' step contexts: scoped when a phase has a hook after an
    async one (it may need cancelling), else the general step."""
    return scoped_step if self._before.cancellable or self._after.cancellable else general_step


async def run_in_step_contexts(
    self: _MonitoredSessionBase, fetches: object, feed_dict: Mapping[Any, Any] | None, options: RunOptions | None,
    run_metadata: RunMetadata | None,
) -> Any:
    """A step inside every ``step_context(run_context, run_metadata)`` the hooks give,
    entered in the calling task before ``before_run`` and left after the step (or its
    error), in reverse order. Only taken when some hook has a ``step_context``."""
    raw = self._lane.raw
    if raw is None:
        self._refuse_broken()
    local = self._local
    step = local.value if local is not None else await step_at_start(self._setup.counter)
    ctx = SessionRunContext((fetches, feed_dict, options), raw, step, self._on_stop)
    metadata = RunMetadata() if run_metadata is None else run_metadata
    stack = ExitStack()
    try:
        try:
            for hook in self._setup.step_hooks:
                stack.enter_context(hook.step_context(ctx, metadata))
        except BaseException as exc:  # the step failed in its before_run phase, as with lanes
            stats = self._stats
            stats.steps += 1
            stats.failed("before_run", exc)
            raise
        results = await step_body(self)(self, fetches, feed_dict, options, metadata, ctx=ctx)
    except BaseException as exc:
        leave_step_contexts(stack, exc)
        raise
    try:  # left here, so that an error leaving a step that went well is told apart
        stack.close()
    except Exception as exc:
        raise LeftStep(exc) from None
    return results


async def scoped_step(
    self: _MonitoredSessionBase, fetches: object, feed_dict: Mapping[Any, Any] | None, options: RunOptions | None,
    run_metadata: RunMetadata | None, ctx: SessionRunContext | None = None,
) -> Any:
    """A step with hooks under the step's cancel scope (the session steps straight into
    ``general_step`` when no phase needs one)."""
    with self._dispatcher.new_scope() as scope:
        return await general_step(self, fetches, feed_dict, options, run_metadata, scope, ctx)
    raise AssertionError("unreachable: only a failing phase cancels the step's scope")  # pragma: no cover


async def general_step(
    self: _MonitoredSessionBase, fetches: object, feed_dict: Mapping[Any, Any] | None, options: RunOptions | None,
    run_metadata: RunMetadata | None, scope: anyio.CancelScope | None = None,
    ctx: SessionRunContext | None = None, asked: list[Any] | None = None,
) -> Any:
    """A step, with hooks or none (``scope``: the step's cancel scope, when a phase needs one;
    ``ctx``: the step's context, when ``step_context`` hooks or ``run()`` already made
    it; ``asked``: the requests of before_run calls ``run()`` already made, when a hook
    asked for something)."""
    raw = self._lane.raw
    if raw is None:
        self._refuse_broken()
    local = self._local
    step: int | None
    if ctx is not None:
        step = ctx.global_step
    elif self._before.calls or self._after.calls:
        step = local.value if local is not None else await step_at_start(self._setup.counter)
        ctx = SessionRunContext((fetches, feed_dict, options), raw, step, self._on_stop)
    else:  # no hook call needs the step's context (nor a read of a shared counter)
        step = local.value if local is not None else None
    merged = DEFAULT_OPTIONS if options is None else check_options(options, "the caller")
    stats = self._stats
    stats.steps += 1
    sampled = stats.steps >= stats.next_sample  # time this step for the statistics
    if sampled:
        before, after = stats.before, stats.after
        started = stats.start_sample()
    else:
        before, after = self._before, self._after
    metadata = RunMetadata() if run_metadata is None else run_metadata
    where = "before_run"
    run_seconds: float | None = None
    try:
        trace = metadata.timings if merged.trace or self._setup.traces_before_run else None
        requests: Any = asked  # the hooks' requests: a list, or None when none asked for anything
        if asked is not None:  # run() made the calls (plain functions only)
            pass
        elif trace is None and before.plain is not None:  # plain functions only
            requests = call_before(before, ctx)
        elif trace is None and before.lone is not None:  # one async call
            requests = start_one(before.lone, (ctx,))
            if type(requests) is Suspended:
                requests = await drive(requests)
            requests = None if requests is None else [requests]
        elif before.calls:
            requests = self._dispatcher.start(before, [(ctx,)] * len(before.calls), scope, trace)
            if type(requests) is not list:
                requests = await requests
        where = "run"
        if requests is not None and requests.count(None) != len(requests):
            keys, shape, shapes, feeds, merged = gather(self, self._lane, fetches, feed_dict, merged, requests)
        else:  # no hook asked for anything
            keys, shapes, feeds = [], None, feed_dict
            shape = None if fetches is None else _nest.index(fetches, "the caller", keys, {})
        if trace is not None and not merged.trace:
            del metadata.timings[:]  # timed in case a hook asked for a trace; none did
        if sampled:
            run_started = stats.clock()
        try:  # _raw_run, inlined (as the check of the values below): a step after a wait pays for every call
            if merged is DEFAULT_OPTIONS and not self._setup.retry_on:
                values = await raw.run(keys, feeds or NO_FEEDS, merged, metadata)
            else:
                values = await _raw_run(self, raw, keys, feeds or NO_FEEDS, merged, metadata)
        except KeyError as exc:  # a missing fetch: say which party asked for it
            note_missing_fetch(exc, fetches, self._before.calls, requests or ())
            raise
        if sampled:
            run_seconds = stats.clock() - run_started
        if (type(values) is not list and type(values) is not tuple) or len(values) != len(keys):
            values = check_values(raw, keys, values)
        after_step = local.increment_nowait(1) if local is not None else await self._setup.counter.increment(1)
        where = "after_run"
        if after.calls:
            nothing = _new_tuple(SessionRunValues, (None, merged, metadata, after_step))
            if after.lone is not None and not merged.trace:  # one async call
                pending = start_one(
                    after.lone,
                    (ctx, nothing) if shapes is None else _after_run_args(after.calls, ctx, shapes, values, nothing)[0],
                )
                if type(pending) is Suspended:
                    await drive(pending)
            elif after.plain is not None and shapes is None and not merged.trace:
                call_after(after, ctx, nothing)  # plain functions only, none fetched anything
            else:
                pending = self._dispatcher.start(
                    after, _after_run_args(after.calls, ctx, shapes, values, nothing), scope,
                    metadata.timings if merged.trace else None,
                )
                if type(pending) is not list:
                    await pending  # type: ignore[misc]
    except BaseException as exc:
        stats.failed(where, exc)
        if sampled:
            stats.end_sample(step, started, run_seconds, False)
        raise
    if sampled:
        stats.end_sample(step, started, run_seconds, True)
    return None if shape is None else _nest.pack(shape, values)


def gather(
    self: _MonitoredSessionBase, lane: Lane, fetches: object, feed_dict: Mapping[Any, Any] | None, options: RunOptions,
    requests: Sequence[Any],
) -> tuple[Sequence[Hashable], Any, dict[int, Any] | None, Mapping[Any, Any] | None, RunOptions]:
    """The one run the step on ``lane`` makes of the caller's fetches and the hooks'
    requests: its keys, the caller's shape, each hook's shape (by hook index), the
    merged feeds and options, when some hook asked for something. The layout of the
    lane's last step is reused while the requests fit it."""
    layout = lane.layout_for(fetches, self._before.calls, requests)
    feeds, merged = merge_feeds_and_options(self._before.calls, requests, feed_dict, options)
    return layout.keys, layout.caller_shape, layout.shapes or None, feeds, merged


async def call_step_fn(self: _MonitoredSessionBase, step_fn: Callable[[StepContext], Awaitable[T]]) -> T:
    """One attempt of ``run_step_fn`` with one lane: ``step_fn`` with the lane's raw session."""
    raw = self._lane.raw
    if raw is None:
        self._refuse_broken()
    return await step_fn(StepContext(self, raw))


async def run_with_hooks(
    self: _MonitoredSessionBase, fetches: object, feed_dict: Mapping[Any, Any] | None, options: RunOptions | None,
    run_metadata: RunMetadata | None,
) -> Any:
    """``StepContext.run_with_hooks`` with one lane: a step of that lane, admitted as
    ``run()`` is (none after a stop or a close), one at a time, whichever attempt of
    the step function started the one under way: one called while another is in
    progress (from another task) waits for it, in arrival order (``Turns.wait_hooked``)."""
    if self._state is not State.OPEN:
        refuse_step(self, self._state, "run_with_hooks()")
    lane = self._lane
    if lane.hooked_run:
        if inside_step(lane):  # from inside that hooked run (a hook of it): it would wait for itself
            raise inside_error(self, "run_with_hooks()")
        await self._turns.wait_hooked()
    lane.hooked_run = True
    inside = STEPS_SET((*STEPS_GET(), lane))  # what runs inside it knows (the lane stands for it)
    try:
        return await self._step(self, fetches, feed_dict, options, run_metadata)
    except LeftStep as left:  # a step_context raised leaving the step: the step function's error
        raise left.error from left.error.__cause__
    finally:
        STEPS_RESET(inside)
        self._turns.pass_hooked()  # to the next hooked run of this step function waiting, if any


def leave_step_contexts(contexts: ExitStack, error: BaseException) -> None:
    """Leave the hooks' ``step_context``s of an attempt that failed with ``error``, in
    reverse order. None can swallow it (what ``__exit__`` returns is ignored: a step that
    failed never looks as if it went well), and an error one raises is noted on ``error``."""
    try:
        contexts.__exit__(type(error), error, error.__traceback__)
    except BaseException as other:
        if other is not error:
            error.add_note(f"hookrun: leaving a hook's step_context also failed: {other!r}")


class LeftStep(BaseException):
    """A hook's ``step_context`` raised ``error`` as it left a step that went well: the step
    ran (its ``after_run`` was called, the counter moved), so it is not re-run; the entry
    point (``run``, ``run_with_hooks``) raises ``error`` itself, past its recovery. A
    ``BaseException``, so that no recovery on the way catches it."""

    def __init__(self, error: Exception) -> None:
        super().__init__(error)
        self.error = error


def _after_run_args(
    calls: Sequence[Call], ctx: SessionRunContext | None, shapes: dict[int, Any] | None, values: Sequence[Any],
    nothing: SessionRunValues,
) -> list[tuple[Any, ...]]:
    """Each after_run call's ``(run_context, run_values)``: exactly the structure its hook
    fetched, or ``nothing`` (``results`` None) if it fetched nothing (``shapes``: each
    fetching hook's structure by hook index; ``None`` when no hook fetched anything;
    ``ctx``: None only for a session without hooks, which has no calls)."""
    if shapes is None:
        return [(ctx, nothing)] * len(calls)
    _, options, metadata, step = nothing
    return [
        (ctx, nothing if call.index not in shapes else _new_tuple(
            SessionRunValues, (_nest.pack(shapes[call.index], values), options, metadata, step)
        ))
        for call in calls
    ]


def _raw_run(
    session: Any, raw: Any, keys: Sequence[Hashable], feeds: Mapping[Any, Any], options: RunOptions,
    metadata: RunMetadata,
) -> Awaitable[Any]:
    """The raw session's run of one step, to be awaited by the step itself (a coroutine
    layer of its own would cost about 0.1 us a step); the step checks the values it
    returns: one per key (``check_values``, when they are not a list or tuple of as
    many). The steps that inline the common case (default
    options, no ``retry_on``) call ``raw.run`` themselves and this otherwise."""
    if session._setup.retry_on:
        return run_retrying(session, raw, keys, feeds, options, metadata)
    if options is DEFAULT_OPTIONS:
        return raw.run(keys, feeds, options, metadata)  # type: ignore[no-any-return]
    return _run_with_options(raw, keys, feeds, options, metadata)


async def run_retrying(
    session: Any, raw: Any, keys: Sequence[Hashable], feeds: Mapping[Any, Any], options: RunOptions,
    metadata: RunMetadata,
) -> Any:
    """The raw run, run again on the same session while it raises an error of the session's
    ``retry_on`` (waiting as its retry policy says, with a budget of the step's own); the
    hooks see the step once. When the policy gives up, the last error is raised (and
    recovers the session if it is also a recoverable one)."""
    budget: RetryBudget | None = None
    while True:
        try:
            if options is DEFAULT_OPTIONS:
                return await raw.run(keys, feeds, options, metadata)
            return await _run_with_options(raw, keys, feeds, options, metadata)
        except session._setup.retry_on as exc:
            if isinstance(exc, CLEAN_STOP_TYPES):
                raise
            budget = budget or session._setup.retry.budget()
            stats = session._stats
            started = stats.now()
            try:
                again = await budget.wait_to_retry(exc, action="retrying the step's run on the same session",
                                                   step=session._step_now())
            finally:
                stats.retry_wait_seconds += stats.now() - started
            if not again:
                raise
            stats.step_retries += 1


async def _run_with_options(
    raw: Any, keys: Sequence[Hashable], feeds: Mapping[Any, Any], options: RunOptions, metadata: RunMetadata
) -> Any:
    """The raw run with a timeout (``DeadlineExceededError``) and a span when traced."""
    start = anyio.current_time() if options.trace else 0.0
    try:
        if options.timeout is None:
            return await raw.run(keys, feeds, options, metadata)
        with anyio.move_on_after(options.timeout) as scope:
            values = await raw.run(keys, feeds, options, metadata)
        if scope.cancel_called:  # cancelled in time, or a run that held on past the deadline
            raise DeadlineExceededError(
                f"{type(raw).__name__}.run took longer than RunOptions.timeout={options.timeout}s"
                + ("" if scope.cancelled_caught else " (it returned late; its values are discarded)")
            )
        return values
    finally:
        if options.trace:
            metadata.timings.append(TimingRecord("run", "run", start, anyio.current_time()))
