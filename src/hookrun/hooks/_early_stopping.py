"""Early stopping: ``StopOnPredicateHook`` and the metric-based hooks (TensorFlow's
``stop_if_*`` factories build them, in ``_stop_if.py``).

Metric hooks fetch ``metric_key`` every step and treat each non-``None``
value as one *evaluation* at the global step that run reached (a step
function that evaluates only now and then returns ``None`` in between).
Evaluations are folded into a small state as they arrive (no history is
kept); the decision is acted on when the check timer fires (every step by
default). With evaluations arriving in ascending step order — the runtime's
counter only grows — this is exactly TensorFlow's walk over the evaluations
read from the event files.
"""

from __future__ import annotations

import math
import operator
from collections.abc import Callable, Hashable, Mapping
from typing import Any, Literal

from .._hook_protocol import SessionRunArgs, SessionRunContext, SessionRunHook, SessionRunValues
from .._timer import Clock, SecondOrStepTimer
from .._validate import check_callable, check_flag, check_int, check_number
from ._common import call_maybe_async, check_timer_args, fields, logger

__all__ = ["EarlyStoppingHook", "StopOnPredicateHook", "ThresholdStoppingHook"]


def _check_timer(
    owner: str, run_every_secs: float | None, run_every_steps: int | None, clock: Clock | None
) -> SecondOrStepTimer:
    check_timer_args(owner, "run_every_secs", run_every_secs, "run_every_steps", run_every_steps)
    if run_every_secs is not None and run_every_steps is not None:
        raise ValueError("Only one of `run_every_secs` and `run_every_steps` must be set.")
    if run_every_secs is None and run_every_steps is None:
        run_every_steps = 1
    return SecondOrStepTimer(every_secs=run_every_secs, every_steps=run_every_steps, clock=clock)


class StopOnPredicateHook(SessionRunHook):
    """Requests stop when ``should_stop_fn()`` (sync or async, no arguments) returns true.

    The predicate is called after a run when the check timer fires: every
    ``run_every_secs`` seconds or every ``run_every_steps`` steps (at most one
    of them; neither means every step); the first run always checks.
    ``stopped_at_step`` records the global step at which it requested stop.

    Args:
        should_stop_fn: A function of no arguments, plain or ``async def``; a true result
            stops.
        run_every_secs: Call it at most once every this many seconds.
        run_every_steps: Call it every this many steps (at most one of the two; neither:
            every step).
        clock: A function of no arguments returning seconds. ``None``:
            ``anyio.current_time``.
    """

    overlapping_steps = True

    #: It keeps the state of one session: it serves one monitored session at a time.
    serves_one_session = True

    def __init__(
        self,
        should_stop_fn: Callable[[], Any],
        run_every_secs: float | None = None,
        run_every_steps: int | None = None,
        *,
        clock: Clock | None = None,
    ) -> None:
        if not callable(should_stop_fn):
            raise TypeError(f"`should_stop_fn` must be callable. Got {should_stop_fn!r}.")
        check_callable("StopOnPredicateHook: should_stop_fn", should_stop_fn)
        self._timer = _check_timer("StopOnPredicateHook", run_every_secs, run_every_steps, clock)
        self._should_stop_fn = should_stop_fn
        self.stopped_at_step: int | None = None

    def __repr__(self) -> str:
        return f"StopOnPredicateHook({self._should_stop_fn!r}, {self._timer!r})"

    async def after_run(self, run_context: SessionRunContext, run_values: SessionRunValues) -> None:
        """Call the predicate when due and request stop if it says so."""
        step = run_values.global_step
        if not self._timer.should_trigger_for_step(step):
            return
        self._timer.update_last_triggered_step(step)
        if await call_maybe_async(self._should_stop_fn):
            logger.info("Requesting early stopping at global step %d", step, extra=fields(step, type(self).__name__, "after_run"))
            self.stopped_at_step = step
            run_context.request_stop()


