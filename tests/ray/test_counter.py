"""RayStepCounter: one global step for every process of a job, waiting without polling."""

from __future__ import annotations

import os
import sys
from collections.abc import AsyncIterator

import anyio
import pytest
import ray

import hookrun
from hookrun.ray import RayStepCounter

from .._engine_contract import unique_name
from .conftest import RayCluster

pytestmark = [pytest.mark.anyio, pytest.mark.usefixtures("ray_cluster")]

_INCREMENTER = """
import sys, anyio, ray
from hookrun.ray import RayStepCounter
ray.init(address=sys.argv[1], log_to_driver=False, configure_logging=False)
async def main() -> None:
    counter = RayStepCounter(sys.argv[2])
    for _ in range(int(sys.argv[3])):
        await counter.increment()
anyio.run(main, backend=sys.argv[4])
ray.shutdown()
"""


@pytest.fixture
async def counter() -> AsyncIterator[RayStepCounter]:
    """A counter with a name of its own, deleted after the test."""
    made = RayStepCounter(unique_name(), initial=5)
    yield made
    with anyio.fail_after(30):
        await made.delete()
        await made.aclose()


async def test_two_processes_increment_one_counter_and_wake_a_waiter(
    counter: RayStepCounter, ray_cluster: RayCluster, anyio_backend: str
) -> None:
    """Two separate driver processes share the counter; wait_for wakes once it is reached."""
    other = "trio" if anyio_backend == "asyncio" else "asyncio"
    woken: list[int] = []
    with anyio.fail_after(90):
        await counter.get()  # create it before the other processes join
        async with anyio.create_task_group() as tg:

            async def wait() -> None:
                woken.append(await counter.wait_for(25))

            tg.start_soon(wait)
            for _ in range(2):
                args = [sys.executable, "-c", _INCREMENTER, ray_cluster.address, counter.name, "10", other]
                tg.start_soon(_run, args)
        assert woken == [25]
        assert await counter.get() == 25


async def test_dead_counter_actor_is_unavailable_then_recreated(counter: RayStepCounter) -> None:
    """A killed counter actor raises UnavailableError (not a silent reset); the next call re-creates it."""
    with anyio.fail_after(30):
        assert await counter.increment(10) == 15
        ray.kill(ray.get_actor(counter.name, namespace=counter.namespace))
        with pytest.raises(hookrun.UnavailableError, match="RayStepCounter") as caught:
            for _ in range(100):  # the kill lands asynchronously; a call that ran first is fine
                await counter.get()
        assert isinstance(caught.value.__cause__, ray.exceptions.RayActorError)
        assert await counter.get() == 5


def test_namespace_is_checked() -> None:
    """An empty namespace is refused, naming it."""
    with pytest.raises(ValueError, match="namespace must be a non-empty string"):
        RayStepCounter("x", namespace="")


async def _run(args: list[str]) -> None:
    done = await anyio.run_process(args, check=False, env={**os.environ})
    assert done.returncode == 0, done.stderr.decode()[-2000:]


