"""The built-in checkpointable objects: what their state holds and how it comes back."""

from __future__ import annotations

from typing import Any

import pytest

import hookrun
from hookrun import SecondOrStepTimer
from hookrun.hooks import EarlyStoppingHook, StopAtStepHook, ThresholdStoppingHook

from ..hooks._support import FakeClock, context, values

pytestmark = pytest.mark.anyio


def test_builtins_satisfy_the_protocol() -> None:
    """The stopping hooks and the timer are Checkpointable."""
    for obj in (StopAtStepHook(last_step=3), EarlyStoppingHook("m", patience_steps=1),
                ThresholdStoppingHook("m", 1.0), SecondOrStepTimer(every_steps=2)):
        assert isinstance(obj, hookrun.Checkpointable), obj


def test_timer_state_round_trips_its_last_step() -> None:
    """A restored step timer fires relative to the saved last step."""
    timer = SecondOrStepTimer(every_steps=5, clock=FakeClock())
    timer.update_last_triggered_step(10)
    again = SecondOrStepTimer(every_steps=5, clock=FakeClock())
    again.load_state_dict(timer.state_dict())
    assert again.last_triggered_step() == 10
    assert not again.should_trigger_for_step(14)
    assert again.should_trigger_for_step(15)


def test_timer_seconds_restart_at_the_restore() -> None:
    """For a time-based timer the interval starts again when the state is loaded."""
    clock = FakeClock()
    timer = SecondOrStepTimer(every_secs=10, clock=clock)
    timer.load_state_dict({"last_triggered_step": 4})
    clock.advance(9)
    assert not timer.should_trigger_for_step(5)
    clock.advance(1)
    assert timer.should_trigger_for_step(5)


def test_timer_state_is_checked() -> None:
    """A malformed timer state is a ValueError naming the field."""
    with pytest.raises(ValueError, match="last_triggered_step must be an int or None"):
        SecondOrStepTimer(every_steps=1, clock=FakeClock()).load_state_dict({"last_triggered_step": "x"})
    timer = SecondOrStepTimer(every_steps=1, clock=FakeClock())
    timer.update_last_triggered_step(3)
    timer.load_state_dict({"last_triggered_step": None})
    assert timer.last_triggered_step() is None


def test_stop_at_step_keeps_its_target_only_for_the_same_num_steps() -> None:
    """A saved last_step is adopted when num_steps is unchanged, ignored otherwise."""
    first = StopAtStepHook(num_steps=10)
    first.load_state_dict({"num_steps": 10, "last_step": 14})
    assert first.last_step == 14
    changed = StopAtStepHook(num_steps=5)
    changed.load_state_dict({"num_steps": 10, "last_step": 14})
    assert changed.last_step is None
    fixed = StopAtStepHook(last_step=3)
    fixed.load_state_dict({"num_steps": None, "last_step": 99})
    assert fixed.last_step == 3


async def test_threshold_decision_survives_a_restart() -> None:
    """A ThresholdStoppingHook that decided to stop still stops after a restore."""
    hook = ThresholdStoppingHook("m", 1.0, run_every_steps=100)
    ctx = context(0)
    hook.after_run(ctx, values(1, 0.5))  # first run: checks, not over the threshold
    hook.after_run(ctx, values(2, 2.0))  # over the threshold, but the check is not due
    assert not ctx.stop_requested
    again = ThresholdStoppingHook("m", 1.0, run_every_steps=100)
    again.load_state_dict(hook.state_dict())
    ctx2 = context(2)
    again.after_run(ctx2, values(101, None))
    assert ctx2.stop_requested


async def test_early_stopping_wait_count_goes_on_from_the_restored_best() -> None:
    """EarlyStoppingHook restored from a state stops patience_steps after the saved best."""
    hook = EarlyStoppingHook("loss", patience_steps=5)
    ctx = context(0)
    hook.after_run(ctx, values(1, 1.0))
    hook.after_run(ctx, values(3, 2.0))
    state: dict[str, Any] = hook.state_dict()
    assert (state["best"], state["best_step"]) == (1.0, 1)
    again = EarlyStoppingHook("loss", patience_steps=5)
    again.load_state_dict(state)  # the timer restarts from anyio's clock: needs the loop
    ctx2 = context(3)
    again.after_run(ctx2, values(5, 3.0))
    assert not ctx2.stop_requested
    again.after_run(ctx2, values(6, 3.0))
    assert ctx2.stop_requested
