"""GlobalStepWaiterHook (TF basic_session_run_hooks_test 157-158): awaits the counter, never polls."""

from __future__ import annotations

import logging
from collections.abc import Callable

import anyio
import pytest

from hookrun import LocalStepCounter
from hookrun.hooks import GlobalStepWaiterHook

from ._support import context


class Coord:
    def __init__(self, counter: LocalStepCounter) -> None:
        self.step_counter = counter


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


@pytest.mark.anyio
async def test_not_wait_for_step_zero() -> None:
    """Target 0 returns at once, without touching the counter."""
    counter = CountingCounter()
    hook = GlobalStepWaiterHook(0)
    await hook.begin()
    await hook.after_create_session(None, Coord(counter))
    with anyio.fail_after(1):
        await hook.before_run(context(0))
    assert counter.waits == 0


@pytest.mark.anyio
async def test_wait_for_step(caplog: pytest.LogCaptureFixture) -> None:
    """Waits until another worker moves the shared counter to the target, without polling."""
    counter = CountingCounter()
    hook = GlobalStepWaiterHook(1000)
    await hook.begin()
    await hook.after_create_session(None, Coord(counter))
    released = anyio.Event()

    async def worker() -> None:
        await hook.before_run(context(0))
        released.set()

    with caplog.at_level(logging.INFO, logger="hookrun"), anyio.fail_after(5):
        async with anyio.create_task_group() as tg:
            tg.start_soon(worker)
            await anyio.wait_all_tasks_blocked()
            await counter.set(500)
            await anyio.wait_all_tasks_blocked()
            assert not released.is_set()
            await counter.set(1000)
    assert released.is_set()
    assert counter.waits == 1 and counter.gets == 0
    assert "Waiting for global step 1000 before starting training." in caplog.text


@pytest.mark.anyio
async def test_progress_is_logged_every_thousand_steps(caplog: pytest.LogCaptureFixture) -> None:
    """While waiting for a far target the current step is logged every 1000 steps."""
    counter = LocalStepCounter()
    hook = GlobalStepWaiterHook(2500)
    await hook.after_create_session(None, Coord(counter))
    with caplog.at_level(logging.INFO, logger="hookrun"), anyio.fail_after(5):
        async with anyio.create_task_group() as tg:
            tg.start_soon(hook.before_run, context(0))
            for value in (1200, 2600):
                await anyio.wait_all_tasks_blocked()
                await counter.set(value)
    assert "Current step is 1200." in caplog.text


@pytest.mark.anyio
async def test_released_hook_never_waits_again() -> None:
    """Once released the hook never waits again, even if the counter is reset."""
    counter = LocalStepCounter(5)
    hook = GlobalStepWaiterHook(3)
    await hook.after_create_session(None, Coord(counter))
    await hook.before_run(context(5))
    await counter.set(0)
    with anyio.fail_after(1):
        await hook.before_run(context(0))


@pytest.mark.anyio
async def test_without_a_step_counter_waiting_is_an_error() -> None:
    """A coordinator without a step counter makes waiting a clear RuntimeError."""
    hook = GlobalStepWaiterHook(3)
    await hook.after_create_session(None, object())
    with pytest.raises(RuntimeError, match="needs the step counter"):
        await hook.before_run(context(0))


@pytest.mark.anyio
async def test_two_workers_share_a_counter(session_kind: str) -> None:
    """A worker waiting for step 3 starts only once the other worker's runs reached it."""
    from hookrun.hooks import StopAtStepHook

    from ._support import drive

    shared = LocalStepCounter()
    order: list[str] = []

    def produce(name: str) -> Callable[[int], dict[str, int]]:
        def step(i: int) -> dict[str, int]:
            order.append(name)
            return {}

        return step

    async with anyio.create_task_group() as tg:
        tg.start_soon(
            lambda: drive(
                [GlobalStepWaiterHook(3), StopAtStepHook(last_step=5)],
                produce("late"),
                kind=session_kind,
                step_counter=shared,
            )
        )
        await anyio.wait_all_tasks_blocked()
        await drive(
            [StopAtStepHook(last_step=3)], produce("early"), kind=session_kind, step_counter=shared
        )
    assert order[:3] == ["early"] * 3
    assert order.count("late") == 2
