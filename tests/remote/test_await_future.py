"""hookrun.remote.await_future: the engine-free bridge from concurrent.futures to anyio,
and the promise that ``import hookrun`` (or any of hookrun.remote) never imports an engine."""

from __future__ import annotations

import concurrent.futures
import subprocess
import sys
import threading
from typing import Any

import anyio
import pytest

from hookrun.remote import await_future
from hookrun.remote._future import wait_future
from hookrun.remote._waiting import PlacedWaits, WaitEnded, Waiting

pytestmark = pytest.mark.anyio


async def test_result_set_from_another_thread() -> None:
    """A future completed on another thread wakes the awaiting task with its value."""
    future: concurrent.futures.Future[int] = concurrent.futures.Future()
    started = threading.Event()

    def complete() -> None:
        started.wait(10)
        future.set_result(42)

    thread = threading.Thread(target=complete)
    thread.start()
    try:
        with anyio.fail_after(10):
            async with anyio.create_task_group() as tg:
                result: list[int] = []

                async def wait() -> None:
                    result.append(await await_future(future))

                tg.start_soon(wait)
                await anyio.wait_all_tasks_blocked()
                started.set()
        assert result == [42]
    finally:
        thread.join()


async def test_no_thread_is_parked_while_waiting() -> None:
    """Waiting on a future does not start a worker thread."""
    future: concurrent.futures.Future[str] = concurrent.futures.Future()
    before = threading.active_count()
    with anyio.fail_after(10):
        async with anyio.create_task_group() as tg:
            result: list[str] = []

            async def wait() -> None:
                result.append(await await_future(future))

            tg.start_soon(wait)
            await anyio.wait_all_tasks_blocked()
            assert threading.active_count() == before
            future.set_result("done")  # from the loop thread itself: also fine
    assert result == ["done"]


async def test_already_done_future_returns_at_once() -> None:
    """A finished future's result is returned (after a checkpoint)."""
    future: concurrent.futures.Future[int] = concurrent.futures.Future()
    future.set_result(7)
    assert await await_future(future) == 7


async def test_exception_is_raised_unchanged() -> None:
    """The future's own exception propagates as itself."""
    future: concurrent.futures.Future[int] = concurrent.futures.Future()
    error = KeyError("missing")
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        pool.submit(future.set_exception, error)
        with anyio.fail_after(10), pytest.raises(KeyError) as caught:
            await await_future(future)
    assert caught.value is error


async def test_cancellation_cancels_the_future_and_frees_the_caller() -> None:
    """Cancelling the caller cancels a pending future by default and returns at once."""
    future: concurrent.futures.Future[int] = concurrent.futures.Future()
    with anyio.fail_after(10):
        with anyio.move_on_after(0.01) as scope:
            await await_future(future)
    assert scope.cancelled_caught
    assert future.cancelled()


async def test_custom_cancel_is_called_once_on_cancellation() -> None:
    """``cancel=`` replaces the default: it is called, and the future is left alone."""
    future: concurrent.futures.Future[int] = concurrent.futures.Future()
    calls: list[str] = []
    with anyio.fail_after(10), anyio.move_on_after(0.01):
        await await_future(future, cancel=lambda: calls.append("cancel"))
    assert calls == ["cancel"]
    assert not future.cancelled()
    future.set_result(1)  # the stale done-callback finds nobody waiting: no error


async def test_failing_cancel_does_not_hide_the_cancellation(caplog: pytest.LogCaptureFixture) -> None:
    """A cancel callback that raises is logged; the caller is still cancelled cleanly."""
    future: concurrent.futures.Future[int] = concurrent.futures.Future()

    def broken_cancel() -> None:
        raise ConnectionError("engine gone")

    with anyio.fail_after(10), anyio.move_on_after(0.01) as scope:
        await await_future(future, cancel=broken_cancel)
    assert scope.cancelled_caught
    assert "engine gone" in caplog.text


async def test_many_concurrent_waiters() -> None:
    """Fan-out: many futures completed by a thread pool are all awaited concurrently."""
    results: dict[int, int] = {}
    with concurrent.futures.ThreadPoolExecutor(4) as pool, anyio.fail_after(10):
        async with anyio.create_task_group() as tg:
            for i in range(50):

                async def one(i: int = i) -> None:
                    results[i] = await await_future(pool.submit(lambda: i * i))

                tg.start_soon(one)
    assert results == {i: i * i for i in range(50)}


async def test_ending_a_wait_cancels_its_future_and_raises_wait_ended() -> None:
    """``Waiting.end`` (here from another thread) frees the waiting task: its cancel is
    called once, ``WaitEnded`` is raised, and the wait has left the set."""
    future: concurrent.futures.Future[int] = concurrent.futures.Future()
    waits: set[Waiting] = set()
    calls: list[str] = []
    with anyio.fail_after(10):
        async with anyio.create_task_group() as tg:

            async def wait() -> None:
                with pytest.raises(WaitEnded):
                    await wait_future(future, lambda: calls.append("cancel"), waits)

            tg.start_soon(wait)
            await anyio.wait_all_tasks_blocked()
            (waiting,) = waits
            thread = threading.Thread(target=waiting.end)
            thread.start()
            thread.join()
    assert calls == ["cancel"]
    assert waits == set()


