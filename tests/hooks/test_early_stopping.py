"""Early stopping (tensorflow_estimator early_stopping_test 192-200) on fetched metric values,
driven with hookrun.testing."""

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
from hookrun.testing import Drive, MockClock, Record, drive

pytestmark = pytest.mark.anyio

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


async def tf_evaluations(hooks: Sequence[object]) -> Record:
    """Run the 7 steps reaching 500..3500, the evaluations at TF's steps."""
    return await drive(
        list(hooks),
        steps=[metric_at(500 * (index + 1)) for index in range(7)],
        step_counter=JumpingCounter(),
    )


async def stops(hooks: Sequence[object]) -> bool:
    """Whether any hook stopped the session during TF's evaluations."""
    record = await tf_evaluations(hooks)
    return record.stop is not None


@pytest.mark.parametrize(
    ("threshold", "min_steps", "expected"), [(0.8, 0, False), (0.6, 4000, False), (0.6, 0, True)]
)
async def test_stop_if_higher_hook(threshold: float, min_steps: int, expected: bool) -> None:
    """TF's table for accuracy 0.5/0.6/0.7/0.68 at 1000/2000/3000/3500."""
    hook = stop_if_higher_hook("accuracy", threshold, min_steps=min_steps)
    record = await tf_evaluations([hook])
    assert (hook.stopped_at_step is not None) is expected
    assert record.stopped_at == (2500 if expected else None)  # the run that reached 3000


@pytest.mark.parametrize(
    ("threshold", "min_steps", "expected"), [(0.3, 0, False), (0.5, 4000, False), (0.5, 0, True)]
)
async def test_stop_if_lower_hook(threshold: float, min_steps: int, expected: bool) -> None:
    """TF's table for loss 0.8/0.7/0.4/0.41."""
    hook = stop_if_lower_hook("loss", threshold, min_steps=min_steps)
    await tf_evaluations([hook])
    assert (hook.stopped_at_step is not None) is expected


@pytest.mark.parametrize(
    ("max_steps", "min_steps", "expected"), [(1500, 0, False), (500, 4000, False), (500, 0, True)]
)
async def test_stop_if_no_increase_hook(max_steps: int, min_steps: int, expected: bool) -> None:
    """TF's table: accuracy peaks at 3000; 500 steps later without increase stops."""
    hook = stop_if_no_increase_hook("accuracy", max_steps, min_steps=min_steps)
    assert await stops([hook]) is expected


@pytest.mark.parametrize(
    ("max_steps", "min_steps", "expected"), [(1500, 0, False), (500, 4000, False), (500, 0, True)]
)
async def test_stop_if_no_decrease_hook(max_steps: int, min_steps: int, expected: bool) -> None:
    """The same table for the loss (lowest at 3000)."""
    hook = stop_if_no_decrease_hook("loss", max_steps, min_steps=min_steps)
    assert await stops([hook]) is expected


@pytest.mark.parametrize(
    ("max_steps", "loss_threshold", "expected"),
    [(1500, 0.3, False), (1500, 0.5, True), (500, 0.3, True)],
)
async def test_multiple_hooks(max_steps: int, loss_threshold: float, expected: bool) -> None:
    """Any one hook stopping stops the session."""
    hooks = [
        stop_if_no_decrease_hook("loss", max_steps),
        stop_if_lower_hook("loss", loss_threshold),
    ]
    assert await stops(hooks) is expected


@pytest.mark.parametrize("should_stop", [False, True])
async def test_stop_on_predicate_after_one_run(should_stop: bool) -> None:
    """The predicate's answer is reflected by should_stop() after one run (TF 197, 200)."""
    hook = StopOnPredicateHook(lambda: should_stop, run_every_secs=0)
    record = await drive(hook, steps=1)
    assert record.steps == 1
    assert (hook.stopped_at_step == 1) is should_stop
    assert (record.stopped_at == 0) is should_stop


