"""Early stopping (tensorflow_estimator early_stopping_test 192-200) on fetched metric values."""

from __future__ import annotations

import math
from collections.abc import Sequence

import pytest

from hookrun import LocalStepCounter
from hookrun.hooks import (
    EarlyStoppingHook,
    StopOnPredicateHook,
    ThresholdStoppingHook,
    stop_if_higher_hook,
    stop_if_lower_hook,
    stop_if_no_decrease_hook,
    stop_if_no_increase_hook,
)

from ._support import FakeClock, context, drive, values

# TF's evaluations: (step, loss, accuracy).
EVALS = [(1000, 0.8, 0.5), (2000, 0.7, 0.6), (3000, 0.4, 0.7), (3500, 0.41, 0.68)]


class JumpingCounter(LocalStepCounter):
    """A step counter that advances 500 steps per run, so a short session reaches TF's steps."""

    async def increment(self, n: int = 1) -> int:
        return self.increment_nowait(n)

    def increment_nowait(self, n: int = 1) -> int:
        return super().increment_nowait(500 * n)


def metric_at(step: int) -> dict[str, float | None]:
    """The evaluation at this step, or None values where there was no evaluation."""
    for at, loss, accuracy in EVALS:
        if at == step:
            return {"loss": loss, "accuracy": accuracy}
    return {"loss": None, "accuracy": None}


async def stops(hooks: Sequence[object], kind: str) -> bool:
    """Run the 7 steps reaching 500..3500; whether any hook stopped the session."""
    await drive(
        hooks,
        lambda i: metric_at(500 * (i + 1)),
        kind=kind,
        max_steps=7,
        step_counter=JumpingCounter(),
    )
    return any(getattr(h, "stopped_at_step", None) is not None for h in hooks)


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("threshold", "min_steps", "expected"), [(0.8, 0, False), (0.6, 4000, False), (0.6, 0, True)]
)
async def test_stop_if_higher_hook(
    threshold: float, min_steps: int, expected: bool, session_kind: str
) -> None:
    """TF's table for accuracy 0.5/0.6/0.7/0.68 at 1000/2000/3000/3500."""
    hook = stop_if_higher_hook("accuracy", threshold, min_steps=min_steps)
    await drive(
        [hook],
        lambda i: metric_at(500 * (i + 1)),
        kind=session_kind,
        max_steps=7,
        step_counter=JumpingCounter(),
    )
    assert (hook.stopped_at_step is not None) is expected


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("threshold", "min_steps", "expected"), [(0.3, 0, False), (0.5, 4000, False), (0.5, 0, True)]
)
async def test_stop_if_lower_hook(
    threshold: float, min_steps: int, expected: bool, session_kind: str
) -> None:
    """TF's table for loss 0.8/0.7/0.4/0.41."""
    hook = stop_if_lower_hook("loss", threshold, min_steps=min_steps)
    await drive(
        [hook],
        lambda i: metric_at(500 * (i + 1)),
        kind=session_kind,
        max_steps=7,
        step_counter=JumpingCounter(),
    )
    assert (hook.stopped_at_step is not None) is expected


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("max_steps", "min_steps", "expected"), [(1500, 0, False), (500, 4000, False), (500, 0, True)]
)
async def test_stop_if_no_increase_hook(
    max_steps: int, min_steps: int, expected: bool, session_kind: str
) -> None:
    """TF's table: accuracy peaks at 3000; 500 steps later without increase stops."""
    hook = stop_if_no_increase_hook("accuracy", max_steps, min_steps=min_steps)
    assert await stops([hook], session_kind) is expected


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("max_steps", "min_steps", "expected"), [(1500, 0, False), (500, 4000, False), (500, 0, True)]
)
async def test_stop_if_no_decrease_hook(
    max_steps: int, min_steps: int, expected: bool, session_kind: str
) -> None:
    """The same table for the loss (lowest at 3000)."""
    hook = stop_if_no_decrease_hook("loss", max_steps, min_steps=min_steps)
    assert await stops([hook], session_kind) is expected


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("max_steps", "loss_threshold", "expected"),
    [(1500, 0.3, False), (1500, 0.5, True), (500, 0.3, True)],
)
async def test_multiple_hooks(
    max_steps: int, loss_threshold: float, expected: bool, session_kind: str
) -> None:
    """Any one hook stopping stops the session."""
    hooks = [
        stop_if_no_decrease_hook("loss", max_steps),
        stop_if_lower_hook("loss", loss_threshold),
    ]
    assert await stops(hooks, session_kind) is expected


@pytest.mark.anyio
@pytest.mark.parametrize("should_stop", [False, True])
async def test_stop_on_predicate_after_one_run(should_stop: bool, session_kind: str) -> None:
    """The predicate's answer is reflected by should_stop() after one run (TF 197, 200)."""
    hook = StopOnPredicateHook(lambda: should_stop, run_every_secs=0)
    results = await drive([hook], lambda i: {}, kind=session_kind, max_steps=1)
    assert len(results) == 1
    assert (hook.stopped_at_step == 1) is should_stop


