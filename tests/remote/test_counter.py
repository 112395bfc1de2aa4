"""RemoteStepCounter, the client logic every engine's shared counter uses, over an
in-memory engine: joining once, losing the actor, recent() and its staleness."""

from __future__ import annotations

import math
from collections.abc import Iterator
from typing import Any, ClassVar

import anyio
import anyio.lowlevel
import pytest

import hookrun
from hookrun.remote import _counter
from hookrun.remote._counter import RemoteStepCounter
from hookrun.remote._shared_step import SharedStep

pytestmark = pytest.mark.anyio


class InMemoryCounter(RemoteStepCounter[SharedStep]):
    """A counter whose 'engine' is one SharedStep in this process; ``lost`` kills it."""

    _kind: ClassVar[str] = "InMemoryCounter"

    def __init__(
        self,
        actor: SharedStep | None = None,
        *,
        name: str = "step",
        initial: int = 5,
        max_staleness: float = 60.0,
        reconnect_timeout: float = 0.0,
    ) -> None:
        super().__init__(name, initial=initial, max_staleness=max_staleness, reconnect_timeout=reconnect_timeout)
        self.actor = actor
        self.opened = 0
        self.lost = False
        self.calls: list[str] = []
        self.seeds: list[int] = []
        #: Calls that fail as lost before the actor answers again (an engine noticing late).
        self.lost_calls = 0

    async def _open(self, seed: int) -> SharedStep:
        self.opened += 1
        self.seeds.append(seed)
        await anyio.lowlevel.checkpoint()  # a round trip: concurrent first calls meet here
        if self.actor is None:
            self.actor = SharedStep(seed)
        return self.actor

    async def _invoke(self, handle: SharedStep, method: str, args: tuple[object, ...], token: int | None) -> int:
        self.calls.append(method)
        if self.lost_calls:
            self.lost_calls -= 1
            raise hookrun.UnavailableError(f"{self._kind}: the actor did not answer")
        if self.lost or handle is not self.actor:
            raise hookrun.UnavailableError(f"{self._kind}: the actor was lost")
        try:
            value: int = await getattr(handle, method)(*args, *([] if token is None else [token]))
        except BaseException:
            if token is not None:
                await handle.forget(token)
            raise
        return value


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[float]]:
    """The staleness clock, set by the test: ``clock[0]`` is now."""
    now = [100.0]
    monkeypatch.setattr(_counter, "_now", lambda: now[0])
    yield now


async def test_the_methods_reach_the_actor_and_it_is_a_step_counter() -> None:
    """get/increment/set/wait_for are one actor call each, on the actor joined once."""
    counter = InMemoryCounter()
    assert isinstance(counter, hookrun.StepCounter)
    with anyio.fail_after(5):
        assert await counter.get() == 5
        assert await counter.increment() == 6
        await counter.set(9)
        assert await counter.wait_for(3) == 9
    assert counter.calls == ["get", "increment", "set", "wait_until"] and counter.opened == 1


async def test_concurrent_first_calls_join_the_actor_once() -> None:
    """Many calls made before the actor is joined open it once."""
    counter = InMemoryCounter()
    with anyio.fail_after(5):
        async with anyio.create_task_group() as tg:
            for _ in range(5):
                tg.start_soon(counter.increment)
    assert counter.opened == 1 and await counter.get() == 10


async def test_a_lost_actor_past_reconnect_timeout_is_a_connection_error(clock: list[float]) -> None:
    """A counter whose actor stays lost raises ConnectionError (not recoverable), naming
    what it last saw; it drops recent(), and once the actor is back it joins it again."""
    counter = InMemoryCounter()
    with anyio.fail_after(5):
        assert await counter.increment(10) == 15
        assert counter.recent() == 15
        counter.lost = True
        with pytest.raises(ConnectionError, match=r"could not be joined again within reconnect_timeout=0 s .*last saw 15"):
            await counter.get()
        assert counter.recent() is None
        counter.lost = False
        assert await counter.get() == 15
    assert counter.opened == 2


