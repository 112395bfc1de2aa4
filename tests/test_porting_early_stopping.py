"""The early-stopping mappings of docs/porting-keras-ignite.md stop where Ignite and Keras do.

Neither framework is installed: their stopping rules are written out here from their
sources (``ignite.handlers.EarlyStopping.__call__``, ``keras.callbacks.EarlyStopping``
``on_epoch_end``, ``_is_improvement``), and the hooks of the page, driven through a real
monitored session with one evaluation every few steps, must stop at the same
evaluation, or not at all when the rule never stops.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Literal

import pytest
from examples.porting_ignite import IgniteEarlyStopping
from hypothesis import given, settings
from hypothesis import strategies as st

from hookrun.hooks import EarlyStoppingHook
from hookrun.testing import drive

pytestmark = pytest.mark.anyio

#: Ignite's own test of ``min_delta`` (test_early_stopping_on_delta): patience 2, min_delta 0.1.
IGNITE_SCORES = [1.0, 2.0, 2.01, 3.0, 3.4, 3.5, 3.6]


def ignite_stops_at(scores: Sequence[float], patience: int, min_delta: float, cumulative_delta: bool) -> int | None:
    """The evaluation (1-based) at which Ignite's EarlyStopping calls ``trainer.terminate()``."""
    best_score: float | None = None
    counter = 0
    for evaluation, score in enumerate(scores, start=1):
        if best_score is None:
            best_score = score
        elif score <= best_score + min_delta:
            if not cumulative_delta and score > best_score:
                best_score = score
            counter += 1
            if counter >= patience:
                return evaluation
        else:
            best_score = score
            counter = 0
    return None


def keras_stops_at(
    scores: Sequence[float], patience: int, min_delta: float, *, mode: str = "max",
    baseline: float | None = None, start_from_epoch: int = 0,
) -> int | None:
    """The evaluation (1-based) at which Keras' EarlyStopping sets ``stop_training``."""

    def is_improvement(current: float, reference: float) -> bool:  # Keras' _is_improvement
        if mode == "max":
            return current - abs(min_delta) > reference
        return current + abs(min_delta) < reference

    best = -math.inf if mode == "max" else math.inf
    wait = 0
    for epoch, current in enumerate(scores):
        if epoch < start_from_epoch:
            continue
        wait += 1
        if is_improvement(current, best):
            best = current
            if baseline is None or is_improvement(current, baseline):
                wait = 0
            continue
        if wait >= patience and epoch > 0:
            return epoch + 1
    return None


def evaluated_every(every: int, scores: Sequence[float]) -> list[dict[str, float | None]]:
    """A step script with an evaluation at steps every, 2*every, ... (``None`` between)."""
    script: list[dict[str, float | None]] = []
    for score in scores:
        script.extend({"score": None} for _ in range(every - 1))
        script.append({"score": score})
    return script


async def stopped_at_evaluation(hook: object, scores: Sequence[float], every: int) -> int | None:
    """The evaluation after whose step the hook stopped the session, or ``None``."""
    record = await drive(hook, evaluated_every(every, scores), fetches="score")
    if record.stop is None:
        assert record.steps == every * len(scores)
        return None
    assert record.steps % every == 0, "a stop must come at an evaluation's step"
    return record.steps // every


async def test_ignites_sequence_stops_at_the_seventh_evaluation_as_in_ignite() -> None:
    assert ignite_stops_at(IGNITE_SCORES, patience=2, min_delta=0.1, cumulative_delta=False) == 7
    hook = IgniteEarlyStopping("score", patience=2, min_delta=0.1)
    assert await stopped_at_evaluation(hook, IGNITE_SCORES, every=3) == 7
    assert hook.best_score == 3.6 and hook.counter == 2


async def test_the_built_in_hook_is_ignites_cumulative_delta_and_never_stops_there() -> None:
    """Only gains above min_delta move its best: Ignite's ``cumulative_delta=True``."""
    assert ignite_stops_at(IGNITE_SCORES, patience=2, min_delta=0.1, cumulative_delta=True) is None
    built_in = EarlyStoppingHook("score", "max", patience_steps=2 * 3, min_delta=0.1)
    assert await stopped_at_evaluation(built_in, IGNITE_SCORES, every=3) is None
    cumulative = IgniteEarlyStopping("score", patience=2, min_delta=0.1, cumulative_delta=True)
    assert await stopped_at_evaluation(cumulative, IGNITE_SCORES, every=3) is None