@pytest.mark.anyio
async def test_async_predicate_is_awaited() -> None:
    """An async should_stop_fn is awaited; stop comes after the step where it says so."""
    calls: list[int] = []

    async def should_stop() -> bool:
        calls.append(1)
        return len(calls) == 3

    results = await drive([StopOnPredicateHook(should_stop)], lambda i: {}, kind="remote")
    assert len(results) == 3


def test_predicate_must_be_callable() -> None:
    """A non-callable predicate is TF's TypeError."""
    with pytest.raises(TypeError, match=r"`should_stop_fn` must be callable\."):
        StopOnPredicateHook(True)  # type: ignore[arg-type]


def test_both_intervals_are_a_value_error() -> None:
    """run_every_secs and run_every_steps together are TF's ValueError (TF 199)."""
    with pytest.raises(
        ValueError, match=r"Only one of `run_every_secs` and `run_every_steps` must be set\."
    ):
        StopOnPredicateHook(lambda: True, run_every_secs=60, run_every_steps=100)
    with pytest.raises(ValueError, match="Only one of"):
        stop_if_higher_hook("acc", 0.9, run_every_secs=60, run_every_steps=100)


@pytest.mark.anyio
async def test_predicate_runs_only_when_its_timer_fires() -> None:
    """With run_every_secs the predicate runs on the first step, then once the interval passed."""
    clock, calls = FakeClock(), []
    hook = StopOnPredicateHook(lambda: calls.append(1), run_every_secs=60, clock=clock)
    for step in range(1, 4):
        await hook.after_run(context(step - 1), values(step))
    clock.advance(60)
    await hook.after_run(context(4), values(5))
    assert len(calls) == 2


def test_metric_decision_waits_for_the_check_timer() -> None:
    """A crossing seen between checks is acted on at the next check (run_every_steps=3)."""
    hook = ThresholdStoppingHook("acc", 0.5, run_every_steps=3, clock=FakeClock())
    outcomes = []
    for step, acc in ((1, 0.1), (2, 0.9), (3, None), (4, None)):
        ctx = context(step - 1)
        hook.after_run(ctx, values(step, acc))
        outcomes.append(ctx.stop_requested)
    assert outcomes == [False, False, False, True]


class TestEarlyStoppingHook:
    def test_validation(self) -> None:
        """Bad mode, negative patience/min_delta/min_steps, unhashable keys are rejected."""
        with pytest.raises(ValueError, match='mode must be "min" or "max"'):
            EarlyStoppingHook("loss", "lowest", patience_steps=1)  # type: ignore[arg-type]
        with pytest.raises(ValueError, match="patience_steps must be a non-negative number"):
            EarlyStoppingHook("loss", patience_steps=-1)
        with pytest.raises(ValueError, match="min_delta must be a non-negative number"):
            EarlyStoppingHook("loss", patience_steps=1, min_delta=-0.1)
        with pytest.raises(ValueError, match="min_steps must be a non-negative number"):
            EarlyStoppingHook("loss", patience_steps=1, min_steps=-5)
        with pytest.raises(TypeError, match="metric_key must be hashable"):
            EarlyStoppingHook(["loss"], patience_steps=1)  # type: ignore[arg-type]
        with pytest.raises(TypeError, match="threshold must be a number"):
            ThresholdStoppingHook("loss", "0.5")  # type: ignore[arg-type]

    def observe(self, hook: EarlyStoppingHook, evals: list[tuple[int, float]]) -> int | None:
        for step, value in evals:
            ctx = context(step - 1)
            hook.after_run(ctx, values(step, value))
            if ctx.stop_requested:
                return step
        return None

    def test_min_delta_ignores_small_improvements(self) -> None:
        """Improvements not larger than min_delta do not reset the patience."""
        hook = EarlyStoppingHook("loss", "min", patience_steps=3, min_delta=0.1, clock=FakeClock())
        assert self.observe(hook, [(1, 1.0), (2, 0.95), (3, 0.91), (4, 0.92)]) == 4
        assert hook.best == 1.0 and hook.best_step == 1

    def test_max_mode_tracks_the_best(self) -> None:
        """In max mode a higher value resets the patience."""
        hook = EarlyStoppingHook("acc", "max", patience_steps=2, clock=FakeClock())
        assert self.observe(hook, [(1, 0.1), (2, 0.2), (3, 0.15), (4, 0.3), (5, 0.3)]) is None
        assert hook.best == 0.3 and hook.best_step == 4

    def test_baseline_must_be_beaten(self) -> None:
        """With a baseline the first evaluation must beat it to count as an improvement."""
        hook = EarlyStoppingHook("loss", patience_steps=2, baseline=0.5, clock=FakeClock())
        assert self.observe(hook, [(1, 0.6), (2, 0.55), (3, 0.7)]) == 3

    def test_nan_never_improves(self) -> None:
        """NaN values count as no improvement."""
        hook = EarlyStoppingHook("loss", patience_steps=2, clock=FakeClock())
        assert self.observe(hook, [(1, math.nan), (2, 1.0), (3, math.nan), (4, math.nan)]) == 4