async def test_async_predicate_is_awaited() -> None:
    """An async should_stop_fn is awaited; stop comes after the step where it says so."""
    calls: list[int] = []

    async def should_stop() -> bool:
        calls.append(1)
        return len(calls) == 3

    record = await drive(StopOnPredicateHook(should_stop), steps=10)
    assert record.steps == 3 and record.stopped_at == 2


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


async def test_predicate_runs_only_when_its_timer_fires(mock_clock: MockClock, drive: Drive) -> None:
    """With run_every_secs the predicate runs on the first step, then once the interval passed."""
    calls: list[float] = []
    hook = StopOnPredicateHook(lambda: calls.append(mock_clock()), run_every_secs=60, clock=mock_clock)
    await drive(hook, steps=6, tick=20)  # the steps end at t = 0, 20, ..., 100
    assert calls == [0, 60]


async def test_metric_decision_waits_for_the_check_timer(drive: Drive) -> None:
    """A crossing seen between checks is acted on at the next check (run_every_steps=3)."""
    hook = ThresholdStoppingHook("acc", 0.5, run_every_steps=3)
    accs = [{"acc": 0.1}, {"acc": 0.9}, {"acc": None}, {"acc": None}, {"acc": None}]
    record = await drive(hook, steps=accs)
    assert record.stopped_at == 3 and hook.stopped_at_step == 4


async def test_metric_state_survives_a_recovery(drive: Drive) -> None:
    """A recovery between evaluations keeps the best value and its step."""
    hook = EarlyStoppingHook("loss", patience_steps=3)
    losses = [{"loss": 1.0}, {"loss": 0.5}, {"loss": 0.7}, {"loss": 0.8}, {"loss": 0.9}, {"loss": 0.2}]
    record = await drive(hook, steps=losses, errors={2: "unavailable"})
    assert record.sessions == 2 and hook.best == 0.5 and hook.best_step == 2
    assert hook.stopped_at_step == 5 and record.steps == 5


