"""MockClock, and the code that follows it: timers, built-in hooks, Coordinator.loop."""

from __future__ import annotations

import math

import anyio
import pytest

from hookrun import Coordinator, SecondOrStepTimer
from hookrun.hooks import on_after_run, stop_if_higher_hook
from hookrun.testing import MockClock, drive


class CountingClock(MockClock):
    """A MockClock that counts how often it is read: a poller would read it in a loop."""

    __slots__ = ("reads",)

    def __init__(self) -> None:
        super().__init__()
        self.reads = 0

    def __call__(self) -> float:
        self.reads += 1
        return super().__call__()


def test_reads_and_jumps() -> None:
    """Calling the clock returns the time; jump moves it on; it starts where told."""
    clock = MockClock(100.0)
    assert clock() == clock.now == 100.0
    clock.jump(2.5)
    clock.jump(0)
    assert clock() == 102.5
    assert "now=102.5" in repr(clock)


@pytest.mark.parametrize("bad", [-1, math.nan, math.inf, "5", True, None])
def test_jump_rejects_bad_seconds(bad: object) -> None:
    """A negative, non-finite or non-number jump is a ValueError naming the argument."""
    with pytest.raises(ValueError, match=r"MockClock\.jump\(seconds\)"):
        MockClock().jump(bad)  # type: ignore[arg-type]


def test_start_must_be_finite() -> None:
    """MockClock(start=nan) is refused."""
    with pytest.raises(ValueError, match=r"MockClock\(start=\.\.\.\) must be a finite number"):
        MockClock(math.nan)


@pytest.mark.anyio
async def test_sleepers_wake_when_due_and_in_order() -> None:
    """advance passes each deadline in turn: every sleeper wakes seeing its own deadline."""
    clock, woke = MockClock(), []

    async def sleeper(name: str, seconds: float) -> None:
        await clock.sleep(seconds)
        woke.append((name, clock()))

    with anyio.fail_after(5):
        async with anyio.create_task_group() as tg:
            for name, seconds in (("b", 20), ("a", 10), ("c", 30)):
                tg.start_soon(sleeper, name, seconds)
            await anyio.wait_all_tasks_blocked()
            assert clock.sleepers == 3 and clock.next_deadline() == 10
            await clock.advance(9.5)
            assert woke == []
            await clock.advance(15)
            assert woke == [("a", 10), ("b", 20)] and clock() == 24.5
            await clock.advance(10)
    assert woke[-1] == ("c", 30) and clock.sleepers == 0


@pytest.mark.anyio
async def test_jump_wakes_every_due_sleeper_at_the_new_time() -> None:
    """jump is instant: every sleeper due by then wakes, all seeing the new time."""
    clock, woke = MockClock(), []

    async def sleeper(seconds: float) -> None:
        await clock.sleep(seconds)
        woke.append(clock())

    with anyio.fail_after(5):
        async with anyio.create_task_group() as tg:
            for seconds in (10, 20, 30):
                tg.start_soon(sleeper, seconds)
            await anyio.wait_all_tasks_blocked()
            clock.jump(25)
            await anyio.wait_all_tasks_blocked()
            assert woke == [25, 25] and clock.sleepers == 1
            clock.jump(5)
    assert woke == [25, 25, 30]


@pytest.mark.anyio
async def test_past_deadline_returns_at_once() -> None:
    """sleep_until a time already reached returns (after a checkpoint) without a sleeper."""
    clock = MockClock(50)
    with anyio.fail_after(5):
        await clock.sleep_until(10)
        await clock.sleep(0)
    assert clock.sleepers == 0


@pytest.mark.anyio
async def test_cancelled_sleeper_is_forgotten() -> None:
    """A sleeper cancelled before its deadline leaves no trace; later sleepers still wake."""
    clock, woke = MockClock(), anyio.Event()

    async def later() -> None:
        await clock.sleep(20)
        woke.set()

    with anyio.fail_after(5):
        async with anyio.create_task_group() as tg:
            with anyio.CancelScope() as scope:
                tg.start_soon(later)
                scope.cancel()
                await clock.sleep(10)
            await anyio.wait_all_tasks_blocked()
            assert clock.sleepers == 1
            clock.jump(20)
            await woke.wait()
    assert clock.sleepers == 0


