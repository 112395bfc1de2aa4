"""SharedStep, the actor behind every engine's shared counter, run here without an engine."""

from __future__ import annotations

import anyio
import pytest

from hookrun.remote._shared_step import REMEMBERED, SharedStep

pytestmark = pytest.mark.anyio


async def test_get_increment_set() -> None:
    """The value starts where it was built, increments by n and can be set (set returns it)."""
    step = SharedStep(5)
    assert await step.get() == 5
    assert await step.increment(1) == 6
    assert await step.increment(4) == 10
    assert await step.set(2) == 2
    assert await step.get() == 2


async def test_lift_only_raises_the_value_and_wakes_the_waiters_it_satisfies() -> None:
    """lift(floor) raises a lower value to floor (waking a waiter), and leaves a higher one."""
    step = SharedStep(5)
    woken: list[int] = []
    with anyio.fail_after(5):
        async with anyio.create_task_group() as tg:

            async def wait() -> None:
                woken.append(await step.wait_until(20))

            tg.start_soon(wait)
            await anyio.wait_all_tasks_blocked()
            assert await step.lift(20) == 20
        assert await step.lift(3) == 20
    assert woken == [20]


async def test_an_increment_key_is_applied_once_while_remembered() -> None:
    """A repeated key answers what its first increment reached; the oldest keys are forgotten."""
    step = SharedStep(0)
    assert await step.increment(2, "a") == 2
    assert await step.increment(3, "b") == 5
    assert await step.increment(2, "a") == 2
    for i in range(REMEMBERED):
        await step.increment(1, str(i))
    assert await step.increment(2, "a") == 5 + REMEMBERED + 2


async def test_a_reached_target_returns_at_once() -> None:
    """wait_until of a target already reached returns the value without parking."""
    step = SharedStep(5)
    with anyio.fail_after(5):
        assert await step.wait_until(3) == 5
        assert await step.wait_until(5, token=1) == 5
    assert repr(step) == "SharedStep(5, waiters=0)"


async def test_waiters_wake_in_order_of_target_with_the_value_that_reached_it() -> None:
    """Each change wakes exactly the waiters it satisfies, each with the value at that change."""
    step = SharedStep(0)
    woken: list[tuple[int, int]] = []

    async def wait(target: int) -> None:
        woken.append((target, await step.wait_until(target)))

    with anyio.fail_after(5):
        async with anyio.create_task_group() as tg:
            for target in (7, 3, 5, 20):
                tg.start_soon(wait, target)
            await anyio.wait_all_tasks_blocked()
            await step.increment(2)  # reaches nobody
            await anyio.wait_all_tasks_blocked()
            assert woken == []
            await step.increment(4)  # 6: wakes 3 and 5
            await anyio.wait_all_tasks_blocked()
            assert sorted(woken) == [(3, 6), (5, 6)]
            await step.set(1)  # lower: wakes nobody
            await anyio.wait_all_tasks_blocked()
            await step.set(8)  # wakes 7
            await anyio.wait_all_tasks_blocked()
            assert sorted(woken)[-1] == (7, 8) and len(woken) == 3
            await step.increment(100)
    assert sorted(woken) == [(3, 6), (5, 6), (7, 8), (20, 108)]
    assert repr(step) == "SharedStep(108, waiters=0)"


async def test_a_cancelled_wait_leaves_no_waiter_and_others_still_wake() -> None:
    """An engine cancelling a parked call removes its waiter; the remaining ones wake as before."""
    step = SharedStep(0)
    woken: list[int] = []
    with anyio.fail_after(5):
        async with anyio.create_task_group() as tg:
            scope = anyio.CancelScope()
            tg.start_soon(_cancellable, step, scope)

            async def wait() -> None:
                woken.append(await step.wait_until(2, token=7))

            tg.start_soon(wait)
            await anyio.wait_all_tasks_blocked()
            assert repr(step) == "SharedStep(0, waiters=2)"
            scope.cancel()
            await anyio.wait_all_tasks_blocked()
            assert repr(step) == "SharedStep(0, waiters=1)"
            await step.increment(2)
    assert woken == [2]
    assert repr(step) == "SharedStep(2, waiters=0)"


async def _cancellable(step: SharedStep, scope: anyio.CancelScope) -> None:
    with scope:
        await step.wait_until(10**9, token=3)


async def test_forget_withdraws_the_waiter_of_its_token() -> None:
    """forget(token) ends that wait at once with the value as it is; others stay parked."""
    step = SharedStep(1)
    results: dict[int, int] = {}

    async def wait(token: int, target: int) -> None:
        results[token] = await step.wait_until(target, token=token)

    with anyio.fail_after(5):
        async with anyio.create_task_group() as tg:
            tg.start_soon(wait, 1, 50)
            tg.start_soon(wait, 2, 60)
            await anyio.wait_all_tasks_blocked()
            await step.forget(1)
            await step.forget(99)  # unknown (or already gone): nothing
            await anyio.wait_all_tasks_blocked()
            assert results == {1: 1}
            assert repr(step) == "SharedStep(1, waiters=1)"
            await step.forget(1)  # twice: nothing
            await step.increment(59)
    assert results == {1: 1, 2: 60}
    assert repr(step) == "SharedStep(60, waiters=0)"
