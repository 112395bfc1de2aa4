"""Composable triggers: every, at_step, when, | and &."""

from __future__ import annotations

import pytest

from hookrun.hooks import Trigger, at_step, every, when


def fire_steps(trigger: Trigger, steps: range, secs_per_step: float = 0.0) -> list[int]:
    """Ask at each step (time advancing), mark when it fires; return the firing steps."""
    fired = []
    for step in steps:
        now = step * secs_per_step
        if trigger.should_fire(step, now):
            trigger.fired(step, now)
            fired.append(step)
    return fired


def test_every_steps_fires_first_then_periodically() -> None:
    """every(steps=3) fires at the first step and every 3rd after."""
    assert fire_steps(every(steps=3), range(1, 11)) == [1, 4, 7, 10]


def test_every_seconds() -> None:
    """every(seconds=5) with 2 s steps fires at 0, 6, 12 seconds."""
    assert fire_steps(every(seconds=5), range(0, 8), secs_per_step=2.0) == [0, 3, 6]


def test_never_twice_for_one_step() -> None:
    """A trigger never fires twice for the same step."""
    trigger = every(seconds=1)
    trigger.fired(4, 0.0)
    assert not trigger.should_fire(4, 100.0)


def test_either_restarts_both_periods() -> None:
    """every(steps=4) | every(seconds=5): whichever comes first; firing restarts both."""
    trigger = every(steps=4) | every(seconds=5)
    assert fire_steps(trigger, range(0, 13), secs_per_step=2.0) == [0, 3, 6, 9, 12]
    assert "every(steps=4) | every(seconds=5)" in repr(trigger)


def test_both_must_agree() -> None:
    """every(steps=2) & when(odd): fires only on steps both accept."""
    trigger = every(steps=2) & when(lambda s: s % 3 == 0)
    assert fire_steps(trigger, range(1, 13)) == [3, 6, 9, 12]


def test_at_step_fires_once() -> None:
    """at_step(5) fires once, at the first step >= 5; reset re-arms it."""
    trigger = at_step(5)
    assert fire_steps(trigger, range(0, 10)) == [5]
    trigger.reset()
    assert fire_steps(trigger, range(7, 9)) == [7]


def test_reset_every() -> None:
    """reset makes every() fire at once again."""
    trigger = every(steps=100)
    trigger.fired(1, 0.0)
    trigger.reset()
    assert trigger.should_fire(2, 0.0)


def test_validation() -> None:
    """Bad arguments are rejected with messages that say what to do."""
    with pytest.raises(ValueError, match="needs steps"):
        every()
    with pytest.raises(ValueError, match=r"compose them: every\(steps=\.\.\.\) \| every"):
        every(steps=1, seconds=1)
    with pytest.raises(ValueError, match=r"every\(steps=\.\.\.\) must be None or an int >= 1, got 0"):
        every(steps=0)
    with pytest.raises(ValueError, match=r"every\(seconds=\.\.\.\) must be None or a number of seconds > 0, got 0"):
        every(seconds=0)
    with pytest.raises(TypeError, match=r"at_step\(step\) must be an int"):
        at_step(1.5)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"when\(predicate\) must be callable, got 3"):
        when(3)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="compose only with triggers"):
        every(steps=1) | 3  # type: ignore[operator]
