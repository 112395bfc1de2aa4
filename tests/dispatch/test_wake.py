"""The one-shot wake-ups that park pooled workers and the caller of a phase (``_wake.py``)."""

from __future__ import annotations

import anyio
import anyio.lowlevel
import pytest

from hookrun._dispatch._wake import Wakers, waker_factory

pytestmark = pytest.mark.anyio


async def test_the_backends_own_primitive_is_used() -> None:
    new_waker = waker_factory()
    assert new_waker is not anyio.Event
    assert "Waker" in new_waker.__name__


async def test_wakers_made_before_the_loop_give_the_running_backends_wake_ups() -> None:
    """``Wakers`` looks the backend up at its first call, inside the loop, and keeps it."""
    wakers = Wakers()  # as an object made outside the loop holds it
    first, second = wakers(), wakers()
    assert type(first) is type(second)  # one lookup
    assert type(first).__name__ == waker_factory().__name__  # the backend's own, not anyio.Event
    assert "Waker" in type(first).__name__
    first.set()
    await first.wait()  # set first: through at once


async def test_set_wakes_the_waiting_task() -> None:
    waker = waker_factory()()
    woken: list[str] = []

    async def waiter() -> None:
        await waker.wait()
        woken.append("woken")

    with anyio.fail_after(5):
        async with anyio.create_task_group() as tg:
            tg.start_soon(waiter)
            for _ in range(3):
                await anyio.lowlevel.checkpoint()
            assert woken == []  # parked until set
            waker.set()
            waker.set()  # a second set does nothing
    assert woken == ["woken"]


async def test_wait_after_set_returns_without_parking() -> None:
    waker = waker_factory()()
    waker.set()
    with anyio.fail_after(5):
        await waker.wait()
        await waker.wait()


async def test_a_cancelled_wait_raises_and_a_later_set_is_harmless() -> None:
    waker = waker_factory()()
    with anyio.fail_after(5):
        with anyio.move_on_after(0.01) as scope:
            await waker.wait()
        assert scope.cancelled_caught
        waker.set()  # must not wake (or corrupt) a task that no longer waits
        await anyio.sleep(0.01)  # the task really waits on something else now
        await waker.wait()  # already set: passes


async def test_a_cancelled_wait_does_not_swallow_a_later_wake_up() -> None:
    """A task that gave up one wait and parks on a new waker is woken by the new one only."""
    first, second = waker_factory()(), waker_factory()()
    with anyio.fail_after(5):
        with anyio.CancelScope() as scope:
            scope.cancel()
            await first.wait()
        async with anyio.create_task_group() as tg:
            tg.start_soon(second.wait)
            await anyio.lowlevel.checkpoint()
            first.set()
            await anyio.lowlevel.checkpoint()
            second.set()


async def test_a_shielded_wait_outlives_an_outer_cancel() -> None:
    waker = waker_factory()()
    finished: list[str] = []

    async def wait_shielded() -> None:
        with anyio.CancelScope(shield=True):
            await waker.wait()
        finished.append("shielded wait returned")

    with anyio.fail_after(5):
        async with anyio.create_task_group() as tg:
            tg.start_soon(wait_shielded)
            await anyio.lowlevel.checkpoint()
            tg.cancel_scope.cancel()
            with anyio.CancelScope(shield=True):  # the host waits a little, uncancelled
                for _ in range(3):
                    await anyio.lowlevel.checkpoint()
                assert finished == []
                waker.set()
    assert finished == ["shielded wait returned"]