async def test_a_wait_whose_future_finished_first_returns_its_result() -> None:
    """Ended after its future is done: the result wins, nothing is cancelled."""
    future: concurrent.futures.Future[int] = concurrent.futures.Future()
    waits: set[Waiting] = set()
    with anyio.fail_after(10):
        async with anyio.create_task_group() as tg:
            result: list[int] = []

            async def wait() -> None:
                result.append(await wait_future(future, None, waits))

            tg.start_soon(wait)
            await anyio.wait_all_tasks_blocked()
            future.set_result(5)
            for waiting in list(waits):
                waiting.end()
    assert result == [5]
    assert not future.cancelled()
    assert waits == set()


async def test_a_cancelled_wait_leaves_the_set() -> None:
    """Cancelling the waiting task cancels the future and removes its wait from the set."""
    future: concurrent.futures.Future[int] = concurrent.futures.Future()
    waits: set[Waiting] = set()
    with anyio.fail_after(10), anyio.move_on_after(0.01) as scope:
        await wait_future(future, None, waits)
    assert scope.cancelled_caught
    assert future.cancelled()
    assert waits == set()


async def test_not_a_future_is_a_type_error() -> None:
    """Something without the future methods is refused, naming its type."""

    class Ref:
        def future(self) -> Any:
            return None

    with pytest.raises(TypeError, match=r"got Ref; Ref has a \.future\(\) method"):
        await await_future(Ref())  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="got int"):
        await await_future(3)  # type: ignore[arg-type]


def test_callback_after_the_loop_finished_is_ignored() -> None:
    """A future finishing after its event loop ended raises nothing into the engine's thread."""
    for backend in ("asyncio", "trio"):
        future: concurrent.futures.Future[int] = concurrent.futures.Future()

        async def abandon(future: concurrent.futures.Future[int] = future) -> None:
            with anyio.move_on_after(0.01):
                await await_future(future, cancel=lambda: None)

        anyio.run(abandon, backend=backend)
        future.set_result(1)  # would raise here if the hand-off failed loudly


def test_import_hookrun_imports_no_engine() -> None:
    """``import hookrun`` (and hookrun.remote, its engine-free core) leaves every engine unimported."""
    code = (
        "import sys, hookrun, hookrun.remote, hookrun.hooks\n"
        "import hookrun.remote._actor_session, hookrun.remote._counter, hookrun.remote._shared_step\n"
        "engines = ('ray', 'distributed', 'dask', 'tornado', 'numpy', 'tensorboardX', 'tqdm')\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in engines))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True
    )
    assert done.stdout.strip() == "[]"


async def test_placed_waits_end_the_calls_of_one_place_only() -> None:
    """``end(place)`` ends every call waiting on that place (each cancels its future and
    raises ``WaitEnded``), says how many, and leaves the other places' calls waiting."""
    waits = PlacedWaits()
    futures: dict[str, concurrent.futures.Future[int]] = {name: concurrent.futures.Future() for name in ("a1", "a2", "b")}
    outcomes: dict[str, object] = {}

    async def call(name: str, place: str) -> None:
        try:
            outcomes[name] = await wait_future(futures[name], None, waits.calls(place))
        except WaitEnded:
            outcomes[name] = "ended"

    with anyio.fail_after(5):
        async with anyio.create_task_group() as tg:
            for name in futures:
                tg.start_soon(call, name, name[0])
            await anyio.wait_all_tasks_blocked()
            assert waits.end("a") == 2
            assert waits.end("nowhere") == 0
            await anyio.wait_all_tasks_blocked()
            assert "b" not in outcomes
            futures["b"].set_result(3)
    assert outcomes == {"a1": "ended", "a2": "ended", "b": 3}
    assert futures["a1"].cancelled() and futures["a2"].cancelled()
    assert not waits.calls("a") and not waits.calls("b")


async def test_wakeups_done_together_cost_one_hand_off() -> None:
    """The events queued before the loop runs the hand-off are all set by one run of it;
    one queued after that run started gets a run of its own."""
    from hookrun.remote._waiting import _Wakeups

    handed: list[object] = []
    wakeups = _Wakeups(handed.append)
    events = [anyio.Event() for _ in range(3)]
    for event in events:
        wakeups.put(event)
    assert handed == [wakeups.set_all]
    wakeups.set_all()
    assert all(event.is_set() for event in events)
    late = anyio.Event()
    wakeups.put(late)
    assert len(handed) == 2 and not late.is_set()
    wakeups.set_all()
    assert late.is_set()
