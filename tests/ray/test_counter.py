"""RayStepCounter: one global step for every process of a job, waiting without polling."""

from __future__ import annotations

import itertools
import os
import sys
import uuid
from collections.abc import AsyncIterator

import anyio
import pytest
import ray

import hookrun
from hookrun.hooks import GlobalStepWaiterHook, StopAtStepHook
from hookrun.ray import RayStepCounter, RayStepSession

from . import _remote
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
_numbers = itertools.count()


@pytest.fixture
async def counter() -> AsyncIterator[RayStepCounter]:
    """A counter with a name of its own, deleted after the test."""
    made = RayStepCounter(f"test-step-{uuid.uuid4().hex[:8]}-{next(_numbers)}", initial=5)
    yield made
    with anyio.fail_after(30):
        await made.delete()
        await made.aclose()


async def test_get_increment_set(counter: RayStepCounter) -> None:
    """The counter starts at initial, increments by n and can be set."""
    with anyio.fail_after(30):
        assert await counter.get() == 5
        assert await counter.increment() == 6
        assert await counter.increment(4) == 10
        await counter.set(2)
        assert await counter.get() == 2


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


async def test_wait_for_a_reached_target_returns_at_once(counter: RayStepCounter) -> None:
    """A target already reached returns the current value."""
    with anyio.fail_after(30):
        assert await counter.wait_for(3) == 5


async def test_cancelled_wait_for_frees_the_caller_and_the_counter_goes_on(counter: RayStepCounter) -> None:
    """Cancelling wait_for returns at once; a later wait on the same counter still wakes."""
    with anyio.fail_after(30):
        with anyio.move_on_after(0.2) as scope:
            await counter.wait_for(10**9)
        assert scope.cancelled_caught
        async with anyio.create_task_group() as tg:
            tg.start_soon(counter.wait_for, 7)
            await counter.increment(2)


async def test_monitored_session_counts_on_the_shared_counter(counter: RayStepCounter) -> None:
    """A monitored session increments the shared step once per run and stops at last_step."""
    async def create() -> RayStepSession:
        return RayStepSession(_remote.square)

    hooks = [GlobalStepWaiterHook(5), StopAtStepHook(last_step=8)]
    steps = 0
    with anyio.fail_after(60):
        async with hookrun.MonitoredSession(create, hooks, step_counter=counter) as sess:
            while not sess.should_stop():
                await sess.run("y", {"x": 2})
                steps += 1
    assert steps == 3 and await counter.get() == 8


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


def test_counter_arguments_are_checked() -> None:
    """Bad names and values are refused, naming the argument."""
    with pytest.raises(ValueError, match="name must be a non-empty string"):
        RayStepCounter("")
    with pytest.raises(ValueError, match="namespace must be a non-empty string"):
        RayStepCounter("x", namespace="")
    with pytest.raises(TypeError, match=r"initial=\.\.\.\) must be an int, got 1.5"):
        RayStepCounter("x", initial=1.5)  # type: ignore[arg-type]
    assert isinstance(RayStepCounter("x"), hookrun.StepCounter)


async def test_increment_argument_is_checked(counter: RayStepCounter) -> None:
    """increment(n) needs an int."""
    with pytest.raises(TypeError, match=r"increment\(n\) must be an int, got '1'"):
        await counter.increment("1")  # type: ignore[arg-type]


async def _run(args: list[str]) -> None:
    done = await anyio.run_process(args, check=False, env={**os.environ})
    assert done.returncode == 0, done.stderr.decode()[-2000:]


async def test_recent_is_the_value_this_counter_last_saw_while_fresh(counter: RayStepCounter) -> None:
    """recent(): nothing before a call; the value get/increment/set returned; None once stale
    (staleness counts from when the call was sent)."""
    with anyio.fail_after(30):
        await counter.increment()  # 6 (the fixture's counter has the default staleness)
    counter = RayStepCounter(counter.name, max_staleness=60)
    assert counter.recent() is None
    with anyio.fail_after(30):
        await counter.increment()
        assert counter.recent() == 7
        await counter.set(9)
        assert counter.recent() == 9
        other = RayStepCounter(counter.name, max_staleness=0)
        assert await other.increment() == 10
        assert other.recent() is None  # max_staleness=0: never answers
        assert counter.recent() == 9  # what this counter saw (another one moved on since)
        assert await counter.get() == 10  # get() always asks the actor
        assert counter.recent() == 10
        await other.aclose()
        await counter.aclose()
    with pytest.raises(ValueError, match="max_staleness"):
        RayStepCounter("x", max_staleness=-1)


class CountingCounter(RayStepCounter):
    """Counts the calls it sends to the actor."""

    calls: list[str]

    async def _call(self, method: str, *args: int, remember: bool = True) -> int:
        self.calls.append(method)
        return await super()._call(method, *args, remember=remember)


@pytest.mark.parametrize("max_staleness", [60.0, 0.0])
async def test_a_worker_step_makes_one_counter_call_not_two(max_staleness: float) -> None:
    """The step's global_step comes from the previous increment while fresh: one round trip
    to the counter per step; with max_staleness=0 each step also reads it (a get)."""
    counter = CountingCounter(f"test-step-{uuid.uuid4().hex[:8]}", max_staleness=max_staleness)
    counter.calls = []
    steps: list[int] = []

    class Steps(hookrun.SessionRunHook):
        def before_run(self, ctx: hookrun.SessionRunContext) -> None:
            steps.append(ctx.global_step)

    async def create() -> RayStepSession:
        return RayStepSession(_remote.square)

    with anyio.fail_after(60):
        try:
            async with hookrun.MonitoredSession(create, [Steps()], step_counter=counter) as sess:
                await counter.get()  # joined (and read) before the steps
                for x in range(5):
                    await sess.run("y", {"x": x})
        finally:
            await counter.delete()
            await counter.aclose()
    assert steps == [0, 1, 2, 3, 4]
    per_step = counter.calls[1:]
    if max_staleness:
        assert per_step == ["increment"] * 5
    else:
        assert per_step == ["get", "increment"] * 5
