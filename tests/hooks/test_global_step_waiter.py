"""GlobalStepWaiterHook (TF basic_session_run_hooks_test 157-158): awaits the counter, never
polls; driven with hookrun.testing."""

from __future__ import annotations

import logging
from typing import Any

import anyio
import pytest

from hookrun import LocalStepCounter, SessionRunArgs, SessionRunContext
from hookrun.hooks import GlobalStepWaiterHook, StopAtStepHook, on_after_run
from hookrun.testing import Drive, Record, drive

pytestmark = pytest.mark.anyio


class CountingCounter(LocalStepCounter):
    """Counts how often the hook asks: a polling hook would call get() or wait_for() in a loop."""

    def __init__(self, initial: int = 0) -> None:
        super().__init__(initial)
        self.waits = 0
        self.gets = 0

    async def get(self) -> int:
        self.gets += 1
        return await super().get()

    async def wait_for(self, target: int) -> int:
        self.waits += 1
        return await super().wait_for(target)


def test_wait_until_step_must_be_an_int() -> None:
    """A non-int target is a TypeError at construction."""
    with pytest.raises(TypeError, match="wait_until_step must be an int"):
        GlobalStepWaiterHook("10")  # type: ignore[arg-type]


@pytest.mark.parametrize("target", [True, 2.0])
def test_wait_until_step_refuses_a_bool_or_a_float(target: object) -> None:
    """A bool or a float is a TypeError naming the argument."""
    with pytest.raises(TypeError, match=rf"GlobalStepWaiterHook: wait_until_step must be an int, got {target!r}"):
        GlobalStepWaiterHook(target)  # type: ignore[arg-type]


async def test_a_negative_target_never_waits(drive: Drive) -> None:
    """Target -3 (a worker index times a delay, after an offset) is accepted and runs at once."""
    counter = CountingCounter()
    record = await drive(GlobalStepWaiterHook(-3), steps=2, step_counter=counter)
    assert record.steps == 2 and counter.waits == 0


async def test_not_wait_for_step_zero(drive: Drive) -> None:
    """Target 0 runs at once, without waiting on the counter."""
    counter = CountingCounter()
    record = await drive(GlobalStepWaiterHook(0), steps=2, step_counter=counter)
    assert record.steps == 2 and counter.waits == 0


async def test_wait_for_step(caplog: pytest.LogCaptureFixture) -> None:
    """The first step waits until another worker moves the shared counter to the target,
    without polling."""
    counter, hook, done = CountingCounter(), GlobalStepWaiterHook(1000), anyio.Event()
    records: list[Record] = []

    async def worker() -> None:
        records.append(await drive(hook, steps=1, step_counter=counter))
        done.set()

    with caplog.at_level(logging.INFO, logger="hookrun"), anyio.fail_after(5):
        async with anyio.create_task_group() as tg:
            tg.start_soon(worker)
            await anyio.wait_all_tasks_blocked()
            await counter.set(500)
            await anyio.wait_all_tasks_blocked()
            assert not done.is_set() and records == []
            await counter.set(1000)
    assert records[0].steps == 1 and counter.value == 1001
    assert counter.waits == 1 and counter.gets == 1  # the session reads the step once; the hook never
    assert "Waiting for global step 1000 before starting training." in caplog.text


async def test_progress_is_logged_every_thousand_steps(caplog: pytest.LogCaptureFixture) -> None:
    """While waiting for a far target the current step is logged every 1000 steps."""
    counter = LocalStepCounter()
    with caplog.at_level(logging.INFO, logger="hookrun"), anyio.fail_after(5):
        async with anyio.create_task_group() as tg:
            tg.start_soon(lambda: drive(GlobalStepWaiterHook(2500), steps=1, step_counter=counter))
            for value in (1200, 2600):
                await anyio.wait_all_tasks_blocked()
                await counter.set(value)
    assert "Current step is 1200." in caplog.text


async def test_released_hook_never_waits_again(drive: Drive) -> None:
    """Once released the hook never waits again, even if the counter is reset below the target."""
    counter = LocalStepCounter(5)

    @on_after_run
    async def reset(ctx: SessionRunContext, values: Any) -> None:
        await counter.set(0)

    record = await drive([GlobalStepWaiterHook(3), reset], steps=3, step_counter=counter, timeout=5)
    assert record.steps == 3 and [call.step for call in record.of(reset)] == [5, 0, 0]


async def test_released_hook_stays_released_after_recovery(drive: Drive) -> None:
    """A recovery re-creates the session, not the hook's state: no second wait."""
    counter = CountingCounter(5)
    record = await drive(GlobalStepWaiterHook(3), steps=3, errors={1: "aborted"}, step_counter=counter)
    assert record.sessions == 2 and record.steps == 3 and counter.waits == 0


async def test_without_a_step_counter_waiting_is_an_error() -> None:
    """A coordinator without a step counter makes waiting a clear RuntimeError."""
    hook = GlobalStepWaiterHook(3)
    await hook.after_create_session(None, object())
    with pytest.raises(RuntimeError, match="needs the step counter"):
        await hook.before_run(SessionRunContext(SessionRunArgs(), None, global_step=0))


async def test_two_workers_share_a_counter() -> None:
    """A worker waiting for step 3 starts only once the other worker's runs reached it."""
    shared, order = LocalStepCounter(), list[str]()

    def step(name: str) -> Any:
        def produce(index: int, feed: object) -> dict[str, int]:
            order.append(name)
            return {}

        return produce

    with anyio.fail_after(10):
        async with anyio.create_task_group() as tg:
            late = [GlobalStepWaiterHook(3), StopAtStepHook(last_step=5)]
            tg.start_soon(lambda: drive(late, steps=[step("late")] * 10, step_counter=shared))
            await anyio.wait_all_tasks_blocked()
            early = StopAtStepHook(last_step=3)
            await drive(early, steps=[step("early")] * 10, step_counter=shared)
    assert order[:3] == ["early"] * 3
    assert order.count("late") == 2