class TestEarlyStoppingHook:
    def test_validation(self) -> None:
        """Bad mode, negative patience/min_delta/min_steps, unhashable keys are rejected."""
        with pytest.raises(ValueError, match='mode must be "min" or "max"'):
            EarlyStoppingHook("loss", "lowest", patience_steps=1)  # type: ignore[arg-type]
        with pytest.raises(ValueError, match="patience_steps must be an int >= 0, got -1"):
            EarlyStoppingHook("loss", patience_steps=-1)
        with pytest.raises(ValueError, match=r"min_delta must be a number >= 0, got -0\.1"):
            EarlyStoppingHook("loss", patience_steps=1, min_delta=-0.1)
        with pytest.raises(ValueError, match="min_steps must be an int >= 0, got -5"):
            EarlyStoppingHook("loss", patience_steps=1, min_steps=-5)
        with pytest.raises(TypeError, match="metric_key must be hashable"):
            EarlyStoppingHook(["loss"], patience_steps=1)  # type: ignore[arg-type]
        with pytest.raises(TypeError, match="threshold must be a number"):
            ThresholdStoppingHook("loss", "0.5")  # type: ignore[arg-type]

    async def observe(self, hook: EarlyStoppingHook, evals: list[float]) -> int | None:
        """The global step after which the hook stopped, one evaluation per step."""
        await drive(hook, steps=[{hook.metric_key: value} for value in evals])
        return hook.stopped_at_step

    async def test_min_delta_ignores_small_improvements(self) -> None:
        """Improvements not larger than min_delta do not reset the patience."""
        hook = EarlyStoppingHook("loss", "min", patience_steps=3, min_delta=0.1)
        assert await self.observe(hook, [1.0, 0.95, 0.91, 0.92]) == 4
        assert hook.best == 1.0 and hook.best_step == 1

    async def test_max_mode_tracks_the_best(self) -> None:
        """In max mode a higher value resets the patience."""
        hook = EarlyStoppingHook("acc", "max", patience_steps=2)
        assert await self.observe(hook, [0.1, 0.2, 0.15, 0.3, 0.3]) is None
        assert hook.best == 0.3 and hook.best_step == 4

    async def test_baseline_must_be_beaten(self) -> None:
        """With a baseline the first evaluation must beat it to count as an improvement."""
        hook = EarlyStoppingHook("loss", patience_steps=2, baseline=0.5)
        assert await self.observe(hook, [0.6, 0.55, 0.7]) == 3

    async def test_nan_never_improves(self) -> None:
        """NaN values count as no improvement."""
        hook = EarlyStoppingHook("loss", patience_steps=2)
        assert await self.observe(hook, [math.nan, 1.0, math.nan, math.nan]) == 4

    async def test_zero_patience_stops_at_the_first_evaluation_that_does_not_improve(self) -> None:
        """patience_steps=0 lets every improvement pass and stops at the first that is none."""
        hook = EarlyStoppingHook("loss", patience_steps=0)
        assert await self.observe(hook, [3.0, 2.0, 1.0, 1.5]) == 4

    async def test_the_baseline_is_never_reported_as_the_best(self) -> None:
        """best and best_step are those of an evaluation, never the baseline's value."""
        hook = EarlyStoppingHook("loss", patience_steps=10, baseline=0.5)
        await self.observe(hook, [0.9, 0.8])
        assert (hook.best, hook.best_step) == (0.8, 2)

    async def test_an_improvement_short_of_the_baseline_does_not_restart_the_wait(self) -> None:
        """Improving on the best without beating the baseline leaves the wait running from the start."""
        hook = EarlyStoppingHook("loss", patience_steps=2, baseline=0.5)
        assert await self.observe(hook, [0.9, 0.8, 0.85]) == 3

    async def test_an_improvement_beating_the_baseline_restarts_the_wait(self) -> None:
        """An evaluation better than both the best and the baseline starts the wait again."""
        hook = EarlyStoppingHook("loss", patience_steps=2, baseline=0.5)
        assert await self.observe(hook, [0.9, 0.4, 0.45, 0.45]) == 4

    async def test_with_min_steps_the_wait_runs_from_the_first_run_that_counts(self) -> None:
        """Evaluations below min_steps are ignored, and the wait starts at step min_steps - 1."""
        hook = EarlyStoppingHook("loss", patience_steps=2, baseline=0.5, min_steps=4)
        assert await self.observe(hook, [0.1, 0.1, 0.1, 0.9, 0.95]) == 5
        assert (hook.best, hook.best_step) == (0.9, 4)

    async def test_a_first_evaluation_that_does_not_improve_never_stops(self) -> None:
        """A NaN first evaluation does not stop even with patience 0, as Keras' first epoch."""
        hook = EarlyStoppingHook("loss", patience_steps=0)
        assert await self.observe(hook, [math.nan, 1.0, 2.0]) == 3
        assert (hook.best, hook.best_step) == (1.0, 2)

    async def test_tensorflows_zero_max_steps_stops_at_the_first_evaluation(self) -> None:
        """stop_if_no_decrease_hook keeps TensorFlow's walk: with 0 steps it stops at once."""
        hook = stop_if_no_decrease_hook("loss", 0)
        assert await self.observe(hook, [3.0, 2.0]) == 1

    async def test_the_wait_goes_on_from_a_saved_state(self) -> None:
        """A state saved mid-wait (baseline not beaten) stops the restored hook where it would have."""
        hook = EarlyStoppingHook("loss", patience_steps=3, baseline=0.5)
        await self.observe(hook, [0.9, 0.8])
        again = EarlyStoppingHook("loss", patience_steps=3, baseline=0.5)
        again.load_state_dict(hook.state_dict())
        record = await drive(again, steps=[{"loss": 0.85}], step_counter=LocalStepCounter(2))
        assert record.stop is not None and again.stopped_at_step == 3

    def test_a_state_from_before_the_wait_start_was_saved_counts_from_the_best(self) -> None:
        """A state without the wait's start (an older checkpoint) counts the wait from best_step."""
        hook = EarlyStoppingHook("loss", patience_steps=3)
        hook.load_state_dict({"verdict": None, "stopped_at_step": None, "timer": {}, "best": 1.0, "best_step": 7})
        assert hook.state_dict()["since"] == 7 and hook.state_dict()["evaluations"] == 1
