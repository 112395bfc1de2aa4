"""``StopAtStepHook``: request stop once the global step reaches a last step."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .._hook_protocol import SessionRunContext, SessionRunHook, SessionRunValues
from .._validate import check_int
from ._common import step_counter_of

__all__ = ["StopAtStepHook"]


class StopAtStepHook(SessionRunHook):
    """Requests stop after ``num_steps`` more steps, or once the step reaches ``last_step``.

    Exactly one of the two (TensorFlow's messages). With ``num_steps`` the last
    step is computed from the global step when the first session is created
    (from the coordinator's step counter, else from the first step's
    ``run_context.global_step``) and is not recomputed after recovery. The
    check uses the global step *after* each run, so a step counter that jumps
    past ``last_step`` (a shared, distributed counter) still stops.

    Checkpointable: a restarted run restored from a checkpoint keeps the last
    step computed before (``num_steps`` counts from where the run first
    started), unless ``num_steps`` changed, which then counts from the
    restored step, like TensorFlow.

    Safe with steps in flight: the ``before_run`` of the step that will reach
    ``last_step`` already requests stop, so no step after it is admitted and
    exactly the steps up to ``last_step`` run, whatever ``max_in_flight`` is.

    Args:
        num_steps: How many more steps to run.
        last_step: The global step to stop at (exactly one of the two).
    """

    overlapping_steps = True

    #: It keeps the state of one session: it serves one monitored session at a time.
    serves_one_session = True

    def __init__(self, num_steps: int | None = None, last_step: int | None = None) -> None:
        if num_steps is None and last_step is None:
            raise ValueError("One of num_steps or last_step must be specified.")
        if num_steps is not None and last_step is not None:
            raise ValueError("Only one of num_steps or last_step can be specified.")
        check_int("StopAtStepHook: num_steps", num_steps, optional=True)
        check_int("StopAtStepHook: last_step", last_step, optional=True)
        self._num_steps = num_steps
        self._last_step = last_step

    def __repr__(self) -> str:
        return f"StopAtStepHook(num_steps={self._num_steps}, last_step={self._last_step})"

    @property
    def last_step(self) -> int | None:
        """The step at which stop is requested (``None`` until it is known)."""
        return self._last_step

    def state_dict(self) -> dict[str, int | None]:
        """The configured ``num_steps`` and the computed ``last_step``."""
        return {"num_steps": self._num_steps, "last_step": self._last_step}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Adopt a saved ``last_step`` when it was computed from the same ``num_steps``."""
        saved = state.get("last_step")
        if self._num_steps is not None and state.get("num_steps") == self._num_steps and isinstance(saved, int):
            self._last_step = saved

    async def after_create_session(self, session: object, coord: object) -> None:
        """Fix ``last_step`` from the current global step (first session only)."""
        counter = step_counter_of(coord)
        if self._last_step is None and counter is not None:
            self._fix_last_step(await counter.get())

    def before_run(self, run_context: SessionRunContext) -> None:
        """Fix ``last_step`` from the step context if no step counter was available; request
        stop when this step is the last one (no later step is then started)."""
        if self._last_step is None:
            self._fix_last_step(run_context.global_step)
        if run_context.global_step + 1 >= self._last_step:  # type: ignore[operator]  # fixed above
            run_context.request_stop()

    def after_run(self, run_context: SessionRunContext, run_values: SessionRunValues) -> None:
        """Request stop once the step after this run is at least ``last_step``."""
        if self._last_step is not None and run_values.global_step >= self._last_step:
            run_context.request_stop()

    def _fix_last_step(self, current: int) -> None:
        assert self._num_steps is not None
        self._last_step = current + self._num_steps
