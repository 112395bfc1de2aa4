"""What orders the hook phases of a session with steps in flight. The phase lock: taken at
once when free, waited for in arrival order, never lost when a waiter is cancelled (before
or after it was handed the lock). The turnstile: numbers through in increasing order, a
number woken with the consecutive numbers waiting behind it, one woken before its turn
waiting again."""

from __future__ import annotations

import anyio
import anyio.lowlevel
import pytest

from hookrun._dispatch._wake import Wakers
from hookrun._session._lanes import PhaseLock, Turnstile

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


class _CountingWakers(Wakers):
    """Counts the wake-ups made: one per wait of the turnstile."""

    def __init__(self) -> None:
        super().__init__()
        self.made = 0

    def __call__(self):  # type: ignore[no-untyped-def]
        self.made += 1
        return super().__call__()


async def test_the_turnstile_wakes_the_consecutive_numbers_behind_a_turn_and_one_early_waits_again() -> None:
    wakers = _CountingWakers()
    turn = Turnstile(wakers)
    passed: list[int] = []

    async def step(number: int) -> None:
        await turn.wait(number)
        passed.append(number)
        if number == 2:
            await anyio.lowlevel.checkpoint()  # 3, woken with 2, runs meanwhile and waits again
        turn.done(number)

    async with anyio.create_task_group() as tg:
        for number in (2, 3):
            tg.start_soon(step, number)
            await anyio.wait_all_tasks_blocked()
        assert wakers.made == 2
        turn.done(1)  # 2's turn: 2 and 3 are woken together
    assert passed == [2, 3]
    assert wakers.made == 3  # 3 waited twice
    assert turn.next == 4


async def test_the_turnstile_stops_waking_at_a_number_not_waiting() -> None:
    wakers = _CountingWakers()
    turn = Turnstile(wakers)
    passed: list[int] = []

    async def step(number: int) -> None:
        await turn.wait(number)
        passed.append(number)
        turn.done(number)

    async with anyio.create_task_group() as tg:
        for number in (2, 4):
            tg.start_soon(step, number)
            await anyio.wait_all_tasks_blocked()
        turn.done(1)
        await anyio.wait_all_tasks_blocked()
        assert passed == [2]
        assert wakers.made == 2  # 4 was not woken: 3 is not done
        turn.done(3)  # given up (or through): 4's turn
    assert passed == [2, 4]
    assert turn.next == 5
