"""RayStepCounter: one global step for every process of a job, waiting without polling."""

from __future__ import annotations

import os
import sys
from collections.abc import AsyncIterator
from typing import Any

import anyio
import pytest
import ray

import hookrun
from hookrun.ray import RayStepCounter
from hookrun.remote import await_future

from .._engine_contract import unique_name
from .conftest import RayCluster

pytestmark = [pytest.mark.anyio, pytest.mark.usefixtures("ray_cluster")]

_INCREMENTER = """
import sys, anyio, ray
from hookrun.ray import RayStepCounter
from hookrun.remote import await_future
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


async def test_a_killed_counter_actor_comes_back_at_the_highest_value_seen(counter: RayStepCounter) -> None:
    """The counter's actor killed: the next calls re-create it at the value this counter
    saw (not at initial), and the step goes on from there."""
    with anyio.fail_after(60):
        assert await counter.increment(10) == 15
        ray.kill(ray.get_actor(counter.name, namespace=counter.namespace))
        assert await counter.increment() == 16
        assert await counter.get() == 16


async def test_a_counter_whose_actor_stays_lost_fails_loudly() -> None:
    """With reconnect_timeout=0, a lost actor is a ConnectionError naming the counter."""
    counter = RayStepCounter(unique_name(), reconnect_timeout=0)
    with anyio.fail_after(60):
        await counter.increment(3)
        handle = ray.get_actor(counter.name, namespace=counter.namespace)
        ray.kill(handle)
        with pytest.raises(ConnectionError, match=r"RayStepCounter.*could not be joined again .*last saw 3") as caught:
            for _ in range(100):  # the kill lands asynchronously; a call that ran first is fine
                await counter.get()
        assert isinstance(caught.value.__cause__, hookrun.UnavailableError)
        await counter.delete()
        await counter.aclose()


async def test_the_counter_lives_on_the_node_it_names(counter: RayStepCounter) -> None:
    """By default the actor is on the head node; node="local" and a node ID are accepted."""
    with anyio.fail_after(60):
        await counter.get()
        nodes: list[dict[str, Any]] = ray.nodes()  # type: ignore[no-untyped-call]
        assert [await actor_node(counter)] == [n["NodeID"] for n in nodes if "node:__internal_head__" in n["Resources"]]
        here = ray.get_runtime_context().get_node_id()
        for node in ("local", here):
            other = RayStepCounter(unique_name(), node=node)
            assert await other.increment() == 1
            await other.delete()
            await other.aclose()


async def test_an_unknown_node_is_refused_naming_it() -> None:
    """A node ID that is no node of the cluster is a ValueError when the actor is made."""
    counter = RayStepCounter(unique_name(), node="f" * 56)
    with anyio.fail_after(60), pytest.raises(ValueError, match=r"node='f+' is not \"head\", \"local\" or the ID of a node"):
        await counter.get()
    await counter.aclose()


def test_namespace_is_checked() -> None:
    """An empty namespace is refused, naming it."""
    with pytest.raises(ValueError, match="namespace must be a non-empty string"):
        RayStepCounter("x", namespace="")
    with pytest.raises(ValueError, match=r'node must be "head", "local" or a node ID, got \'\''):
        RayStepCounter("x", node="")


async def actor_node(counter: RayStepCounter) -> str:
    """The ID of the node the counter's actor runs on."""
    handle = ray.get_actor(counter.name, namespace=counter.namespace)
    ref: ray.ObjectRef[str] = handle.__ray_call__.remote(lambda actor: ray.get_runtime_context().get_node_id())
    node: str = await await_future(ref.future())
    return node


async def _run(args: list[str]) -> None:
    done = await anyio.run_process(args, check=False, env={**os.environ})
    assert done.returncode == 0, done.stderr.decode()[-2000:]


