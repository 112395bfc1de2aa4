"""DaskStepCounter: one global step for every client of a cluster, waiting without polling."""

from __future__ import annotations

import functools
import uuid
from collections.abc import AsyncIterator

import anyio
import distributed
import pytest

import hookrun
from hookrun.dask import DaskStepCounter, DaskStepSession
from hookrun.hooks import GlobalStepWaiterHook, StopAtStepHook

from . import _remote

pytestmark = pytest.mark.anyio


@pytest.fixture
async def counter(dask_client: distributed.Client) -> AsyncIterator[DaskStepCounter]:
    """A counter with a name of its own, deleted after the test."""
    made = DaskStepCounter(dask_client, f"test-step-{uuid.uuid4().hex[:8]}", initial=5)
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


async def test_get_increment_set(counter: DaskStepCounter) -> None:
    """The counter starts at initial, increments by n and can be set."""
    with anyio.fail_after(30):
        assert await counter.get() == 5
        assert await counter.increment() == 6
        assert await counter.increment(4) == 10
        await counter.set(2)
        assert await counter.get() == 2


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


async def test_wait_for_a_reached_target_returns_at_once(counter: DaskStepCounter) -> None:
    """A target already reached returns the current value."""
    with anyio.fail_after(30):
        assert await counter.wait_for(3) == 5


async def test_cancelled_wait_for_frees_the_caller_and_the_counter_goes_on(counter: DaskStepCounter) -> None:
    """Cancelling wait_for returns at once; a later wait on the same counter still wakes."""
    with anyio.fail_after(30):
        with anyio.move_on_after(0.2) as scope:
            await counter.wait_for(10**9)
        assert scope.cancelled_caught
        async with anyio.create_task_group() as tg:
            tg.start_soon(counter.wait_for, 7)
            await counter.increment(2)


async def test_monitored_session_counts_on_the_shared_counter(
    counter: DaskStepCounter, dask_client: distributed.Client
) -> None:
    """A monitored session increments the shared step once per run and stops at last_step."""
    async def create() -> DaskStepSession:
        return DaskStepSession(_remote.square, client=dask_client)

    hooks = [GlobalStepWaiterHook(5), StopAtStepHook(last_step=8)]
    steps = 0
    with anyio.fail_after(60):
        async with hookrun.MonitoredSession(create, hooks, step_counter=counter) as sess:
            while not sess.should_stop():
                await sess.run("y", {"x": 2})
                steps += 1
    assert steps == 3 and await counter.get() == 8


def test_counter_arguments_are_checked(dask_client: distributed.Client) -> None:
    """Bad names, values and clients are refused, naming the argument."""
    with pytest.raises(ValueError, match="name must be a non-empty string"):
        DaskStepCounter(dask_client, "")
    with pytest.raises(TypeError, match=r"initial=\.\.\.\) must be an int, got 1.5"):
        DaskStepCounter(dask_client, "x", initial=1.5)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"client must be a distributed\.Client"):
        DaskStepCounter(None, "x")  # type: ignore[arg-type]
    assert isinstance(DaskStepCounter(dask_client, "x"), hookrun.StepCounter)
