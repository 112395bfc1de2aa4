"""The watch of a Dask actor creator: the first call that finds a worker gone ends the
calls of the creator's other sessions waiting on that worker, and refuses the calls the
sessions made before the loss would start on it (a new session is not refused); a
worker that a call could not reach counts as gone only once the loss is confirmed."""

from __future__ import annotations

import concurrent.futures
import logging
import socket
import time

import anyio
import distributed
import pytest

from hookrun.dask._io_loop import on_io_loop
from hookrun.dask._watch import WorkerWatch, worker_gone
from hookrun.remote._future import wait_future
from hookrun.remote._waiting import WaitEnded

pytestmark = pytest.mark.anyio


async def test_a_lost_worker_ends_the_calls_waiting_on_it_and_no_others(caplog: pytest.LogCaptureFixture) -> None:
    watch = WorkerWatch()
    futures = {name: concurrent.futures.Future() for name in ("a1", "a2", "b")}  # type: ignore[var-annotated]
    outcomes: dict[str, object] = {}

    async def call(name: str, address: str) -> None:
        try:
            outcomes[name] = await wait_future(futures[name], None, watch.calls(address))
        except WaitEnded:
            outcomes[name] = "ended"

    made = time.monotonic()
    with caplog.at_level(logging.WARNING, logger="hookrun"), anyio.fail_after(5):
        async with anyio.create_task_group() as tg:
            tg.start_soon(call, "a1", "tcp://a")
            tg.start_soon(call, "a2", "tcp://a")
            tg.start_soon(call, "b", "tcp://b")
            await anyio.wait_all_tasks_blocked()
            assert len(watch.calls("tcp://a")) == 2
            watch.lost("tcp://a")
            watch.lost("tcp://a")  # a second lane finding it gone: said once
            await anyio.wait_all_tasks_blocked()
            futures["b"].set_result(7)
    assert outcomes == {"a1": "ended", "a2": "ended", "b": 7}
    assert futures["a1"].cancelled() and futures["a2"].cancelled()
    assert not watch.calls("tcp://a") and not watch.calls("tcp://b")
    assert watch.lost_since("tcp://a", made) and not watch.lost_since("tcp://b", made)
    assert not watch.lost_since("tcp://a", time.monotonic() + 1)  # a session made after the loss
    warned = [r.getMessage() for r in caplog.records if "is gone" in r.getMessage()]
    assert warned == ["Dask worker tcp://a is gone: the 2 other calls waiting on its actors end, and their lanes are re-created"]


@pytest.mark.parametrize("gone", [True, False])
async def test_a_suspect_worker_is_lost_only_if_the_loss_is_confirmed(gone: bool) -> None:
    """A call that could not reach a worker ends the other calls on it only if the
    confirmation says the worker is gone; otherwise they go on and nothing is refused."""
    watch = WorkerWatch()
    future: concurrent.futures.Future[int] = concurrent.futures.Future()
    outcome: list[object] = []
    asked: list[str] = []

    async def confirm() -> bool:
        asked.append("asked")
        return gone

    async def call() -> None:
        try:
            outcome.append(await wait_future(future, None, watch.calls("tcp://a")))
        except WaitEnded:
            outcome.append("ended")

    made = time.monotonic()
    with anyio.fail_after(5):
        async with anyio.create_task_group() as tg:
            tg.start_soon(call)
            await anyio.wait_all_tasks_blocked()
            assert await watch.suspect("tcp://a", confirm) is gone
            await anyio.wait_all_tasks_blocked()
            if not gone:
                future.set_result(3)
    assert asked == ["asked"]
    assert outcome == (["ended"] if gone else [3])
    assert watch.lost_since("tcp://a", made) is gone


async def test_a_live_worker_is_not_gone_and_an_address_nobody_listens_on_is(dask_client: distributed.Client) -> None:
    """The confirmation asks the scheduler and the worker's address: a live worker of the
    cluster is not gone; an address no worker (and no process) has is."""
    with socket.socket() as probe:  # a port nobody listens on once closed
        probe.bind(("127.0.0.1", 0))
        free = f"tcp://127.0.0.1:{probe.getsockname()[1]}"
    live = sorted(dask_client.scheduler_info()["workers"])[0]
    with anyio.fail_after(30):
        for address, gone in ((live, False), (free, True)):
            assert await on_io_loop(dask_client.loop, worker_gone(dask_client, address)) is gone
