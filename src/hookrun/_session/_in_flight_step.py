"""One step in flight, for the engine (``_in_flight.py``): ``Step`` (its lane, number,
cancel scope and what its phases computed), ``Slot`` (what ``iterate`` keeps of it until
it yields its results) and its body, ``step_body``, which runs a step that holds a lane
from its admission to its end, in one coroutine:

1. its lane re-created first if it has none (``InFlight.ready``), then its admission
   (``InFlight.admit``: the phase lock, its number, its ``before_run`` phase);
2. its raw run, outside the lock (``start_run``, awaited by ``step_body`` itself); the lane
   is freed as soon as it returns;
3. its turn (the turnstile), then under the lock the step counter and ``after_run``
   (``finish_step``);
4. on a failure, per the retry policy, its lane re-created and 2-3 again with its
   ``before_run`` phase first (``InFlight.after_failure``).

The hook phases are started by synchronous code (``start_before``; ``after_run`` in
``finish_step``): the dispatcher hands back the calls' results, or a coroutine to await
only when a call suspended. The lock, the turnstile and the lane pool are taken without
a coroutine when nothing waits.

With many steps in flight the objects each one keeps while its run waits are what the
garbage collector walks over and over (with 1024 steps of 10 ms in flight it took a
quarter of the driver's time on asyncio, against a twentieth for the hand-written
loop): so no coroutine waits with the raw run but ``step_body``, the fetch layout is
its lane's (``Lane.layout_for``: shared by the steps on it), and the step's mark on the
context (``STEPS``) is restored without a token. A step's errors are counted
(``count_failure``) where the phase they came from is known.

Invariants: ``before_run`` and ``after_run`` run under the engine's phase lock (one hook
phase at a time), ``after_run`` only once the turnstile let the step's number through; a
step holds its lane until its raw run returned, never during its ``after_run``. The
caller enters the step's cancel scope around ``step_body``; a failing hook may cancel it
to stop the rest of its phase, and the step then goes on under a new one: ``step_body``
returns a ``Rescope`` (the step is not over), and the caller calls it again with it.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Hashable, Sequence
from contextlib import ExitStack
from typing import TYPE_CHECKING, Any

import anyio

from .._dispatch import _nest
from .._dispatch._merge import DEFAULT_OPTIONS, check_options
from .._hook_protocol import InFlightRunContext, RunMetadata, RunOptions, SessionRunValues
from .._inside import STEPS_GET, STEPS_SET
from ._diagnose import note_missing_fetch_of_layout
from ._raw import check_values
from ._stepping import NO_FEEDS, _after_run_args, _raw_run, gather, leave_step_contexts

if TYPE_CHECKING:
    from ._in_flight import InFlight
    from ._lanes import Lane
    from ._retry import RetryBudget

__all__ = [
    "Rescope", "Slot", "Step", "count_failure", "end_before", "finish_step", "sharing", "start_before", "start_run",
    "step_body",
]

_new_tuple = tuple.__new__


class Step:
    """One step in flight: its lane, number, arguments and what its phases computed."""

    __slots__ = (
        "args",
        "cause",
        "contexts",
        "counted",
        "ctx",
        "feeds",
        "holds_lane",
        "keys",
        "lane",
        "merged",
        "metadata",
        "number",
        "occupied",
        "on_admitted",
        "on_freed",
        "on_ran",
        "run_seconds",
        "run_started",
        "sampled",
        "scope",
        "shape",
        "shapes",
        "started",
        "trace",
        "where",
    )

    def __init__(self, lane: Lane, args: tuple[Any, Any, Any, Any], scope: anyio.CancelScope | None = None) -> None:
        self.lane = lane
        #: Whether the step holds its lane (from admission until its run returned); a step
        #: of ``run_with_hooks`` borrows its step function's and never does.
        self.holds_lane = False
        self.args = args  # fetches, feed_dict, options, run_metadata
        self.number = 0  # 0: not admitted yet
        self.scope = anyio.CancelScope() if scope is None else scope
        self.cause: BaseException | None = None  # why another step cancelled this one
        self.counted: int | None = None  # the counter after this step's increment, once made
        self.ctx: InFlightRunContext | None = None
        #: The hooks' ``step_context``s entered for the attempt under way (None: none entered).
        self.contexts: ExitStack | None = None
        self.sampled = 0  # the statistics' step count when it was picked to be timed; 0: not timed
        self.started = 0.0
        self.occupied = 0.0  # the lanes' occupancy integral when it was timed from
        self.run_seconds: float | None = None  # a timed step's raw run
        self.run_started = 0.0  # when a timed step's raw run started
        #: Where a ``before_run`` phase under way records its calls' timings (None: nowhere).
        self.trace: list[Any] | None = None
        self.where = "before_run"
        self.keys: Sequence[Hashable] = ()
        self.shape: Any = None
        self.shapes: Any = None
        self.feeds: Any = None
        self.merged: RunOptions = DEFAULT_OPTIONS
        self.metadata: RunMetadata | None = None
        #: Told the results as soon as the raw run returned (``iterate(ordered=False)``), and
        #: when ``step_body``'s admission is over (True: whole), for ``iterate``'s next one.
        self.on_ran: Callable[[Any], None] | None = None
        self.on_admitted: Callable[[bool], None] | None = None
        #: Told when the step gives its lane back (``iterate``: the next admission may start).
        self.on_freed: Callable[[Step], None] | None = None

    def leave_contexts(self, error: BaseException | None) -> None:
        """Leave the hooks' ``step_context``s of the attempt that ended (with ``error``, if it
        failed), in reverse order; an error one raises is noted on ``error`` or raised."""
        contexts = self.contexts
        self.contexts = None
        if contexts is not None:
            if error is None:
                contexts.close()
            else:
                leave_step_contexts(contexts, error)


class Rescope:
    """What ``step_body`` returns when a failing hook cancelled the step's scope to stop
    the rest of its phase (the phases run under the step's scope): the step is not over,
    and recovers from ``error`` under a new scope (its caller enters one and calls
    ``step_body`` again with this)."""

    __slots__ = ("budget", "error")

    def __init__(self, error: Exception, budget: RetryBudget | None) -> None:
        self.error = error
        self.budget = budget


class Slot:
    """What ``iterate`` keeps of a step admitted and not yielded yet: its outcome, and the
    iterator's wake-up (bound once, shared by its slots)."""

    __slots__ = ("admitted", "delivered", "done", "error", "ran", "results", "step", "wake")

    def __init__(self, step: Step | None, wake: Callable[[], None]) -> None:
        self.step = step  # None: a feed that could not be taken (``error`` says why)
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


async def step_body(self: InFlight, step: Step, again: Rescope | None = None) -> tuple[bool, Any] | Rescope:
    """A whole step on the lane it holds, under ``step.scope``, which the caller entered:
    ``(False, None)`` when a stop kept it from being admitted, else ``(True, results)``;
    a ``Rescope`` when the step goes on under a new scope (``again``, given back here).
    A cancellation of the scope goes through, for the caller's scope to catch (the step
    then failed with ``cancelled_error``). Every way out but a ``Rescope`` ends the step."""
    s, lock = self.s, self._lock
    # Restored with a set of the value found (not a reset with the token: one object less
    # that lives as long as the step, and the step's objects are what the GC walks).
    outer = STEPS_GET()
    STEPS_SET((*outer, s) if outer else self.inside)
    error: BaseException | None = None
    out: tuple[bool, Any] | Rescope | None = None
    try:
        if again is None:  # admission
            failed: Exception | None = None
            budget = None
            whole = False
            try:
                coord = self.sessions.coord
                if step.lane.renew or (coord is not None and coord.should_stop()):
                    budget = await self.ready(step, None)
                try:
                    whole = await self.admit(step)
                except Exception as exc:
                    failed = exc
            finally:
                if step.on_admitted is not None:
                    step.on_admitted(whole)
            if not (whole or failed):
                out = False, None
                return out
        else:
            failed, budget = again.error, again.budget
        while True:
            if failed is not None:  # recover (or raise), and run the before_run phase again
                recovered = await self.after_failure(step, failed, budget)
                if isinstance(recovered, Rescope):
                    out = recovered
                    return out
                budget, failed = recovered, None
                if not lock.try_take():
                    await lock.acquire()
                try:
                    if step.cause is not None:
                        raise self.cancelled_error(step)
                    await self.before(step)
                except Exception as exc:
                    failed = exc
                    continue
                finally:
                    lock.release()
                self.unhold(step)
            try:  # the raw run awaited here: no coroutine of its own waits with it
                try:
                    returned = await start_run(self, step)
                except BaseException as exc:
                    count_failure(self, step, exc)
                    if type(exc) is KeyError:  # a missing fetch: say which party asked for it
                        note_missing_fetch_of_layout(exc, step.args[0], self.s._before.calls, step.shapes, step.keys)
                    raise
                out = True, await finish_step(self, step, returned)
                return out
            except Exception as exc:
                failed = exc
    except BaseException as exc:
        error = exc
        self.fail_others(step, exc)  # (not for a clean stop or a cancellation)
        raise
    finally:
        try:
            if not isinstance(out, Rescope) and step.contexts is not None:
                step.leave_contexts(error)  # may raise (a hook's step_context leaving a step that went well)
        finally:
            if not isinstance(out, Rescope):
                self.end(step)
            STEPS_SET(outer)


def start_run(self: InFlight, step: Step) -> Awaitable[Any]:
    """The step's raw run, started: what its caller awaits at once, outside the lock (an
    error raised here or by the run is the caller's to count, with ``count_failure``);
    ``finish_step`` follows with what it returned."""
    metadata = step.metadata
    assert metadata is not None and step.ctx is not None
    step.where = "run"
    if step.cause is not None:
        raise self.cancelled_error(step)
    if step.sampled:
        step.run_started = self.s._stats.clock()
    s, merged = self.s, step.merged
    if merged is DEFAULT_OPTIONS and not s._setup.retry_on:  # ``_raw_run``'s common case, inlined
        return step.lane.raw.run(step.keys, step.feeds or NO_FEEDS, merged, metadata)  # type: ignore[no-any-return]
    return _raw_run(s, step.lane.raw, step.keys, step.feeds or NO_FEEDS, merged, metadata)


async def finish_step(self: InFlight, step: Step, returned: Any) -> Any:
    """After the raw run returned ``returned``: its values checked, the lane freed, then in
    step order (under the lock) the counter and the ``after_run`` phase; the step's results.
    Its errors are counted."""
    s, lock = self.s, self._lock
    stats = s._stats
    try:
        values, keys = returned, step.keys
        if (type(values) is not list and type(values) is not tuple) or len(values) != len(keys):
            values = check_values(step.lane.raw, keys, values)
        if step.sampled:
            step.run_seconds = stats.clock() - step.run_started
        results = None if step.shape is None else _nest.pack(step.shape, values)
        if step.on_ran is not None:
            step.on_ran(results)
        self.free_lane(step)  # its after_run waits its turn without it
        if self.turn.next != step.number:
            await self.turn.wait(step.number)
        if not lock.try_take():
            await lock.acquire()
        try:
            if step.cause is not None:
                raise self.cancelled_error(step)
            step.where = "after_run"
            if step.counted is None:  # to its number, past the numbers given up before it
                moves, local = step.number - self._counted, s._local
                step.counted = (
                    local.increment_nowait(moves) if local is not None else await s._setup.counter.increment(moves)
                )
                self._counted = step.number  # once it moved: a failed move is made again
            after = stats.after if step.sampled else s._after
            if after.calls:  # the after_run phase
                merged, metadata = step.merged, step.metadata
                assert metadata is not None and step.ctx is not None
                nothing = _new_tuple(SessionRunValues, (None, merged, metadata, step.counted))
                shapes = step.shapes
                args = (
                    [(step.ctx, nothing)] * len(after.calls) if shapes is None  # none fetched anything
                    else _after_run_args(after.calls, step.ctx, shapes, values, nothing)
                )
                started = s._dispatcher.start(after, args, step.scope, metadata.timings if merged.trace else None)
                if type(started) is not list:  # a call suspended
                    await started
        finally:
            lock.release()
    except BaseException as exc:
        count_failure(self, step, exc)
        raise
    if step.sampled:
        stats.end_sample(step.number, step.started, step.run_seconds, True, sharing(self, step), step.sampled)
    return results


def count_failure(self: InFlight, step: Step, exc: BaseException) -> None:
    """``step``'s attempt failed with ``exc``: counted, and a timed step's timing ends."""
    stats = self.s._stats
    stats.failed(step.where, exc)
    if step.sampled:
        stats.end_sample(step.number, step.started, None, False, sharing(self, step), step.sampled)
        step.sampled = 0


def start_before(self: InFlight, step: Step) -> Any:
    """Start the step's ``before_run`` phase (under the phase lock), its ``step_context``s
    entered first: the hooks' requests (a list, or None when no hook has ``before_run``),
    or a coroutine that finishes the phase, to await at once. ``end_before`` follows."""
    s, stats = self.s, self.s._stats
    fetches, feed_dict, options, run_metadata = step.args
    if step.ctx is not None:  # a re-run: the attempt before it is over
        step.ctx._ended = True
    step.ctx = ctx = InFlightRunContext((fetches, feed_dict, options), step.lane.raw, step.number - 1, s._on_stop)
    step.metadata = metadata = RunMetadata() if run_metadata is None else run_metadata
    step.where = "before_run"
    stats.steps = count = stats.steps + 1
    if count >= stats.next_sample:
        step.sampled = count
        step.started = stats.start_sample()
        step.occupied = self.occupancy.integral()
        # The next step to time, picked now: the steps admitted while this one is in
        # flight are not all timed (its end picks again, from the same count).
        stats.next_sample = count + stats.gap
    step_hooks = s._setup.step_hooks
    if step_hooks:  # entered here, in the task and context the whole step runs in (one
        contexts = ExitStack()  # that raises fails the step in its before_run phase)
        step.contexts = contexts
        for hook in step_hooks:
            contexts.enter_context(hook.step_context(ctx, metadata))
    step.merged = merged = DEFAULT_OPTIONS if options is None else check_options(options, "the caller")
    before = stats.before if step.sampled else s._before
    step.trace = trace = metadata.timings if merged.trace or s._setup.traces_before_run else None
    if not before.calls:
        return None
    # Under the step's scope, which a failing hook may cancel (the step goes on under a new one).
    return s._dispatcher.start(before, [(ctx,)] * len(before.calls), step.scope, trace)


def end_before(self: InFlight, step: Step, requests: list[Any] | None) -> None:
    """The ``before_run`` phase is over: the hooks' requests merged into what the step's
    run fetches and feeds."""
    fetches, feed_dict, _, _ = step.args
    s, merged = self.s, step.merged
    # The lane's fetch layout, reused while the step asks for what the last one on it did.
    if requests is not None and requests.count(None) != len(requests):  # feeds and options merged too
        step.keys, step.shape, step.shapes, step.feeds, merged = gather(s, step.lane, fetches, feed_dict, merged, requests)
    else:  # no hook asked for anything: the layout alone (``gather`` without its merge)
        layout = step.lane.layout_for(fetches, s._before.calls, self.no_requests)
        step.keys, step.shape, step.shapes, step.feeds = layout.keys, layout.caller_shape, None, feed_dict
    if step.trace is not None and not merged.trace:
        del step.trace[:]
    step.trace = None
    step.merged = merged


def sharing(self: InFlight, step: Step) -> int:
    """How many steps shared a timed step's time: the mean in flight over its life."""
    elapsed: float = self.s._stats.clock() - step.started
    if elapsed <= 0:
        return max(1, self.occupancy.busy)
    return max(1, round((self.occupancy.integral() - step.occupied) / elapsed))
