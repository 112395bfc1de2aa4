"""TensorFlow's early-stopping factories ``stop_if_higher_hook``, ``stop_if_lower_hook``,
``stop_if_no_increase_hook`` and ``stop_if_no_decrease_hook``, on fetched values.

Each builds a hook of ``_early_stopping.py``; the ``stop_if_no_*`` ones walk the
evaluations as TensorFlow does (``_NoImprovementHook``), which differs from
``EarlyStoppingHook``'s Keras rule only in where the wait starts (the first
evaluation) and in a patience of 0 (stopping at the first evaluation).
"""

from __future__ import annotations

from collections.abc import Hashable
from typing import TypedDict

from .._timer import Clock
from .._validate import check_int
from ._common import check_timer_args
from ._early_stopping import EarlyStoppingHook, ThresholdStoppingHook

__all__ = [
    "stop_if_higher_hook",
    "stop_if_lower_hook",
    "stop_if_no_decrease_hook",
    "stop_if_no_increase_hook",
]


class _NoImprovementHook(EarlyStoppingHook):
    """TensorFlow's ``stop_if_no_*_hook`` walk over the evaluations: the wait starts at the
    first evaluation, and ``max_steps_without_*=0`` stops at the first evaluation."""

    _tf_walk = True


class _Schedule(TypedDict):
    """What every factory hands on to its hook as it got it."""

    min_steps: int
    run_every_secs: float | None
    run_every_steps: int | None
    clock: Clock | None


def _schedule(
    owner: str, min_steps: int, run_every_secs: float | None, run_every_steps: int | None, clock: Clock | None
) -> _Schedule:
    """A factory's schedule arguments, checked under the factory's name ``owner``."""
    check_int(f"{owner}: min_steps", min_steps)
    check_timer_args(owner, "run_every_secs", run_every_secs, "run_every_steps", run_every_steps)
    return _Schedule(min_steps=min_steps, run_every_secs=run_every_secs, run_every_steps=run_every_steps, clock=clock)


def stop_if_higher_hook(
    metric_key: Hashable,
    threshold: float,
    *,
    min_steps: int = 0,
    run_every_secs: float | None = None,
    run_every_steps: int | None = None,
    clock: Clock | None = None,
) -> ThresholdStoppingHook:
    """A hook that stops once ``metric_key`` is strictly above ``threshold`` (TensorFlow's).

    ``clock`` (keyword-only) replaces :func:`anyio.current_time` for ``run_every_secs``.

    Args:
        metric_key: The fetch key of the evaluated metric.
        threshold: The value it must pass.
        min_steps: The first step whose evaluation counts.
        run_every_secs: Evaluate at most once every this many seconds.
        run_every_steps: Evaluate every this many steps (at most one of the two; neither:
            every step).
        clock: A function of no arguments returning seconds. ``None``:
            ``anyio.current_time``.
    """
    schedule = _schedule("stop_if_higher_hook", min_steps, run_every_secs, run_every_steps, clock)
    return ThresholdStoppingHook(metric_key, threshold, higher=True, **schedule)


def stop_if_lower_hook(
    metric_key: Hashable,
    threshold: float,
    *,
    min_steps: int = 0,
    run_every_secs: float | None = None,
    run_every_steps: int | None = None,
    clock: Clock | None = None,
) -> ThresholdStoppingHook:
    """A hook that stops once ``metric_key`` is strictly below ``threshold`` (TensorFlow's).

    ``clock`` (keyword-only) replaces :func:`anyio.current_time` for ``run_every_secs``.

    Args:
        metric_key: The fetch key of the evaluated metric.
        threshold: The value it must pass.
        min_steps: The first step whose evaluation counts.
        run_every_secs: Evaluate at most once every this many seconds.
        run_every_steps: Evaluate every this many steps (at most one of the two; neither:
            every step).
        clock: A function of no arguments returning seconds. ``None``:
            ``anyio.current_time``.
    """
    schedule = _schedule("stop_if_lower_hook", min_steps, run_every_secs, run_every_steps, clock)
    return ThresholdStoppingHook(metric_key, threshold, higher=False, **schedule)


def stop_if_no_increase_hook(
    metric_key: Hashable,
    max_steps_without_increase: int,
    *,
    min_steps: int = 0,
    run_every_secs: float | None = None,
    run_every_steps: int | None = None,
    clock: Clock | None = None,
) -> EarlyStoppingHook:
    """A hook that stops when ``metric_key`` has not increased for that many steps (TensorFlow's).

    ``clock`` (keyword-only) replaces :func:`anyio.current_time` for ``run_every_secs``.

    Args:
        metric_key: The fetch key of the evaluated metric.
        max_steps_without_increase: Global steps without an increase after which it stops.
        min_steps: The first step whose evaluation counts.
        run_every_secs: Evaluate at most once every this many seconds.
        run_every_steps: Evaluate every this many steps (at most one of the two; neither:
            every step).
        clock: A function of no arguments returning seconds. ``None``:
            ``anyio.current_time``.
    """
    check_int("stop_if_no_increase_hook: max_steps_without_increase", max_steps_without_increase)
    schedule = _schedule("stop_if_no_increase_hook", min_steps, run_every_secs, run_every_steps, clock)
    return _NoImprovementHook(metric_key, "max", patience_steps=max_steps_without_increase, **schedule)


def stop_if_no_decrease_hook(
    metric_key: Hashable,
    max_steps_without_decrease: int,
    *,
    min_steps: int = 0,
    run_every_secs: float | None = None,
    run_every_steps: int | None = None,
    clock: Clock | None = None,
) -> EarlyStoppingHook:
    """A hook that stops when ``metric_key`` has not decreased for that many steps (TensorFlow's).

    ``clock`` (keyword-only) replaces :func:`anyio.current_time` for ``run_every_secs``.

    Args:
        metric_key: The fetch key of the evaluated metric.
        max_steps_without_decrease: Global steps without a decrease after which it stops.
        min_steps: The first step whose evaluation counts.
        run_every_secs: Evaluate at most once every this many seconds.
        run_every_steps: Evaluate every this many steps (at most one of the two; neither:
            every step).
        clock: A function of no arguments returning seconds. ``None``:
            ``anyio.current_time``.
    """
    check_int("stop_if_no_decrease_hook: max_steps_without_decrease", max_steps_without_decrease)
    schedule = _schedule("stop_if_no_decrease_hook", min_steps, run_every_secs, run_every_steps, clock)
    return _NoImprovementHook(metric_key, "min", patience_steps=max_steps_without_decrease, **schedule)
