"""``SummarySaverHook``: write fetched scalars as summaries every N steps or seconds."""

from __future__ import annotations

import os
from collections.abc import Hashable, Iterable, Mapping
from typing import Any

from .._hook_protocol import SessionRunArgs, SessionRunContext, SessionRunHook, SessionRunValues
from .._timer import Clock, SecondOrStepTimer
from ._common import check_timer_args
from ._due import DueSteps
from ._summary_writer import SummaryWriter, WriterSlot

__all__ = ["SummarySaverHook"]


class SummarySaverHook(SessionRunHook):
    """Fetches ``scalars`` on the first step and then every ``save_steps`` / ``save_secs``,
    and writes them at the step reached by that run.

    ``scalars`` maps tag → fetch key, or is an iterable of string fetch keys
    (each its own tag). Values must convert with ``float()``. Exactly one of
    ``save_steps`` / ``save_secs`` (TensorFlow's timer messages), and exactly
    one of ``output_dir`` (TensorBoard event files through tensorboardX, extra
    ``hookrun[tensorboard]``) / ``summary_writer`` (any :class:`SummaryWriter`).
    Whether to fetch is decided in ``before_run`` for the step the run will
    reach, so nothing is fetched on other steps. ``end`` (or ``on_exception``,
    when the session exits with an error or is cancelled) closes a writer the
    hook made and flushes one it was given. ``clock`` replaces
    :func:`anyio.current_time`.

    Right with steps in flight (``max_in_flight > 1``): a step is decided due
    in its ``before_run`` counting the due steps still in flight before it, the
    decision is carried in its run context, and its ``after_run`` (in step
    order) writes only if the step is still due then, so the steps written are
    those one step at a time would write.

    Args:
        save_steps: Steps between summaries.
        save_secs: Seconds between summaries (exactly one of the two).
        output_dir: Where to write TensorBoard event files.
        summary_writer: A ``SummaryWriter`` to write with instead (exactly one of the two).
        scalars: The values written: a mapping tag → fetch key, or string fetch keys that
            are their own tags.
        clock: A function of no arguments returning seconds. ``None``:
            ``anyio.current_time``.
    """

    overlapping_steps = True

    #: It keeps the state of one session: it serves one monitored session at a time.
    serves_one_session = True

    def __init__(
        self,
        save_steps: int | None = None,
        save_secs: float | None = None,
        output_dir: str | os.PathLike[str] | None = None,
        summary_writer: SummaryWriter | None = None,
        scalars: Mapping[str, Hashable] | Iterable[str] = (),
        *,
        clock: Clock | None = None,
    ) -> None:
        check_timer_args("SummarySaverHook", "save_secs", save_secs, "save_steps", save_steps)
        self._timer = SecondOrStepTimer(every_secs=save_secs, every_steps=save_steps, clock=clock)
        self._scalars = _scalar_map(scalars)
        self._slot = WriterSlot("SummarySaverHook", output_dir, summary_writer)
        if not self._slot.configured:
            raise ValueError(
                "SummarySaverHook needs somewhere to write: give output_dir or summary_writer"
            )
        self._due = DueSteps(self._timer)
        self._request = SessionRunArgs(self._scalars)

    def __repr__(self) -> str:
        return f"SummarySaverHook({sorted(self._scalars)!r}, {self._timer!r})"

    async def begin(self) -> None:
        """Open the writer and restart the timer."""
        self._due.reset()
        await self._slot.open()

    def before_run(self, run_context: SessionRunContext) -> SessionRunArgs | None:
        """Fetch the scalars if the step this run reaches is due."""
        started = self._due.start(run_context)
        due = self._due.due(started, started + 1)
        self._due.expect(run_context, started + 1 if due else None)
        run_context.step_state[self] = due
        return self._request if due else None

    def after_run(self, run_context: SessionRunContext, run_values: SessionRunValues) -> None:
        """Write the fetched scalars at the step after this run, if it is still due."""
        started = run_context.global_step
        self._due.done(started)
        if not run_context.step_state.get(self) or self._slot.writer is None:
            return
        if not self._timer.should_trigger_for_step(started + 1):
            return
        step = run_values.global_step
        self._timer.update_last_triggered_step(step)
        results: dict[str, Any] = run_values.results
        for tag, value in results.items():
            self._slot.writer.add_scalar(tag, _to_float(tag, value), step)

    async def end(self, session: object) -> None:
        """Close (or flush) the writer."""
        await self._slot.finish()

    async def on_exception(self, session: object, exception: BaseException) -> None:
        """Close (or flush) the writer: the summaries written so far are kept."""
        await self._slot.finish()


def _scalar_map(scalars: Mapping[str, Hashable] | Iterable[str]) -> dict[str, Hashable]:
    if isinstance(scalars, Mapping):
        mapping = dict(scalars)
    elif isinstance(scalars, (str, bytes)) or not isinstance(scalars, Iterable):
        raise TypeError(
            "SummarySaverHook: scalars must be a mapping tag -> fetch key or a list of "
            f"string fetch keys, got {scalars!r}"
        )
    else:
        mapping = {key: key for key in scalars}
    if not mapping:
        raise ValueError("SummarySaverHook needs at least one scalar to write (scalars=...)")
    for tag in mapping:
        if not isinstance(tag, str):
            raise TypeError(f"SummarySaverHook: summary tags must be strings, got {tag!r}")
    return mapping


def _to_float(tag: str, value: object) -> float:
    try:
        return float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        raise TypeError(
            f"SummarySaverHook: the value fetched for scalar {tag!r} is not a number: {value!r}"
        ) from None
