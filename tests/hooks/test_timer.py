"""SecondOrStepTimer / NeverTriggerTimer (TF basic_session_run_hooks_test 102-106)."""

from __future__ import annotations

import anyio
import anyio.lowlevel
import pytest
from trio.testing import MockClock

from hookrun.hooks import NeverTriggerTimer, SecondOrStepTimer

from ._support import FakeClock


def test_raise_in_both_secs_and_steps() -> None:
    """Both intervals is a ValueError with TF's message."""
    with pytest.raises(ValueError, match=r"^Can not provide both every_secs and every_steps\.$"):
        SecondOrStepTimer(every_secs=2.0, every_steps=10)


def test_raise_in_none_secs_and_steps() -> None:
    """Neither interval is a ValueError with TF's message."""
    with pytest.raises(
        ValueError, match=r"^Either every_secs or every_steps should be provided\.$"
    ):
        SecondOrStepTimer()


def test_negative_intervals_are_rejected() -> None:
    """Negative intervals are rejected at construction."""
    with pytest.raises(ValueError, match="every_secs must be None or a number of seconds >= 0, got -1"):
        SecondOrStepTimer(every_secs=-1)
    with pytest.raises(ValueError, match="every_steps must be None or an int >= 0, got -1"):
        SecondOrStepTimer(every_steps=-1)


def test_every_secs() -> None:
    """First call fires; the same step never re-fires; another step fires once the interval passed."""
    clock = FakeClock()
    timer = SecondOrStepTimer(every_secs=1.0, clock=clock)
    assert timer.should_trigger_for_step(1)
    timer.update_last_triggered_step(1)
    assert not timer.should_trigger_for_step(1)
    assert not timer.should_trigger_for_step(2)
    clock.advance(1.0)
    assert not timer.should_trigger_for_step(1)
    assert timer.should_trigger_for_step(2)


def test_every_steps() -> None:
    """After firing at 1 with every 3 steps: 1, 2, 3 do not fire, 4 does."""
    timer = SecondOrStepTimer(every_steps=3, clock=FakeClock())
    assert timer.should_trigger_for_step(1)
    timer.update_last_triggered_step(1)
    assert [timer.should_trigger_for_step(s) for s in (1, 2, 3, 4)] == [False, False, False, True]


def test_should_trigger_after_a_trigger_still_to_be_recorded() -> None:
    """should_trigger_after(pending, step): a step timer counts from pending, a seconds one waits."""
    steps = SecondOrStepTimer(every_steps=3, clock=FakeClock())
    assert [steps.should_trigger_after(4, s) for s in (4, 5, 6, 7, 8)] == [False, False, False, True, True]
    seconds = SecondOrStepTimer(every_secs=1.0, clock=FakeClock())
    assert not seconds.should_trigger_after(4, 100)
    assert not NeverTriggerTimer().should_trigger_after(4, 100)


def test_update_last_triggered_step() -> None:
    """The first update returns (None, None); later ones the seconds and steps since the last."""
    clock = FakeClock()
    timer = SecondOrStepTimer(every_steps=1, clock=clock)
    assert timer.update_last_triggered_step(1) == (None, None)
    clock.advance(2.5)
    assert timer.update_last_triggered_step(5) == (2.5, 4)
    assert timer.last_triggered_step() == 5


def test_reset_forgets_the_last_trigger() -> None:
    """After reset the timer fires again at once and reports no last step."""
    timer = SecondOrStepTimer(every_steps=100, clock=FakeClock())
    timer.update_last_triggered_step(3)
    timer.reset()
    assert timer.last_triggered_step() is None
    assert timer.should_trigger_for_step(4)


def test_never_trigger_timer() -> None:
    """NeverTriggerTimer never fires and its update returns (None, None)."""
    timer = NeverTriggerTimer()
    assert not timer.should_trigger_for_step(0)
    assert timer.update_last_triggered_step(5) == (None, None)
    assert timer.last_triggered_step() is None
    timer.reset()


def test_default_clock_is_anyio_time_so_trio_mock_clock_drives_it() -> None:
    """Without a clock the timer reads anyio.current_time(): trio's MockClock moves it."""
    clock = MockClock()

    async def main() -> list[bool]:
        timer = SecondOrStepTimer(every_secs=60.0)
        timer.update_last_triggered_step(0)
        before = timer.should_trigger_for_step(1)
        clock.jump(60.0)
        return [before, timer.should_trigger_for_step(1)]

    assert anyio.run(main, backend="trio", backend_options={"clock": clock}) == [False, True]


@pytest.mark.anyio
async def test_default_clock_works_on_both_backends() -> None:
    """The default clock is usable inside any running backend."""
    timer = SecondOrStepTimer(every_secs=3600.0)
    assert timer.should_trigger_for_step(0)
    assert timer.update_last_triggered_step(0) == (None, None)
    assert not timer.should_trigger_for_step(1)


def test_step_timer_works_outside_an_event_loop() -> None:
    """A step-based timer with the default clock decides on steps alone: no event loop needed."""
    timer = SecondOrStepTimer(every_steps=2)
    assert timer.update_last_triggered_step(1) == (None, None)
    assert not timer.should_trigger_for_step(2)
    assert timer.should_trigger_for_step(3)
    # No clock to read: the steps are still counted, the seconds are unknown.
    assert timer.update_last_triggered_step(3) == (None, 2)
    assert timer.last_triggered_step() == 3


def test_seconds_timer_outside_an_event_loop_still_needs_the_clock() -> None:
    """Seconds need a clock: the default one outside an event loop is an error, not a guess."""
    timer = SecondOrStepTimer(every_secs=1.0)
    assert timer.should_trigger_for_step(0)  # the first question needs no clock
    with pytest.raises(RuntimeError):
        timer.update_last_triggered_step(0)


def test_step_timer_never_reads_the_clock_to_decide() -> None:
    """should_trigger_for_step of a step timer does not call the clock; the report does."""
    reads: list[float] = []

    def clock() -> float:
        reads.append(1.0)
        return 10.0 * len(reads)

    timer = SecondOrStepTimer(every_steps=2, clock=clock)
    timer.update_last_triggered_step(0)
    assert len(reads) == 1
    for step in range(5):
        timer.should_trigger_for_step(step)
    assert len(reads) == 1
    assert timer.update_last_triggered_step(2) == (10.0, 2)


@pytest.mark.anyio
async def test_step_timer_measures_seconds_inside_an_event_loop() -> None:
    """With a running loop the default clock is read: StepCounterHook's rate needs it."""
    timer = SecondOrStepTimer(every_steps=1)
    timer.update_last_triggered_step(0)
    await anyio.lowlevel.checkpoint()
    elapsed_secs, elapsed_steps = timer.update_last_triggered_step(1)
    assert elapsed_steps == 1
    assert elapsed_secs is not None and elapsed_secs >= 0
