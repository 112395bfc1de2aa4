"""``MonitoredSession.run`` at one step at a time: its checks, and the step.

``run`` reads the session's plan for a step. With steps in flight it goes to that
engine. Otherwise, when every ``before_run`` and ``after_run`` call of the session is a
plain function (or it has none) and the step is the common one (an open session, untimed by the
statistics, without ``options``, no retries on the same session), its phases and the raw
run happen right here, in ``run``'s own coroutine; any other step goes to the step body
the constructor chose (``self._step``: ``_stepping.py``). Either way the session is
marked busy and inside its own step, a recoverable error re-creates the lane's session
and re-runs the call (``_recovering.py``), and the session is released on every way out:
to the first caller from another task waiting for it, if any (``_turns.py``).

The plain-call step is ``Stepping._general_step``'s path for plain calls, copied here so
that such a step needs no coroutine of its own: a step with one plain hook costs 10-12 %
less with it, with ten 7-12 % less, measured side by side in one process (the plan on and
off, asyncio and trio; the instance-installed ``run`` it replaces gained as much). It
serves the plain-hook rows against pluggy in ``python -m benchmarks.peers``. Where a
``before_run`` asked for something the step goes on in ``_general_step``, with the calls
already made. Errors are counted in their phase and a missing fetch is named, as there.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping
from typing import Any

from .._dispatch import _nest
from .._dispatch._merge import DEFAULT_OPTIONS
from .._dispatch._start import call_after, call_before
from .._hook_protocol import (
    RunMetadata,
    RunOptions,
    SessionRunContext,
    SessionRunValues,
    check_feed_dict,
)
from .._inside import STEPS_GET, STEPS_RESET, STEPS_SET
from ._diagnose import note_missing_fetch
from ._raw import check_values
from ._state import SessionAttributes, State
from ._stepping import NO_FEEDS, LeftStep

__all__ = ["Running", "plain_steps"]

_OPEN = State.OPEN
_new_tuple = tuple.__new__  # builds a SessionRunValues without its Python-level __new__


def plain_steps(session: Any) -> bool:
    """Whether every hook call of ``session``'s steps is a plain function (or it has none),
    with nothing entered or timed around a step and the session's own step counter (the
    constructor adds: one lane, no ``retry_on``)."""
    return bool(
        not session._setup.step_hooks
        and not session._setup.traces_before_run
        and session._local is not None
        and all(plan.plain is not None or not plan.calls for plan in (session._before, session._after))
    )


class Running(SessionAttributes):
    """``run`` (a mixin of the monitored session)."""

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
                await self._wait_turn("run()")
        self._busy = True
        inside = STEPS_SET((*STEPS_GET(), self))
        try:
            if not plain and (self._lane.renew or self._coord.should_stop()) and self._RECOVERS:  # type: ignore[union-attr]
                return await self._with_recovery(self._step, fetches, feed_dict, options, run_metadata)
            try:
                if not plain:
                    return await self._step(fetches, feed_dict, options, run_metadata)
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
                    return await self._general_step(fetches, feed_dict, None, metadata, None, ctx, asked)
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
                if not self._RECOVERS or self._recoverable_cause(exc) is None:
                    raise
                self._fail_over()
                return await self._with_recovery(self._step, fetches, feed_dict, options, run_metadata, failed=exc)
        except LeftStep as left:  # a step_context raised leaving a step that went well: not re-run
            raise left.error from left.error.__cause__
        finally:
            STEPS_RESET(inside)
            if self._lifetime.waiting:  # a caller (or a close) from another task waits for this step
                self._pass_turn()
            else:  # (``_pass_turn``'s case of nobody waiting, without its call on every step)
                self._busy = False
