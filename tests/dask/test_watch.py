"""The watch of a Dask actor creator: the first call that finds a worker gone ends the
calls of the creator's other sessions waiting on that worker, and refuses the calls the
sessions made before the loss would start on it (a new session is not refused)."""

from __future__ import annotations

import concurrent.futures
import logging
import time

import anyio
import pytest

from hookrun.dask._watch import WorkerWatch
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
