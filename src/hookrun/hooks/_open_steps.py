"""``OpenSteps``: the steps a hook opened in ``before_run`` and has not closed yet.

``PrometheusHook`` and ``OpenTelemetryHook`` observe a step through their
``step_context`` when the session enters it (one step at a time), and through their
own ``before_run`` / ``after_run`` when it does not (steps in flight). On that second
path a step is opened in ``before_run`` (what it needs is in
``run_context.step_state[hook]``) and closed in its ``after_run``; a step given up
without its ``after_run`` (its run or a hook failed, its caller was cancelled, it is
re-run after a recovery with a new context) is found here, once, so its observation is
made exactly once: at the next ``before_run`` or ``after_run`` once the step is over
(``InFlightRunContext.ended``; with one step at a time, every step opened before is
over), or when the session exits (``end``, ``on_exception``: every step still open).

Invariants: a run context is open here at most once; only ``open`` adds one, and
``close``, ``over`` and ``drain`` each hand back and forget what they return, so no step
is observed twice. The registry holds the run contexts only: what each step carries
from ``before_run`` to ``after_run`` lives in its ``step_state``.
"""

from __future__ import annotations

from typing import Any

from .._hook_protocol import InFlightRunContext, SessionRunContext

__all__ = ["OpenSteps"]


class OpenSteps:
    """The open steps of one hook (``owner``), by run context."""

    __slots__ = ("_open", "_owner")

    def __init__(self, owner: object) -> None:
        self._owner = owner
        self._open: dict[int, SessionRunContext] = {}  # id(run context) -> it (kept alive here)

    def __len__(self) -> int:
        return len(self._open)

    def open(self, run_context: SessionRunContext, value: object) -> None:
        """``before_run`` of a step this hook observes itself: ``value`` is its state."""
        run_context.step_state[self._owner] = value
        self._open[id(run_context)] = run_context

    def close(self, run_context: SessionRunContext) -> Any:
        """``after_run`` of an open step: its state (``None`` if it was not open here)."""
        if self._open.pop(id(run_context), None) is None:
            return None
        return run_context.step_state.get(self._owner)

    def over(self, run_context: SessionRunContext) -> list[Any]:
        """The states of the steps given up without their ``after_run``, seen from the
        ``before_run`` or ``after_run`` of ``run_context``'s step; they are forgotten."""
        if not self._open:
            return []
        if isinstance(run_context, InFlightRunContext):
            gone = [ctx for ctx in self._open.values() if ctx is not run_context and _ended(ctx)]
        else:  # one step at a time: every other step opened before is over
            gone = [ctx for ctx in self._open.values() if ctx is not run_context]
        return [self._forget(ctx) for ctx in gone]

    def drain(self) -> list[Any]:
        """The session exits: the states of every step still open; they are forgotten."""
        return [self._forget(ctx) for ctx in list(self._open.values())]

    def _forget(self, run_context: SessionRunContext) -> Any:
        del self._open[id(run_context)]
        return run_context.step_state.get(self._owner)


def _ended(run_context: SessionRunContext) -> bool:
    return not isinstance(run_context, InFlightRunContext) or run_context.ended
