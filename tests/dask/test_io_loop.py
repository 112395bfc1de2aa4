"""on_io_loop: a coroutine run on a client's IO loop (here an asyncio loop on a thread of
its own, as a synchronous client has), awaited from asyncio and trio: its value, its
error as it is, the caller's cancellation reaching it, a cancellation there not taken
for the caller's, a closed IO loop, and calls handed over together each in its own
caller's context."""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextvars
import inspect
import threading
from collections.abc import Iterator
from types import SimpleNamespace
from typing import Any

import anyio
import pytest
from distributed.client import ClosedClientError

from hookrun.dask._io_loop import on_io_loop

pytestmark = pytest.mark.anyio


@pytest.fixture
def io_loop() -> Iterator[Any]:
    """An asyncio loop running on a thread, shaped like a client's ``loop`` (``.asyncio_loop``)."""
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever)
    thread.start()
    try:
        yield SimpleNamespace(asyncio_loop=loop)
    finally:
        loop.call_soon_threadsafe(loop.stop)
        thread.join(10)
        loop.close()


async def test_the_value_and_the_error_come_back(io_loop: Any) -> None:
    async def double(x: int) -> int:
        await asyncio.sleep(0)
        return 2 * x

    async def fail() -> None:
        raise ValueError("on the IO loop")

    with anyio.fail_after(10):
        assert await on_io_loop(io_loop, double(21)) == 42
        with pytest.raises(ValueError, match="on the IO loop"):
            await on_io_loop(io_loop, fail())


async def test_cancelling_the_caller_calls_cancel_and_cancels_the_coroutine(io_loop: Any) -> None:
    started, cancelled = threading.Event(), threading.Event()
    calls: list[str] = []

    async def forever() -> None:
        started.set()
        try:
            await asyncio.sleep(3600)
        except asyncio.CancelledError:
            cancelled.set()
            raise

    with anyio.fail_after(10):
        async with anyio.create_task_group() as tg:

            async def call() -> None:
                await on_io_loop(io_loop, forever(), cancel=lambda: calls.append("cancel"))

            tg.start_soon(call)
            await anyio.to_thread.run_sync(started.wait, 10)
            tg.cancel_scope.cancel()
        assert await anyio.to_thread.run_sync(cancelled.wait, 10)
    assert calls == ["cancel"]


async def test_a_cancellation_on_the_io_loop_is_not_the_callers(io_loop: Any) -> None:
    async def cancelled_there() -> None:
        raise asyncio.CancelledError

    with anyio.fail_after(10), pytest.raises(concurrent.futures.CancelledError):
        await on_io_loop(io_loop, cancelled_there())
    await anyio.lowlevel.checkpoint()  # the caller itself was not cancelled


async def test_a_closed_io_loop_is_a_closed_client_and_the_coroutine_is_closed() -> None:
    loop = asyncio.new_event_loop()
    loop.close()
    ran: list[str] = []

    async def never() -> None:
        ran.append("ran")

    coroutine = never()
    with pytest.raises(ClosedClientError, match="IO loop is closed"):
        await on_io_loop(SimpleNamespace(asyncio_loop=loop), coroutine)
    assert inspect.getcoroutinestate(coroutine) == inspect.CORO_CLOSED and ran == []  # never run, no warning


_CALLER: contextvars.ContextVar[str] = contextvars.ContextVar("caller")


async def test_calls_started_together_each_run_in_their_callers_context(io_loop: Any) -> None:
    """Calls handed over together (one hand-over) each start in a copy of their caller's context."""

    async def whose() -> str:
        await asyncio.sleep(0)
        return _CALLER.get("none")

    answers: dict[str, str] = {}

    async def call(name: str) -> None:
        _CALLER.set(name)
        answers[name] = await on_io_loop(io_loop, whose(), together=True)

    with anyio.fail_after(10):
        async with anyio.create_task_group() as tg:
            for name in ("a", "b", "c"):
                tg.start_soon(call, name)
    assert answers == {"a": "a", "b": "b", "c": "c"}


class _ClosingLoop:
    """An IO loop that is not closed when a call starts but refuses the hand-over."""

    def is_closed(self) -> bool:
        return False

    def call_soon_threadsafe(self, *args: Any) -> None:
        raise RuntimeError("Event loop is closed")


async def test_an_io_loop_closed_at_a_shared_hand_over_fails_the_calls_and_closes_them() -> None:
    coroutines = [_never(), _never()]
    outcomes: list[BaseException] = []

    async def call(coroutine: Any) -> None:
        try:
            await on_io_loop(SimpleNamespace(asyncio_loop=_ClosingLoop()), coroutine, together=True)
        except ClosedClientError as exc:
            outcomes.append(exc)

    with anyio.fail_after(10):
        async with anyio.create_task_group() as tg:
            for coroutine in coroutines:
                tg.start_soon(call, coroutine)
    assert len(outcomes) == 2 and all("IO loop is closed" in str(exc) for exc in outcomes)
    assert all(inspect.getcoroutinestate(c) == inspect.CORO_CLOSED for c in coroutines)


async def _never() -> None:
    raise AssertionError("never run")
