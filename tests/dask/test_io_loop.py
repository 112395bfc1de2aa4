"""on_io_loop: a coroutine run on a client's IO loop (here an asyncio loop on a thread of
its own, as a synchronous client has), awaited from asyncio and trio: its value, its
error as it is, the caller's cancellation reaching it, a cancellation there not taken
for the caller's, and a closed IO loop."""

from __future__ import annotations

import asyncio
import concurrent.futures
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
