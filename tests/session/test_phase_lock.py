"""The phase lock of a session with steps in flight: taken at once when free, waited for in
arrival order, and never lost when a waiter is cancelled (before or after it was handed
the lock)."""

from __future__ import annotations

import anyio
import anyio.lowlevel
import pytest

from hookrun._dispatch._wake import Wakers
from hookrun._session._lanes import PhaseLock

pytestmark = pytest.mark.anyio


async def test_a_free_lock_is_taken_without_suspending() -> None:
    lock = PhaseLock(Wakers())
    with anyio.CancelScope() as scope:
        scope.cancel()  # a checkpoint would raise here
        async with lock:
            assert lock.locked()
    assert not scope.cancelled_caught
    assert not lock.locked()


async def test_waiters_are_served_in_arrival_order() -> None:
    lock = PhaseLock(Wakers())
    order: list[int] = []

    async def phase(i: int) -> None:
        async with lock:
            order.append(i)
            await anyio.lowlevel.checkpoint()  # hold it across a checkpoint

    async with anyio.create_task_group() as tg:
        await lock.__aenter__()
        for i in range(5):
            tg.start_soon(phase, i)
            await anyio.wait_all_tasks_blocked()  # each one queued before the next starts
        lock.release()
    assert order == [0, 1, 2, 3, 4]
    assert not lock.locked()


async def test_a_waiter_cancelled_while_it_waits_leaves_the_queue() -> None:
    lock = PhaseLock(Wakers())
    entered: list[str] = []

    async def phase(name: str, scope: anyio.CancelScope | None = None) -> None:
        with scope or anyio.CancelScope():
            async with lock:
                entered.append(name)

    first = anyio.CancelScope()
    async with anyio.create_task_group() as tg:
        await lock.__aenter__()
        tg.start_soon(phase, "cancelled", first)
        await anyio.wait_all_tasks_blocked()
        tg.start_soon(phase, "next")
        await anyio.wait_all_tasks_blocked()
        first.cancel()
        await anyio.wait_all_tasks_blocked()
        lock.release()
    assert entered == ["next"]
    assert not lock.locked()


async def test_a_waiter_cancelled_as_it_is_handed_the_lock_passes_it_on() -> None:
    """The release hands the lock to the first waiter and that waiter is cancelled before it
    runs: on asyncio its wait raises and it hands the lock on; on trio the hand-over wins
    and it enters, then meets the cancellation at its next checkpoint. Either way the
    next waiter gets the lock and it ends free."""
    lock = PhaseLock(Wakers())
    entered: list[str] = []

    async def phase(name: str, scope: anyio.CancelScope | None = None) -> None:
        with scope or anyio.CancelScope():
            async with lock:
                entered.append(name)
                await anyio.lowlevel.checkpoint()

    first = anyio.CancelScope()
    async with anyio.create_task_group() as tg:
        await lock.__aenter__()
        tg.start_soon(phase, "handed", first)
        await anyio.wait_all_tasks_blocked()
        tg.start_soon(phase, "next")
        await anyio.wait_all_tasks_blocked()
        lock.release()  # handed to the first waiter...
        first.cancel()  # ...which is cancelled before it runs
    assert entered[-1] == "next"
    assert entered in (["next"], ["handed", "next"])
    assert not lock.locked()


@pytest.mark.parametrize("anyio_backend", ["asyncio"])
async def test_a_task_cancelled_natively_as_it_is_handed_the_lock_passes_it_on() -> None:
    """asyncio's own ``Task.cancel()`` (``asyncio.timeout``, a framework cancelling the
    task) can land after the hand-over: the wait raises, and the lock goes to the next
    waiter instead of being held by no one."""
    import asyncio

    lock = PhaseLock(Wakers())
    entered: list[str] = []
    tasks: dict[str, asyncio.Task[None]] = {}

    async def phase(name: str) -> None:
        tasks[name] = asyncio.current_task()  # type: ignore[assignment]
        try:
            async with lock:
                entered.append(name)
        except asyncio.CancelledError:
            entered.append(f"{name} cancelled")

    await lock.__aenter__()
    first = asyncio.ensure_future(phase("handed"))
    await anyio.wait_all_tasks_blocked()
    second = asyncio.ensure_future(phase("next"))
    await anyio.wait_all_tasks_blocked()
    lock.release()  # handed to the first waiter...
    tasks["handed"].cancel()  # ...which is cancelled before it runs
    await asyncio.gather(first, second)
    assert entered == ["handed cancelled", "next"]
    assert not lock.locked()
