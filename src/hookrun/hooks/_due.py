"""``DueSteps``: a periodic hook's "is this step due" when steps may overlap.

A periodic hook (a timer, TensorFlow's way) decides in a step's ``before_run`` whether
the step is due (so it fetches only then) and records the trigger in the step's
``after_run``. With steps in flight, the ``before_run`` of later steps comes before that
``after_run``: asked plainly, the timer would find them all due. So the hook keeps here,
per step admitted and not yet over, the step at which that step's ``after_run`` will
record a trigger (if it will); a later step is decided as if those triggers were
recorded already (:meth:`SecondOrStepTimer.should_trigger_after`). The hook carries its
decision to the step's ``after_run`` in ``run_context.step_state`` and confirms it there
against the timer, which by then holds every trigger before it (``after_run`` calls come
in step order): a step is acted on only if it was fetched and is still due.

A step given up without its ``after_run`` (its ``after_run`` phase failed or was
cancelled before this hook's turn, its caller was cancelled) records no trigger, so
later steps are decided as if it had not fired, as the timer alone would decide them.

Invariants: only ``before_run`` adds an entry (:meth:`DueSteps.expect`), and only for an
:class:`~hookrun._hook_protocol.InFlightRunContext` (a step in flight's); an entry goes
when its step's ``after_run`` (or a later step's) runs, and at the next ``before_run``
(:meth:`DueSteps.start`) once its step is over (``ended``: given up, cancelled, failed,
or re-run with a new context). An entry is keyed by the global step the step started at,
so a step re-run after a recovery replaces its own entry. With one step at a time (a
plain ``SessionRunContext``) no entry is ever pending at a ``before_run`` (another step's
would be stale by definition: nothing else is in flight), and the decisions are exactly
the timer's on every path.
"""

from __future__ import annotations

from .._hook_protocol import InFlightRunContext, SessionRunContext
from .._timer import NeverTriggerTimer, SecondOrStepTimer

__all__ = ["DueSteps"]


class DueSteps:
    """The steps in flight of one periodic hook, and where each will trigger its timer."""

    __slots__ = ("_pending", "timer")

    def __init__(self, timer: SecondOrStepTimer | NeverTriggerTimer) -> None:
        self.timer = timer
        #: Global step a step in flight started at -> its run context, and the step its
        #: after_run will trigger at (or None).
        self._pending: dict[int, tuple[InFlightRunContext, int | None]] = {}

    def reset(self) -> None:
        """Restart the timer and forget the steps in flight (``begin``)."""
        self.timer.reset()
        self._pending.clear()

    def start(self, run_context: SessionRunContext) -> int:
        """A step's ``before_run``: forget the steps over without their ``after_run`` (every
        one, with one step at a time); return the global step this one started at."""
        pending = self._pending
        if pending:
            if not isinstance(run_context, InFlightRunContext):
                pending.clear()
            else:
                for step in [step for step, (ctx, _) in pending.items() if ctx.ended]:
                    del pending[step]
        return run_context.global_step

    def ahead(self, started: int) -> int:
        """How many steps admitted before the one that started at ``started`` are in flight."""
        return sum(1 for step in self._pending if step < started)

    def expecting(self, started: int) -> bool:
        """Whether a step admitted before ``started`` and in flight will trigger the timer."""
        return any(step < started and mark is not None for step, (_, mark) in self._pending.items())

    def due(self, started: int, key: int) -> bool:
        """Whether the step that started at ``started`` is due at ``key`` (its ``before_run``)."""
        marks = [mark for step, (_, mark) in self._pending.items() if step < started and mark is not None]
        if marks:
            return self.timer.should_trigger_after(max(marks), key)
        return self.timer.should_trigger_for_step(key)

    def expect(self, run_context: SessionRunContext, mark: int | None) -> None:
        """The step of ``run_context`` will trigger the timer at ``mark`` (``None``: it will
        not), unless its ``after_run`` finds otherwise. Kept only for a step in flight: with
        one step at a time no later ``before_run`` comes before its ``after_run``."""
        if isinstance(run_context, InFlightRunContext):
            self._pending[run_context.global_step] = (run_context, mark)

    def done(self, started: int) -> None:
        """The ``after_run`` of the step that started at ``started``: it, and every step
        admitted before it, are no longer in flight."""
        pending = self._pending
        if pending:
            for step in [step for step in pending if step <= started]:
                del pending[step]
