"""``StepCounterHook``: measure global steps per second, log it and write it as a summary."""

from __future__ import annotations

import os

from .._hook_protocol import SessionRunContext, SessionRunHook, SessionRunValues
from .._timer import Clock, SecondOrStepTimer
from .._validate import check_text
from ._common import check_timer_args, fields, logger
from ._summary_writer import SummaryWriter, WriterSlot

__all__ = ["StepCounterHook"]

_MAX_STALL_WARNINGS = 5


class StepCounterHook(SessionRunHook):
    """Logs ``global_step/sec`` and writes it as a scalar summary at the current step.

    Exactly one of ``every_n_steps`` / ``every_n_secs`` (so passing
    ``every_n_secs`` needs ``every_n_steps=None``). The first trigger only
    starts the measurement; each later one logs ``"<tag>: <rate>"`` and, given
    ``output_dir`` (a TensorBoard writer, extra ``hookrun[tensorboard]``) or a
    ``summary_writer``, writes the rate at that step. The step is the one after
    each run, from the runtime's step counter. When a run does not advance the
    step, a warning is logged (the first five times). ``summary_tag`` and
    ``clock`` are keyword-only extras.

    Args:
        every_n_steps: Steps between measurements (``None`` to use ``every_n_secs``).
        every_n_secs: Seconds between measurements instead.
        output_dir: Where to write the rate as TensorBoard summaries. ``None``: only log it.
        summary_writer: A ``SummaryWriter`` to write the rate with, instead of
            ``output_dir``.
        summary_tag: The summary's tag and the log line's name.
        clock: A function of no arguments returning seconds. ``None``:
            ``anyio.current_time``.
    """

    overlapping_steps = True

    #: It keeps the state of one session: it serves one monitored session at a time.
    serves_one_session = True

    def __init__(
        self,
        every_n_steps: int | None = 100,
        every_n_secs: float | None = None,
        output_dir: str | os.PathLike[str] | None = None,
        summary_writer: SummaryWriter | None = None,
        *,
        summary_tag: str = "global_step/sec",
        clock: Clock | None = None,
    ) -> None:
        check_timer_args("StepCounterHook", "every_n_secs", every_n_secs, "every_n_steps", every_n_steps)
        check_text("StepCounterHook: summary_tag", summary_tag)
        if (every_n_steps is None) == (every_n_secs is None):
            raise ValueError("exactly one of every_n_steps and every_n_secs should be provided.")
        self._timer = SecondOrStepTimer(
            every_steps=every_n_steps, every_secs=every_n_secs, clock=clock
        )
        self._slot = WriterSlot("StepCounterHook", output_dir, summary_writer)
        self.summary_tag = summary_tag
        self._last_step: int | None = None
        self._stall_warnings = 0

    def __repr__(self) -> str:
        return f"StepCounterHook({self._timer!r})"

    async def begin(self) -> None:
        """Open the summary writer (if any) and restart the measurement."""
        self._timer.reset()
        self._last_step = None
        await self._slot.open()

    def after_run(self, run_context: SessionRunContext, run_values: SessionRunValues) -> None:
        """Measure, log and record on trigger; warn if the step did not advance."""
        step = run_values.global_step
        if self._timer.should_trigger_for_step(step):
            elapsed_secs, elapsed_steps = self._timer.update_last_triggered_step(step)
            if elapsed_secs is not None and elapsed_steps is not None:
                self._record(elapsed_steps, elapsed_secs, step)
        self._check_advanced(step)

    async def end(self, session: object) -> None:
        """Flush (or close, if the hook made it) the summary writer."""
        await self._slot.finish()

    async def on_exception(self, session: object, exception: BaseException) -> None:
        """Flush (or close, if the hook made it) the summary writer."""
        await self._slot.finish()

    def _record(self, elapsed_steps: int, elapsed_secs: float, step: int) -> None:
        rate = elapsed_steps / elapsed_secs if elapsed_secs > 0 else float("inf")
        if self._slot.writer is not None:
            self._slot.writer.add_scalar(self.summary_tag, rate, step)
        logger.info("%s: %g", self.summary_tag, rate, extra=fields(step, "StepCounterHook", "after_run"))

    def _check_advanced(self, step: int) -> None:
        stalled = self._last_step is not None and step <= self._last_step
        if stalled and self._stall_warnings < _MAX_STALL_WARNINGS:
            self._stall_warnings += 1
            logger.warning(
                "It seems that the global step has not been increased. Current value "
                "(could be stable): %s vs previous value: %s. The monitored session "
                "increments its step counter after every run; check the step counter "
                "you gave it.",
                step,
                self._last_step,
                extra=fields(step, "StepCounterHook", "after_run"),
            )
        self._last_step = step