async def test_an_actor_re_created_at_initial_is_lifted_to_the_highest_value_seen() -> None:
    """The actor lost and re-created by someone else at its initial value: the counter
    joins it again within reconnect_timeout and lifts it, so the step never goes back."""
    counter = InMemoryCounter(reconnect_timeout=30)
    with anyio.fail_after(5):
        assert await counter.increment(100) == 105
        counter.actor = SharedStep(5)  # the engine re-created it at initial behind our back
        assert await counter.increment() == 106
        assert await counter.actor.get() == 106
    assert counter.calls[-3:] == ["increment", "lift", "increment"]


async def test_a_lost_actor_is_re_created_at_the_highest_value_seen() -> None:
    """When the counter itself creates the new actor, it seeds it with what it saw."""
    counter = InMemoryCounter(reconnect_timeout=30)
    with anyio.fail_after(5):
        await counter.increment(40)
        counter.actor = None
        assert await counter.get() == 45
    assert counter.seeds == [5, 45]


async def test_an_increment_sent_again_after_a_lost_answer_counts_once() -> None:
    """The actor applied an increment whose answer was lost: sent again with its key, it
    is not counted twice."""
    actor = SharedStep(5)
    counter = InMemoryCounter(actor, reconnect_timeout=30)
    applied = actor.increment

    async def lose_answer(n: int, key: str | None = None) -> int:
        await applied(n, key)
        actor.increment = applied  # type: ignore[method-assign]
        raise hookrun.UnavailableError("the answer was lost")

    actor.increment = lose_answer  # type: ignore[method-assign]
    with anyio.fail_after(5):
        assert await counter.increment(3) == 8
        assert await counter.get() == 8


async def test_a_counter_waits_for_an_actor_that_answers_again_later() -> None:
    """Calls lost for a while are retried until the actor answers (within reconnect_timeout)."""
    counter = InMemoryCounter(reconnect_timeout=30)
    with anyio.fail_after(10):
        await counter.get()
        counter.lost_calls = 3
        assert await counter.increment() == 6


async def test_set_may_go_back_and_the_floor_follows_it() -> None:
    """set() to a lower value (a restored checkpoint) is kept: the floor starts again there."""
    counter = InMemoryCounter(reconnect_timeout=30)
    with anyio.fail_after(5):
        await counter.increment(100)
        await counter.set(50)
        assert counter.floor == 50
        counter.actor = SharedStep(0)
        assert await counter.get() == 50


async def test_recent_is_what_this_counter_last_saw_while_fresh(clock: list[float]) -> None:
    """recent(): None before a call; the value get/increment/set returned; None once stale,
    counting from when the call was sent; wait_for is not remembered."""
    actor = SharedStep(5)
    counter = InMemoryCounter(actor, max_staleness=1.0)
    assert counter.recent() is None
    with anyio.fail_after(5):
        await counter.increment()
        assert counter.recent() == 6
        await counter.set(9)
        assert counter.recent() == 9
        await actor.increment(3)  # another worker moved on
        assert counter.recent() == 9
        assert await counter.wait_for(12) == 12
        assert counter.recent() == 9
        clock[0] += 1.0
        assert counter.recent() == 9  # exactly max_staleness old: still fresh
        clock[0] += 0.01
        assert counter.recent() is None
        assert await counter.get() == 12  # get() always asks the actor
        assert counter.recent() == 12
        never = InMemoryCounter(actor, max_staleness=0)
        await never.increment()
        clock[0] += 1e-9
        assert never.recent() is None


async def test_a_cancelled_wait_for_carries_its_own_token_and_leaves_no_waiter() -> None:
    """Each wait_for sends a token of its own; an adapter forgetting it on cancel leaves nothing."""
    actor = SharedStep(5)
    counter = InMemoryCounter(actor)
    with anyio.fail_after(5):
        with anyio.move_on_after(0.05) as scope:
            await counter.wait_for(10**9)
        assert scope.cancelled_caught
        assert repr(actor) == "SharedStep(5, waiters=0)"
        async with anyio.create_task_group() as tg:
            tg.start_soon(counter.wait_for, 7)
            tg.start_soon(counter.wait_for, 8)
            await anyio.wait_all_tasks_blocked()
            assert sorted(actor._by_token) == [1, 2]
            await counter.increment(3)