# Scores on a coarse grid, so that ties and gains of exactly min_delta are common.
scores_st = st.lists(st.integers(0, 12).map(lambda n: n / 4), min_size=1, max_size=12)


@settings(max_examples=75)  # each example drives a session: kept short for the suite
@given(
    scores=scores_st,
    patience=st.integers(1, 4),
    min_delta=st.sampled_from([0.0, 0.25, 0.5]),
    cumulative_delta=st.booleans(),
    every=st.integers(1, 3),
)
async def test_the_ignite_hook_stops_where_ignite_does(
    scores: list[float], patience: int, min_delta: float, cumulative_delta: bool, every: int
) -> None:
    hook = IgniteEarlyStopping("score", patience, min_delta, cumulative_delta)
    expected = ignite_stops_at(scores, patience, min_delta, cumulative_delta)
    assert await stopped_at_evaluation(hook, scores, every) == expected


@settings(max_examples=100)
@given(
    scores=scores_st,
    patience=st.integers(0, 4),
    min_delta=st.sampled_from([0.0, 0.25, 0.5]),
    mode=st.sampled_from(["min", "max"]),
    baseline=st.none() | st.integers(0, 12).map(lambda n: n / 4),
    start_from_epoch=st.integers(0, 3),
    every=st.integers(1, 3),
)
async def test_the_built_in_hook_with_patience_times_the_interval_stops_where_keras_does(
    scores: list[float], patience: int, min_delta: float, mode: Literal["min", "max"],
    baseline: float | None, start_from_epoch: int, every: int,
) -> None:
    """The porting page's mapping, start_from_epoch as min_steps=start_from_epoch * n + 1."""
    hook = EarlyStoppingHook(
        "score", mode, patience_steps=patience * every, min_delta=min_delta, baseline=baseline,
        min_steps=start_from_epoch * every + 1,
    )
    expected = keras_stops_at(
        scores, patience, min_delta, mode=mode, baseline=baseline, start_from_epoch=start_from_epoch
    )
    assert await stopped_at_evaluation(hook, scores, every) == expected


@pytest.mark.parametrize("every", [1, 3])
async def test_keras_patience_zero_stops_at_the_first_evaluation_without_improvement(every: int) -> None:
    """Keras' own case: losses 10, 9, 8, 9, 8.9 with patience 0 stop at the fourth evaluation."""
    losses = [10, 9, 8, 9, 8.9]
    assert keras_stops_at(losses, patience=0, min_delta=0, mode="min") == 4
    hook = EarlyStoppingHook("score", "min", patience_steps=0 * every)
    assert await stopped_at_evaluation(hook, losses, every) == 4
    assert (hook.best, hook.best_step) == (8, 3 * every)


@pytest.mark.parametrize("every", [1, 3])
async def test_keras_baseline_case_stops_after_five_evaluations_keeping_the_real_best(every: int) -> None:
    """Keras' own case: patience 5, baseline 0.5 on 0.9 ... 0.74 stops after 5, best 0.7 third."""
    losses = [0.9, 0.8, 0.7, 0.71, 0.72, 0.73, 0.74]
    assert keras_stops_at(losses, patience=5, min_delta=0, mode="min", baseline=0.5) == 5
    hook = EarlyStoppingHook("score", "min", patience_steps=5 * every, baseline=0.5)
    assert await stopped_at_evaluation(hook, losses, every) == 5
    assert (hook.best, hook.best_step) == (0.7, 3 * every)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"patience": 0}, r"patience must be an int >= 1, got 0"),
        ({"patience": 2.0}, r"patience must be an int >= 1, got 2\.0"),
        ({"patience": 2, "min_delta": -0.1}, r"min_delta must be a number >= 0, got -0\.1"),
    ],
)
def test_the_ignite_hook_checks_its_arguments(kwargs: dict[str, float], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        IgniteEarlyStopping("score", **kwargs)  # type: ignore[arg-type]