class _MetricStoppingHook(SessionRunHook):
    """Fetch ``metric_key`` every step, fold evaluations in, stop when ``_verdict`` is set."""

    overlapping_steps = True

    #: It keeps the state of one session: it serves one monitored session at a time.
    serves_one_session = True

    def __init__(
        self,
        owner: str,
        metric_key: Hashable,
        min_steps: int,
        run_every_secs: float | None,
        run_every_steps: int | None,
        clock: Clock | None,
    ) -> None:
        try:
            hash(metric_key)
        except TypeError:
            raise TypeError(f"{owner}: metric_key must be hashable, got {metric_key!r}") from None
        check_int(f"{owner}: min_steps", min_steps)
        self.metric_key = metric_key
        self.min_steps = min_steps
        self._timer = _check_timer(owner, run_every_secs, run_every_steps, clock)
        self._request = SessionRunArgs(metric_key)
        self._verdict: str | None = None
        self.stopped_at_step: int | None = None

    def before_run(self, run_context: SessionRunContext) -> SessionRunArgs:
        """Fetch the metric."""
        return self._request

    def after_run(self, run_context: SessionRunContext, run_values: SessionRunValues) -> None:
        """Fold this step's evaluation in; request stop when due and decided."""
        step = run_values.global_step
        value = run_values.results
        if value is not None and step >= self.min_steps and self._verdict is None:
            self._verdict = self._observe(step, float(value))
        if not self._timer.should_trigger_for_step(step):
            return
        self._timer.update_last_triggered_step(step)
        if self._verdict is not None:
            logger.info("%s", self._verdict, extra=fields(step, type(self).__name__, "after_run"))
            self.stopped_at_step = step
            run_context.request_stop()

    def _observe(self, step: int, value: float) -> str | None:
        """Fold one evaluation in; return the reason to stop, or ``None``."""
        raise NotImplementedError

    def state_dict(self) -> dict[str, Any]:
        """The decision so far and the check timer (checkpointable)."""
        return {"verdict": self._verdict, "stopped_at_step": self.stopped_at_step, "timer": self._timer.state_dict()}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Take back a state from ``state_dict``."""
        self._verdict = state.get("verdict")
        self.stopped_at_step = state.get("stopped_at_step")
        self._timer.load_state_dict(state.get("timer") or {})


class ThresholdStoppingHook(_MetricStoppingHook):
    """Stops once an evaluation at a step >= ``min_steps`` is strictly above
    (``higher=True``) or below (``higher=False``) ``threshold``.

    Args:
        metric_key: The fetch key of the evaluated metric.
        threshold: The value to pass.
        higher: Stop above the threshold (``True``) or below it.
        min_steps: The first step whose evaluation counts.
        run_every_secs: Evaluate at most once every this many seconds.
        run_every_steps: Evaluate every this many steps (at most one of the two; neither:
            every step).
        clock: A function of no arguments returning seconds. ``None``:
            ``anyio.current_time``.
    """

    def __init__(
        self,
        metric_key: Hashable,
        threshold: float,
        *,
        higher: bool = True,
        min_steps: int = 0,
        run_every_secs: float | None = None,
        run_every_steps: int | None = None,
        clock: Clock | None = None,
    ) -> None:
        super().__init__(
            "ThresholdStoppingHook", metric_key, min_steps, run_every_secs, run_every_steps, clock
        )
        check_number("ThresholdStoppingHook: threshold", threshold, minimum=None)
        check_flag("ThresholdStoppingHook: higher", higher)
        self.threshold = threshold
        self._crossed = operator.gt if higher else operator.lt
        self._words = "greater than" if higher else "less than"

    def __repr__(self) -> str:
        return f"ThresholdStoppingHook({self.metric_key!r}, {self._words} {self.threshold})"

    def _observe(self, step: int, value: float) -> str | None:
        if not self._crossed(value, self.threshold):
            return None
        return (
            f'At step {step}, metric "{self.metric_key}" has value {value} which is '
            f"{self._words} the configured threshold ({self.threshold}) for early stopping."
        )


class EarlyStoppingHook(_MetricStoppingHook):
    """Stops when ``metric_key`` has not improved for ``patience_steps`` global steps.

    ``mode="min"`` (lower is better, e.g. a loss) or ``"max"`` (e.g. accuracy).
    An evaluation improves when it is better than the best so far by more than
    ``min_delta`` (with no best yet, any value but NaN and the worst infinity
    does); ``best`` and ``best_step`` are the best evaluation and its step
    (``None`` before the first improvement: never a value no evaluation
    produced). The wait runs
    from the start of the first run whose evaluation counts (the session's
    first step, or ``min_steps - 1`` if later) and starts again at each
    improvement; with a ``baseline``, only at an improvement that also beats
    the baseline by more than ``min_delta``. An evaluation that does not
    improve stops the session once the wait is ``patience_steps`` or more; an
    improving evaluation and the very first one never stop. With one
    evaluation every ``n`` steps, ``patience_steps=patience * n`` is Keras'
    ``EarlyStopping(patience=patience)``, ``patience=0`` and ``baseline``
    included.

    Args:
        metric_key: The fetch key of the evaluated metric.
        mode: Whether lower (``"min"``, a loss) or higher (``"max"``, an accuracy) is
            better.
        patience_steps: Global steps without improvement after which an evaluation stops the
            session.
        min_delta: How much better than the best an evaluation must be to improve.
        min_steps: The first step whose evaluation counts.
        baseline: A value an improvement must also beat to restart the wait. ``None``: none.
        run_every_secs: Evaluate at most once every this many seconds.
        run_every_steps: Evaluate every this many steps (at most one of the two; neither:
            every step).
        clock: A function of no arguments returning seconds. ``None``:
            ``anyio.current_time``.
    """

    #: TensorFlow's walk (``stop_if_no_*_hook``): the wait starts at the first evaluation and
    #: any evaluation, an improving one included, stops once it has lasted the patience.
    _tf_walk = False

    def __init__(
        self,
        metric_key: Hashable,
        mode: Literal["min", "max"] = "min",
        *,
        patience_steps: int,
        min_delta: float = 0.0,
        min_steps: int = 0,
        baseline: float | None = None,
        run_every_secs: float | None = None,
        run_every_steps: int | None = None,
        clock: Clock | None = None,
    ) -> None:
        owner = "EarlyStoppingHook"
        super().__init__(owner, metric_key, min_steps, run_every_secs, run_every_steps, clock)
        if mode not in ("min", "max"):
            raise ValueError(f'{owner}: mode must be "min" or "max", got {mode!r}')
        check_int(f"{owner}: patience_steps", patience_steps)
        check_number(f"{owner}: min_delta", min_delta)
        check_number(f"{owner}: baseline", baseline, minimum=None, optional=True)
        self.mode = mode
        self.patience_steps = patience_steps
        self.min_delta = min_delta
        self.baseline = baseline
        self.best: float | None = None
        self.best_step: int | None = None
        self._since: int | None = None  # the step the wait runs from
        self._evaluations = 0

    def __repr__(self) -> str:
        return (
            f"EarlyStoppingHook({self.metric_key!r}, mode={self.mode!r}, "
            f"patience_steps={self.patience_steps}, best={self.best} at {self.best_step})"
        )

    def before_run(self, run_context: SessionRunContext) -> SessionRunArgs:
        """Fetch the metric; the first run also starts the wait (Keras counts from the start)."""
        if self._since is None and not self._tf_walk:
            self._since = max(run_context.global_step, self.min_steps - 1)
        return self._request

    def state_dict(self) -> dict[str, Any]:
        """The best value, its step, the wait's start, the decision so far and the check timer
        (checkpointable)."""
        return {
            **super().state_dict(),
            "best": self.best,
            "best_step": self.best_step,
            "since": self._since,
            "evaluations": self._evaluations,
        }

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Take back a state from ``state_dict``: the wait goes on from where it ran."""
        super().load_state_dict(state)
        self.best = state.get("best")
        self.best_step = state.get("best_step")
        self._since = state.get("since", self.best_step)  # a state saved before the wait's start was kept
        self._evaluations = state.get("evaluations", 0 if self.best_step is None else 1)

    def _beats(self, value: float, reference: float | None) -> bool:
        """Better than ``reference`` (no reference: any number) by more than ``min_delta``."""
        if self.mode == "max":
            return value - self.min_delta > (-math.inf if reference is None else reference)
        return value + self.min_delta < (math.inf if reference is None else reference)

    def _observe(self, step: int, value: float) -> str | None:
        self._evaluations += 1
        if self._since is None:  # TensorFlow's walk, or no before_run seen: from this evaluation
            self._since = step
        if self._beats(value, self.best):
            self.best, self.best_step = value, step
            if self.baseline is None or self._beats(value, self.baseline):
                self._since = step
            if not self._tf_walk:
                return None
        elif self._evaluations == 1 and not self._tf_walk:
            return None
        waited = step - self._since
        if waited < self.patience_steps:
            return None
        change = "increase" if self.mode == "max" else "decrease"
        return (
            f'No {change} in metric "{self.metric_key}" for {waited} steps, which is greater '
            f"than or equal to max steps ({self.patience_steps}) configured for early stopping."
        )
