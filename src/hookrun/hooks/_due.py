"""``DueSteps``: a periodic hook's "is this step due" when steps may overlap.

A periodic hook (a timer, TensorFlow's way) decides in a step's ``before_run`` whether
the step is due (so it fetches only then) and records the trigger in the step's
``after_run``. With steps in flight, the ``before_run`` of later steps comes before that
``after_run``: asked plainly, the timer would find them all due. So the hook keeps here,
per step admitted and not yet done, the step at which that step's ``after_run`` will
record a trigger (if it will); a later step is decided as if those triggers were
recorded already (:meth:`SecondOrStepTimer.should_trigger_after`). The hook carries its
decision to the step's ``after_run`` in ``run_context.step_state`` and confirms it there
against the timer, which by then holds every trigger before it (``after_run`` calls come
in step order): a step is acted on only if it was fetched and is still due.

Invariants: only ``before_run`` adds an entry, only ``after_run`` removes entries (its
step's and every earlier one: those steps are done or were given up); an entry is keyed
by the global step the step started at, so a step re-run after a recovery replaces its
own entry. With one step at a time no entry of another step is ever pending at a
``before_run``, and the decisions are exactly the timer's.
"""

from __future__ import annotations

from .._timer import NeverTriggerTimer, SecondOrStepTimer

__all__ = ["DueSteps"]


class DueSteps:
    """The steps in flight of one periodic hook, and where each will trigger its timer."""

    __slots__ = ("_pending", "timer")

    def __init__(self, timer: SecondOrStepTimer | NeverTriggerTimer) -> None:
        self.timer = timer
        #: Global step a step started at -> the step its after_run will trigger at (or None).
        self._pending: dict[int, int | None] = {}

    def reset(self) -> None:
        """Restart the timer and forget the steps in flight (``begin``)."""
        self.timer.reset()
        self._pending.clear()

    def ahead(self, started: int) -> int:
        """How many steps admitted before the one that started at ``started`` are not done."""
        return sum(1 for step in self._pending if step < started)

    def expecting(self, started: int) -> bool:
        """Whether a step admitted before ``started`` and not done will trigger the timer."""
        return any(step < started and mark is not None for step, mark in self._pending.items())

    def due(self, started: int, key: int) -> bool:
        """Whether the step that started at ``started`` is due at ``key`` (its ``before_run``)."""
        marks = [mark for step, mark in self._pending.items() if step < started and mark is not None]
        if marks:
            return self.timer.should_trigger_after(max(marks), key)
        return self.timer.should_trigger_for_step(key)

    def expect(self, started: int, mark: int | None) -> None:
        """The step that started at ``started`` will trigger the timer at ``mark`` (``None``:
        it will not), unless its ``after_run`` finds otherwise."""
        self._pending[started] = mark

    def done(self, started: int) -> None:
        """The ``after_run`` of the step that started at ``started``: it, and every step
        admitted before it, are no longer in flight."""
        pending = self._pending
        if pending:
            for step in [step for step in pending if step <= started]:
                del pending[step]
