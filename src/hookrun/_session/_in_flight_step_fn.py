"""``MonitoredSession.run_step_fn`` with steps in flight: the step function runs on one
free lane, like a step; its ``StepContext`` holds that lane's raw session, and its
``run_with_hooks`` is a full hooked step on that lane (numbered like any other, with no
recovery of its own). A recoverable error re-creates the lane and calls the function
again with the new session; a clean-stop error is the caller's alone (as from ``run``);
any other error cancels the other steps in flight.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .._errors import CLEAN_STOP_TYPES, RunAfterStopError
from .._hook_protocol import RunMetadata, RunOptions
from .._inside import STEPS_GET, STEPS_RESET, STEPS_SET, inside_error, inside_step
from ._checks import check_step_fn
from ._diagnose import note_missing_fetch_of_layout
from ._in_flight import InFlight
from ._in_flight_step import Step, count_failure, finish_step, start_run
from ._state import State
from ._step_fn_context import StepContext

__all__ = ["run_step_fn"]


async def run_step_fn(self: InFlight, step_fn: Any) -> Any:
    """``MonitoredSession.run_step_fn`` with steps in flight: ``step_fn`` on a free lane,
    re-invoked with the lane's new session after a recovery."""
    check_step_fn(step_fn)
    self.check_entry("run_step_fn()")
    step = await self.take_lane((None, None, None, None))
    s = self.s
    inside = STEPS_SET((*STEPS_GET(), s))
    try:
        self.check_open("run_step_fn()")  # stopped or closed while it waited for a lane: refused as now
        with step.scope:
            budget = await self.ready(step, None)
            while True:
                raw = step.lane.raw
                try:
                    return await step_fn(StepContext(_LaneOwner(self, step), raw))  # type: ignore[arg-type]
                except BaseException as exc:
                    lost = self.recovery.recovers_from(exc)
                    if lost:  # its session is lost: the lane's next step replaces it, however this call ends
                        self.recovery.fail_over(step.lane, raw)
                    if (
                        lost and isinstance(exc, Exception) and not isinstance(exc, CLEAN_STOP_TYPES)
                        and s._state is not State.CLOSED
                    ):
                        budget = budget or self.recovery.retry.budget()
                        if await self.sessions.recover(step.lane, exc, budget):
                            continue  # the function called again, with the lane's new session
                    self.fail_others(step, exc)  # (not for a clean stop or a cancellation)
                    raise
        raise self.cancelled_error(step)
    finally:
        STEPS_RESET(inside)
        self.end(step)


class _LaneOwner:
    """What a ``StepContext`` of ``run_step_fn`` reaches on a session with steps in flight:
    a hooked step on the lane the step function holds, and the stop request."""

    __slots__ = ("engine", "step")

    def __init__(self, engine: InFlight, step: Step) -> None:
        self.engine = engine
        self.step = step

    def _set_hook_stop(self) -> None:
        self.engine.s._set_hook_stop()

    async def _run_with_hooks(
        self, fetches: object, feed_dict: Mapping[Any, Any] | None, options: RunOptions | None,
        run_metadata: RunMetadata | None,
    ) -> Any:
        """``StepContext.run_with_hooks`` with lanes: a step admitted like any other, on the
        lane the step function holds."""
        engine, holder = self.engine, self.step
        if inside_step(holder):  # from inside a hooked run of it (a hook of it): it would wait for itself
            raise inside_error(engine.s, "run_with_hooks()")
        sub = Step(holder.lane, (fetches, feed_dict, options, run_metadata))
        error: BaseException | None = None
        inside = STEPS_SET((*STEPS_GET(), holder))  # what runs inside it knows (its holder stands for it)
        try:
            with sub.scope:  # its phases run under it
                if not await engine.admit(sub):
                    engine.check_open("run_with_hooks()")
                    raise RunAfterStopError("run_with_hooks() called after the session stopped")
                try:
                    returned = await start_run(engine, sub)
                except BaseException as exc:
                    count_failure(engine, sub, exc)
                    if type(exc) is KeyError:  # a missing fetch: say which party asked for it
                        note_missing_fetch_of_layout(exc, fetches, engine.s._before.calls, sub.shapes, sub.keys)
                    raise
                return await finish_step(engine, sub, returned)
            raise AssertionError("unreachable: only a failing phase cancels the step's scope")  # pragma: no cover
        except BaseException as exc:
            error = exc
            raise
        finally:
            STEPS_RESET(inside)
            try:
                sub.leave_contexts(error)  # may raise (a hook's step_context leaving a step that went well)
            finally:
                engine.phases_over(sub, holder)
