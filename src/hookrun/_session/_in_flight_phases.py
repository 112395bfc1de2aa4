"""The phases of one step in flight, for the engine (``_in_flight.py``): ``before_phase``
(the step's ``step_context``s entered, its ``before_run`` calls, their requests merged),
``run_and_after`` (the raw run, the lane freed, then in step order the step counter and
``after_run``), ``count_failure`` (an attempt's failure counted) and ``sharing`` (how many steps
shared a timed step's time).

Invariants: ``before_run`` and ``after_run`` run under the engine's phase lock (one hook
phase at a time), ``after_run`` only once the turnstile let the step's number through; a
step holds its lane until its raw run returned, never during its ``after_run``.
"""

from __future__ import annotations

from contextlib import ExitStack
from typing import TYPE_CHECKING, Any

from .._dispatch import _nest
from .._dispatch._merge import DEFAULT_OPTIONS, check_options
from .._hook_protocol import InFlightRunContext, RunMetadata, SessionRunValues
from ._stepping import NO_FEEDS, _after_run_args, _checked, _raw_run

if TYPE_CHECKING:
    from ._in_flight import InFlight
    from ._in_flight_step import Step

__all__ = ["before_phase", "count_failure", "run_and_after", "sharing"]

_new_tuple = tuple.__new__


def count_failure(self: InFlight, step: Step, exc: BaseException) -> None:
    """``step``'s attempt failed with ``exc``: counted, and a timed step's timing ends."""
    stats = self.s._stats
    stats.failed(step.where, exc)
    if step.sampled:
        stats.end_sample(step.number, step.started, None, False, sharing(self, step), step.sampled)
        step.sampled = 0

async def before_phase(self: InFlight, step: Step) -> None:
    """The step's ``before_run`` phase (under the phase lock), its ``step_context``s entered
    first; the requests merged into what its run fetches and feeds."""
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
        step.occupied = self.occupancy.integral()
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

async def run_and_after(self: InFlight, step: Step) -> Any:
    """The raw run, then (in step order, under the lock) the counter and ``after_run``."""
    s, stats = self.s, self.s._stats
    raw, metadata, merged = step.lane.raw, step.metadata, step.merged
    assert metadata is not None and step.ctx is not None
    step.where = "run"
    self.check_cause(step)
    clock = stats.now
    run_started = clock()
    values = await _raw_run(s, raw, step.keys, step.feeds or NO_FEEDS, merged, metadata)
    run_seconds = clock() - run_started
    values = _checked(raw, step.keys, values)
    results = None if step.shape is None else _nest.pack(step.shape, values)
    if step.on_ran is not None:
        step.on_ran(results)
    self.free_lane(step)  # its after_run waits its turn without it
    await self.turn.wait(step.number)
    async with self.phase():
        self.check_cause(step)
        step.where = "after_run"
        if step.counted is None:  # to its number, past the numbers given up before it
            moves = step.number - self._counted
            local = s._local
            counted = local.increment_nowait(moves) if local is not None else await s._counter.increment(moves)
            self._counted, step.counted = step.number, counted  # once it moved: a failed move is made again
        after = stats.after if step.sampled else s._after
        if after.calls:
            nothing = _new_tuple(SessionRunValues, (None, merged, metadata, step.counted))
            args = _after_run_args(after.calls, step.ctx, step.shapes, values, nothing)
            started = s._dispatcher.start(after, args, step.scope, metadata.timings if merged.trace else None)
            if type(started) is not list:
                await started
    if step.sampled:
        stats.end_sample(step.number, step.started, run_seconds, True, sharing(self, step), step.sampled)
    return results

def sharing(self: InFlight, step: Step) -> int:
    """How many steps shared a timed step's time: the mean in flight over its life."""
    elapsed: float = self.s._stats.now() - step.started
    if elapsed <= 0:
        return max(1, self.occupancy.busy)
    return max(1, round((self.occupancy.integral() - step.occupied) / elapsed))
