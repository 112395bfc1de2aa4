"""DaskStepCounter: one global step for every client of a cluster, waiting without polling."""

from __future__ import annotations

import contextlib
import functools
import os
import signal
from collections.abc import AsyncIterator
from typing import Any

import anyio
import distributed
import pytest

from hookrun.dask import DaskStepCounter

from .._engine_contract import unique_name
from .conftest import N_WORKERS

pytestmark = pytest.mark.anyio


@pytest.fixture
async def counter(dask_client: distributed.Client) -> AsyncIterator[DaskStepCounter]:
    """A counter with a name of its own, deleted after the test."""
    made = DaskStepCounter(dask_client, unique_name(), initial=5)
    yield made
    with anyio.fail_after(30):
        await made.delete()


@pytest.fixture
async def other_client(dask_cluster: distributed.LocalCluster) -> AsyncIterator[distributed.Client]:
    """A second, independent client of the same cluster."""
    connect = functools.partial(distributed.Client, dask_cluster.scheduler_address, set_as_default=False)
    client = await anyio.to_thread.run_sync(connect)
    yield client
    await anyio.to_thread.run_sync(client.close)


async def test_two_clients_share_the_counter_and_wake_a_waiter(
    counter: DaskStepCounter, other_client: distributed.Client
) -> None:
    """A second client joins the same counter; its increments wake a wait_for of the first."""
    joined = DaskStepCounter(other_client, counter.name, initial=100)
    woken: list[int] = []
    with anyio.fail_after(60):
        await counter.get()  # created by the first client: the second one's initial is ignored
        async with anyio.create_task_group() as tg:

            async def wait() -> None:
                woken.append(await counter.wait_for(15))

            tg.start_soon(wait)
            for _ in range(10):
                await joined.increment()
        assert woken == [15]
        assert await counter.get() == await joined.get() == 15
    await joined.aclose()


def test_client_is_checked() -> None:
    """A counter needs a distributed.Client, named in the error."""
    with pytest.raises(TypeError, match=r"client must be a distributed\.Client"):
        DaskStepCounter(None, "x")  # type: ignore[arg-type]


def _worker_pids(dask_scheduler: Any) -> dict[str, int]:
    """Run on the scheduler: the PID of every worker it lists as running. No worker is
    contacted, so a killed worker the scheduler still lists cannot hold the caller up
    (``Client.run`` would wait for Dask's connect timeout there)."""
    return {address: ws.pid for address, ws in dask_scheduler.workers.items() if ws.status.name == "running"}


async def test_the_counter_lives_on_the_scheduler_and_outlives_every_worker(
    counter: DaskStepCounter, dask_client: distributed.Client, restore_workers: None
) -> None:
    """Every worker killed: the counter, held by the scheduler, keeps its value."""
    worker_pids = functools.partial(dask_client.run_on_scheduler, _worker_pids)
    with anyio.fail_after(60):
        assert await counter.increment(10) == 15
        killed = set((await anyio.to_thread.run_sync(worker_pids)).values())
        for pid in killed:
            with contextlib.suppress(ProcessLookupError):  # one still listed from an earlier kill
                os.kill(pid, signal.SIGKILL)
        assert await counter.increment() == 16
        assert await counter.wait_for(16) == 16

        # The next test finds the cluster as it was: every worker replaced by a live one (the
        # scheduler may still list a killed one for a moment after the nannies restarted it).
        def replaced() -> bool:
            now = worker_pids()
            return len(now) == N_WORKERS and not killed & set(now.values())

        while not await anyio.to_thread.run_sync(replaced):  # noqa: ASYNC110  # other processes: no event
            await anyio.sleep(0.05)

