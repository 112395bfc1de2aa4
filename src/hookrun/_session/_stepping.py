"""One step on the current raw session: before_run → merge → session run → step counter →
after_run. No state changes of the monitored session happen here (``_state.py`` draws
them and checks each, ``_lifecycle.py`` and ``_recovering.py`` make them); a step either
returns the caller's results or raises.

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
merge (``_gather``), the after_run arguments (``_after_run_args``), the raw run with
its options and retries (``_raw_run``), the check of its values and the statistics.

``Stepping`` is the part of the monitored session that runs steps; it reads the hooks'
plans, the dispatcher, the counter and the current raw session from it. A step whose
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
from typing import TYPE_CHECKING, Any

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
from ._diagnose import note_missing_fetch
from ._raw import check_values
from ._state import SessionAttributes

if TYPE_CHECKING:
    from .._dispatch._plan import Call
    from ._lanes import Lane
    from ._retry import RetryBudget

__all__ = ["LeftStep", "Stepping", "leave_step_contexts", "step_context_hooks"]

NO_FEEDS: Mapping[Any, Any] = MappingProxyType({})
_new_tuple = tuple.__new__  # builds a SessionRunValues without its Python-level __new__


class Stepping(SessionAttributes):
    """The step bodies of a monitored session (a mixin of it)."""

    def _step_body(self) -> Callable[..., Awaitable[Any]]:
        """The step inside the hooks' step contexts: scoped when a phase has a hook after an
        async one (it may need cancelling), else the general step."""
        return self._scoped_step if self._before.cancellable or self._after.cancellable else self._general_step

    async def _run_in_step_contexts(
        self, fetches: object, feed_dict: Mapping[Any, Any] | None, options: RunOptions | None,
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
            results = await self._step_body()(fetches, feed_dict, options, metadata, ctx=ctx)
        except BaseException as exc:
            leave_step_contexts(stack, exc)
            raise
        try:  # left here, so that an error leaving a step that went well is told apart
            stack.close()
        except Exception as exc:
            raise LeftStep(exc) from None
        return results

    async def _scoped_step(
        self, fetches: object, feed_dict: Mapping[Any, Any] | None, options: RunOptions | None,
        run_metadata: RunMetadata | None, ctx: SessionRunContext | None = None,
    ) -> Any:
        """A step with hooks under the step's cancel scope (the session steps straight into
        ``_general_step`` when no phase needs one)."""
        with self._dispatcher.new_scope() as scope:
            return await self._general_step(fetches, feed_dict, options, run_metadata, scope, ctx)
        raise AssertionError("unreachable: only a failing phase cancels the step's scope")  # pragma: no cover

    async def _general_step(
        self, fetches: object, feed_dict: Mapping[Any, Any] | None, options: RunOptions | None,
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
                keys, shape, shapes, feeds, merged = self._gather(self._lane, fetches, feed_dict, merged, requests)
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

    def _gather(
        self, lane: Lane, fetches: object, feed_dict: Mapping[Any, Any] | None, options: RunOptions,
        requests: Sequence[Any],
    ) -> tuple[Sequence[Hashable], Any, dict[int, Any] | None, Mapping[Any, Any] | None, RunOptions]:
        """The one run the step on ``lane`` makes of the caller's fetches and the hooks'
        requests: its keys, the caller's shape, each hook's shape (by hook index), the
        merged feeds and options, when some hook asked for something. The layout of the
        lane's last step is reused while the requests fit it."""
        layout = lane.layout_for(fetches, self._before.calls, requests)
        feeds, merged = merge_feeds_and_options(self._before.calls, requests, feed_dict, options)
        return layout.keys, layout.caller_shape, layout.shapes or None, feeds, merged


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


def step_context_hooks(hooks: Sequence[object]) -> tuple[object, ...]:
    """The hooks with a ``step_context`` method, in list order (decided once, at freeze time)."""
    found = []
    for index, hook in enumerate(hooks):
        method = getattr(hook, "step_context", None)
        if method is None:
            continue
        if not callable(method):
            raise TypeError(f"hooks[{index}] ({type(hook).__name__}): step_context is not callable")
        found.append(hook)
    return tuple(found)