def test_timers_follow_the_clock() -> None:
    """SecondOrStepTimer with a MockClock fires once the clock passed the interval."""
    clock = MockClock()
    timer = SecondOrStepTimer(every_secs=60, clock=clock)
    timer.update_last_triggered_step(0)
    clock.jump(59)
    assert not timer.should_trigger_for_step(5)
    clock.jump(1)
    assert timer.should_trigger_for_step(6)


@pytest.mark.anyio
async def test_built_in_periods_follow_the_clock() -> None:
    """A stop_if_* check and an on_after_run function with a period run on the mock
    clock's time (steps end at t = 0, 25, 50, ...), not on real time."""
    clock, fired = MockClock(), []
    higher = stop_if_higher_hook("acc", 0.55, run_every_secs=60, clock=clock)
    every_minute = on_after_run(every_n_secs=60, clock=clock)(
        lambda ctx, values: fired.append(values.global_step)
    )
    acc = {"acc": lambda step, feed: step / 10}  # above 0.55 from script step 6
    record = await drive([higher, every_minute], steps=20, values=acc, clock=clock, tick=25)
    assert fired == [1, 4, 7]  # t = 0, 75, 150
    assert higher.stopped_at_step == 7 and record.steps == 7  # checked at t = 0, 75, 150


@pytest.mark.anyio
async def test_coordinator_loop_waits_on_the_clock_without_polling() -> None:
    """loop(60, clock=MockClock) calls at t=0, then only once jump() reaches 60, 120;
    in between nothing reads the clock (it does not poll)."""
    clock, calls = CountingClock(), []
    with anyio.fail_after(5):
        async with Coordinator() as coord:
            coord.loop(60, lambda: calls.append(clock()), clock=clock)
            await anyio.wait_all_tasks_blocked()
            assert calls == [0.0]
            reads = clock.reads
            for _ in range(10):
                await anyio.wait_all_tasks_blocked()
            assert clock.reads == reads
            await clock.advance(59)
            assert calls == [0.0]
            await clock.advance(1)
            assert calls == [0.0, 60.0]
            await clock.advance(150)  # time passes through 120 and 180 on the way to 210
            assert calls == [0.0, 60.0, 120.0, 180.0]
            clock.jump(150)  # a jump skips boundaries: they are caught up at once
            await anyio.wait_all_tasks_blocked()
            assert calls == [0.0, 60.0, 120.0, 180.0, 360.0, 360.0, 360.0]
            coord.request_stop()
    assert clock.sleepers == 0


@pytest.mark.anyio
async def test_coordinator_loop_stops_while_waiting_on_the_clock() -> None:
    """A stop request ends a loop parked on the clock at once, without a jump."""
    clock, calls = MockClock(), list[int]()
    with anyio.fail_after(5):
        async with Coordinator() as coord:
            coord.loop(60, calls.append, 1, clock=clock)
            await anyio.wait_all_tasks_blocked()
            coord.request_stop()
            await coord.join()
    assert calls == [1] and clock.sleepers == 0


@pytest.mark.anyio
async def test_coordinator_loop_with_a_plain_clock_uses_real_time() -> None:
    """A clock without sleep_until (here anyio's own) is slept on for the time left."""
    calls, twice = [], anyio.Event()

    def call() -> None:
        calls.append(1)
        if len(calls) == 2:
            twice.set()

    with anyio.fail_after(5):
        async with Coordinator() as coord:
            coord.loop(0.01, call, clock=anyio.current_time)
            await twice.wait()
            coord.request_stop()
    assert len(calls) >= 2


@pytest.mark.anyio
async def test_coordinator_loop_rejects_a_bad_clock() -> None:
    """loop(clock=...) must be callable."""
    async with Coordinator() as coord:
        with pytest.raises(TypeError, match=r"loop\(clock=\.\.\.\) must be a callable"):
            coord.loop(1, print, clock=5)  # type: ignore[arg-type]


def test_every_built_in_hook_with_a_period_takes_a_clock() -> None:
    """Every built-in hook (or hook factory) with a period in seconds accepts clock=."""
    import inspect

    import hookrun.hooks as hooks

    periodic = [
        name
        for name in hooks.__all__
        if name.endswith(("Hook", "_hook")) or name.startswith("on_")
        if any("sec" in parameter for parameter in inspect.signature(getattr(hooks, name)).parameters)
    ]
    assert len(periodic) >= 10, periodic
    missing = [name for name in periodic if "clock" not in inspect.signature(getattr(hooks, name)).parameters]
    assert missing == []
