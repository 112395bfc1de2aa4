"""``LoggingTensorHook``: log fetched values every N local steps, every N seconds, and/or at end.

At ``end`` it logs the values of the last completed step (fetched with that
step), never running the session again: on a ``StepSession`` another run would
be one more step, and at the end of the input it would fail. This differs from
TensorFlow, whose hook runs the tensors once more at ``end``.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable, Mapping
from typing import Any

from .._hook_protocol import SessionRunArgs, SessionRunContext, SessionRunHook, SessionRunValues
from .._timer import Clock, NeverTriggerTimer, SecondOrStepTimer
from .._validate import check_callable, check_flag, check_int, check_number
from ._common import fields, logger
from ._due import DueSteps

__all__ = ["LoggingTensorHook"]

Formatter = Callable[[dict[Hashable, Any]], str]


class LoggingTensorHook(SessionRunHook):
    """Logs the values of ``tensors`` (at INFO, logger ``hookrun``).

    ``tensors`` maps tag → fetch key (logged in sorted tag order) or is an
    iterable of fetch keys (each its own tag, kept in order). The period is
    counted in *local* iterations of this hook (reset in ``begin``), not in
    global steps: values are fetched and logged on iterations 0, N, 2N, ...
    (``every_n_iter``) or at most once every ``every_n_secs`` seconds; with
    ``at_end=True`` they are fetched with every step and the last completed
    step's values are logged at ``end`` (nothing if no step completed). The
    default line is ``"tag = value, ..."`` followed by
    ``" (x.xxx sec)"`` from the second log on; ``formatter(values)`` replaces it.
    ``clock`` (keyword-only) replaces :func:`anyio.current_time`.

    Right with steps in flight (``max_in_flight > 1``): whether a step fetches
    the values is decided in its ``before_run`` (counting the steps still in
    flight before it) and carried in its run context; its ``after_run``, in step
    order, logs them if that iteration is still due, so the lines are those one
    step at a time would log.

    Args:
        tensors: What to log: a mapping tag → fetch key, or fetch keys that are their own
            tags.
        every_n_iter: Log every this many iterations of the hook.
        every_n_secs: Log at most once every this many seconds instead.
        at_end: Log the last step's values at ``end`` instead.
        formatter: A function from the mapping tag → value to the line logged. ``None``:
            ``"tag = value, ..."``.
        clock: A function of no arguments returning seconds. ``None``:
            ``anyio.current_time``.
    """

    overlapping_steps = True

    #: It keeps the state of one session: it serves one monitored session at a time.
    serves_one_session = True

    def __init__(
        self,
        tensors: Mapping[Hashable, Hashable] | Iterable[Hashable],
        every_n_iter: int | None = None,
        every_n_secs: float | None = None,
        at_end: bool = False,
        formatter: Formatter | None = None,
        *,
        clock: Clock | None = None,
    ) -> None:
        check_flag("LoggingTensorHook: at_end", at_end)
        if type(every_n_iter) is int and every_n_iter <= 0:  # TensorFlow's message
            raise ValueError(f"invalid every_n_iter={every_n_iter}.")
        check_int("LoggingTensorHook: every_n_iter", every_n_iter, minimum=1, optional=True)
        check_number("LoggingTensorHook: every_n_secs", every_n_secs, optional=True, unit="seconds")
        only_at_end = at_end and every_n_iter is None and every_n_secs is None
        if not only_at_end and (every_n_iter is None) == (every_n_secs is None):
            raise ValueError(
                "either at_end and/or exactly one of every_n_iter and every_n_secs must be provided."
            )
        if formatter is not None:
            check_callable("LoggingTensorHook: formatter", formatter)
        self._tags, self._tensors = _tags_and_keys(tensors)
        self._formatter = formatter
        self._at_end = at_end
        self._timer: SecondOrStepTimer | NeverTriggerTimer = (
            NeverTriggerTimer()
            if only_at_end
            else SecondOrStepTimer(every_secs=every_n_secs, every_steps=every_n_iter, clock=clock)
        )
        self._due = DueSteps(self._timer)
        self._request = SessionRunArgs(self._tensors)
        self._iter_count = 0
        #: With ``at_end``: the values of the last completed step, logged at ``end``.
        self._last_values: dict[Hashable, Any] | None = None

    def __repr__(self) -> str:
        return f"LoggingTensorHook({self._tags!r}, timer={self._timer!r}, at_end={self._at_end})"

    async def begin(self) -> None:
        """Restart the local iteration count and the timer."""
        self._due.reset()
        self._iter_count = 0
        self._last_values = None

    def before_run(self, run_context: SessionRunContext) -> SessionRunArgs | None:
        """Fetch the values on triggering iterations (on every one with ``at_end``)."""
        started = self._due.start(run_context)
        iteration = self._iter_count + self._due.ahead(started)
        due = self._due.due(started, iteration)
        self._due.expect(run_context, iteration if due else None)
        run_context.step_state[self] = due
        return self._request if due or self._at_end else None

    def after_run(self, run_context: SessionRunContext, run_values: SessionRunValues) -> None:
        """Log the values fetched for this iteration, if still due; keep them for ``end``."""
        self._due.done(run_context.global_step)
        if self._at_end:
            self._last_values = run_values.results
        if run_context.step_state.get(self) and self._timer.should_trigger_for_step(self._iter_count):
            self._log(run_values.results, "after_run")
        self._iter_count += 1

    async def end(self, session: Any) -> None:
        """With ``at_end``, log the last completed step's values (the session is not run)."""
        if self._at_end and self._last_values is not None:
            self._log(self._last_values, "end")

    def _log(self, values: dict[Hashable, Any], phase: str) -> None:
        elapsed, _ = self._timer.update_last_triggered_step(self._iter_count)
        extra = fields(None, "LoggingTensorHook", phase)
        if self._formatter is not None:
            logger.info("%s", self._formatter(values), extra=extra)
            return
        line = ", ".join(f"{tag} = {values[tag]}" for tag in self._tags)
        if elapsed is None:
            logger.info("%s", line, extra=extra)
        else:
            logger.info("%s (%.3f sec)", line, elapsed, extra=extra)


def _tags_and_keys(
    tensors: Mapping[Hashable, Hashable] | Iterable[Hashable],
) -> tuple[list[Hashable], dict[Hashable, Hashable]]:
    if isinstance(tensors, Mapping):
        try:
            tags = sorted(tensors)
        except TypeError:
            tags = list(tensors)
        return tags, dict(tensors)
    if isinstance(tensors, (str, bytes)) or not isinstance(tensors, Iterable):
        raise TypeError(
            "LoggingTensorHook: tensors must be a mapping tag -> fetch key or a list of "
            f"fetch keys, got {tensors!r}"
        )
    tags = list(tensors)
    return tags, {tag: tag for tag in tags}