async def test_a_monitored_session_step_makes_one_counter_call_while_fresh() -> None:
    """With recent() fresh, a step's global_step costs no call: one increment per step."""
    counter = InMemoryCounter(max_staleness=60)
    steps: list[int] = []

    class Steps(hookrun.SessionRunHook):
        def before_run(self, ctx: hookrun.SessionRunContext) -> None:
            steps.append(ctx.global_step)

    async def create() -> hookrun.StepSession:
        return hookrun.StepSession(lambda feeds: {"y": 1})

    with anyio.fail_after(10):
        async with hookrun.MonitoredSession(create, [Steps()], step_counter=counter) as sess:
            await counter.get()
            for _ in range(3):
                await sess.run("y")
    assert steps == [5, 6, 7]
    assert counter.calls[counter.calls.index("get") + 1 :] == ["increment"] * 3


async def test_async_with_lets_go_of_the_actor() -> None:
    """Leaving async with closes the counter: the next call joins the actor again."""
    counter = InMemoryCounter()
    with anyio.fail_after(5):
        async with counter as same:
            assert same is counter
            await counter.get()
        assert counter.recent() is None
        await counter.get()
    assert counter.opened == 2


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        ({"name": ""}, ValueError, r"InMemoryCounter: name must be a non-empty string, got ''"),
        ({"initial": 1.5}, TypeError, r"InMemoryCounter\(initial=\.\.\.\) must be an int, got 1.5"),
        ({"max_staleness": -1}, ValueError, r"InMemoryCounter: max_staleness must be a number"),
        ({"max_staleness": math.inf}, ValueError, r"InMemoryCounter: max_staleness must be a number of seconds >= 0, got inf \(not a finite number\)"),
        ({"reconnect_timeout": -1}, ValueError, r"InMemoryCounter: reconnect_timeout must be a number"),
    ],
)
def test_arguments_are_checked_naming_the_counter(kwargs: dict[str, Any], error: type[Exception], match: str) -> None:
    """Bad names, initial values and staleness are refused, naming the counter's class."""
    with pytest.raises(error, match=match):
        InMemoryCounter(**kwargs)


async def test_step_arguments_are_checked() -> None:
    """increment, set and wait_for need ints, naming the method."""
    counter = InMemoryCounter()
    with pytest.raises(TypeError, match=r"InMemoryCounter\.increment\(n\) must be an int, got '1'"):
        await counter.increment("1")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"step counter value must be an int, got True"):
        await counter.set(True)
    with pytest.raises(TypeError, match=r"InMemoryCounter\.wait_for\(target\) must be an int, got None"):
        await counter.wait_for(None)  # type: ignore[arg-type]
    assert counter.calls == []


async def test_a_session_with_lanes_counts_every_step_once_though_its_counter_is_lost() -> None:
    """Four lanes; the counter's actor lost (re-created at initial) and an increment's
    answer lost mid-run: the shared step still ends at one per item, and no step saw a
    value below one seen before."""
    counter = InMemoryCounter(initial=0, reconnect_timeout=30)
    seen: list[int] = []

    class Steps(hookrun.SessionRunHook):
        overlapping_steps = True

        def after_run(self, ctx: hookrun.SessionRunContext, values: hookrun.SessionRunValues) -> None:
            seen.append(values.global_step)

    async def step(feeds: Any) -> dict[str, int]:
        if feeds["x"] == 10:
            counter.actor = SharedStep(0)  # lost and re-created by the engine at initial
        if feeds["x"] == 20:
            counter.lost_calls = 1  # an answer that never came
        await anyio.lowlevel.checkpoint()
        return {"x": feeds["x"]}

    async def create() -> hookrun.StepSession:
        return hookrun.StepSession(step)

    with anyio.fail_after(20):
        async with hookrun.MonitoredSession(create, [Steps()], step_counter=counter, max_in_flight=4) as sess:
            got = [x async for x in sess.iterate("x", ({"x": i} for i in range(40)))]
        assert got == list(range(40))
        assert await counter.get() == 40
    assert seen == sorted(seen) and seen[-1] == 40
