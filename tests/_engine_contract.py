"""The promises the Ray and Dask adapters both keep: one test body for both engines.

``tests/ray/test_contract.py`` and ``tests/dask/test_contract.py`` each subclass
``EngineContract`` and give it an ``engine`` fixture (an ``Engine``: how that engine
builds a counter, a step session and an actor session creator), so the tests run in
the engine's package, against its cluster, with its ``engine`` marker.
"""

from __future__ import annotations

import itertools
import os
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from types import ModuleType
from typing import Any

import anyio
import pytest

import hookrun
from hookrun.hooks import GlobalStepWaiterHook, StopAtStepHook
from hookrun.remote._actor_session import RemoteActorSessionCreator
from hookrun.remote._counter import RemoteStepCounter

FAST_RETRY = hookrun.RetryPolicy(initial_delay=0.01, max_attempts=3)
_numbers = itertools.count()


@dataclass(frozen=True)
class Engine:
    """How one engine makes what the contract tests."""

    counter: Callable[..., RemoteStepCounter[Any]]  # (name, *, initial=0, max_staleness=0.05)
    step_session: Callable[[Callable[..., Any]], hookrun.StepSession]
    actor_creator: Callable[..., RemoteActorSessionCreator[Any]]  # (cls, *args, method=, **kwargs)
    remote: ModuleType  # the engine's _remote: square, failing, Model, Broken
    constructor_error: type[BaseException]  # what a failing actor constructor raises


class Creations(hookrun.SessionRunHook):
    """Counts after_create_session calls."""

    def __init__(self) -> None:
        self.created = 0

    def after_create_session(self, session: object, coord: object) -> None:
        self.created += 1


class FetchPid(hookrun.SessionRunHook):
    """Fetches ``pid`` in every step."""

    def __init__(self) -> None:
        self.pids: list[int] = []

    def before_run(self, ctx: hookrun.SessionRunContext) -> hookrun.SessionRunArgs:
        return hookrun.SessionRunArgs("pid")

    def after_run(self, ctx: hookrun.SessionRunContext, values: hookrun.SessionRunValues) -> None:
        self.pids.append(values.results)


def unique_name() -> str:
    return f"test-step-{uuid.uuid4().hex[:8]}-{next(_numbers)}"


def creating(engine: Engine, fn: Callable[..., Any]) -> Callable[[], Awaitable[hookrun.StepSession]]:
    async def create() -> hookrun.StepSession:
        return engine.step_session(fn)

    return create


class EngineContract:
    """The tests both engines pass (collected through each engine's subclass)."""

    @pytest.fixture
    async def counter(self, engine: Engine) -> AsyncIterator[RemoteStepCounter[Any]]:
        """A counter with a name of its own and initial 5, deleted after the test."""
        made = engine.counter(unique_name(), initial=5)
        yield made
        with anyio.fail_after(30):
            await made.delete()
            await made.aclose()

    async def test_counter_get_increment_set(self, counter: RemoteStepCounter[Any]) -> None:
        """The counter starts at initial, increments by n and can be set."""
        with anyio.fail_after(30):
            assert await counter.get() == 5
            assert await counter.increment() == 6
            assert await counter.increment(4) == 10
            await counter.set(2)
            assert await counter.get() == 2

    async def test_counter_wait_for_a_reached_target_returns_at_once(self, counter: RemoteStepCounter[Any]) -> None:
        """A target already reached returns the current value."""
        with anyio.fail_after(30):
            assert await counter.wait_for(3) == 5

    async def test_cancelled_wait_for_frees_the_caller_and_the_counter_goes_on(
        self, counter: RemoteStepCounter[Any]
    ) -> None:
        """Cancelling wait_for returns at once; a later wait on the same counter still wakes."""
        with anyio.fail_after(30):
            with anyio.move_on_after(0.2) as scope:
                await counter.wait_for(10**9)
            assert scope.cancelled_caught
            async with anyio.create_task_group() as tg:
                tg.start_soon(counter.wait_for, 7)
                await counter.increment(2)

    async def test_monitored_session_counts_on_the_shared_counter(
        self, engine: Engine, counter: RemoteStepCounter[Any]
    ) -> None:
        """A monitored session increments the shared step once per run and stops at last_step."""
        hooks = [GlobalStepWaiterHook(5), StopAtStepHook(last_step=8)]
        steps = 0
        with anyio.fail_after(60):
            create = creating(engine, engine.remote.square)
            async with hookrun.MonitoredSession(create, hooks, step_counter=counter) as sess:
                while not sess.should_stop():
                    await sess.run("y", {"x": 2})
                    steps += 1
        assert steps == 3 and await counter.get() == 8

    async def test_recent_is_the_value_this_counter_last_saw_while_fresh(
        self, engine: Engine, counter: RemoteStepCounter[Any]
    ) -> None:
        """recent(): nothing before a call; the value get/increment/set returned; what this
        counter saw even after another one moved on; never with max_staleness=0."""
        with anyio.fail_after(30):
            await counter.increment()  # 6
        mine = engine.counter(counter.name, max_staleness=60)
        other = engine.counter(counter.name, max_staleness=0)
        assert mine.recent() is None
        with anyio.fail_after(30):
            await mine.increment()
            assert mine.recent() == 7
            await mine.set(9)
            assert mine.recent() == 9
            assert await other.increment() == 10
            assert other.recent() is None
            assert mine.recent() == 9
            assert await mine.get() == 10  # get() always asks the actor
            assert mine.recent() == 10
            await other.aclose()
            await mine.aclose()

    @pytest.mark.parametrize("max_staleness", [60.0, 0.0])
    async def test_a_worker_step_makes_one_counter_call_not_two(
        self, engine: Engine, max_staleness: float, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """A step's global_step comes from the previous increment while fresh: one round trip
        to the counter per step; with max_staleness=0 each step also reads it (a get)."""
        counter = engine.counter(unique_name(), max_staleness=max_staleness)
        calls: list[str] = []
        invoke = counter._invoke

        def counting(handle: Any, method: str, args: tuple[int, ...], token: int | None) -> Awaitable[int]:
            calls.append(method)
            return invoke(handle, method, args, token)

        monkeypatch.setattr(counter, "_invoke", counting)
        steps: list[int] = []

        class Steps(hookrun.SessionRunHook):
            def before_run(self, ctx: hookrun.SessionRunContext) -> None:
                steps.append(ctx.global_step)

        with anyio.fail_after(60):
            try:
                create = creating(engine, engine.remote.square)
                async with hookrun.MonitoredSession(create, [Steps()], step_counter=counter) as sess:
                    await counter.get()  # joined (and read) before the steps
                    for x in range(5):
                        await sess.run("y", {"x": x})
            finally:
                await counter.delete()
                await counter.aclose()
        assert steps == [0, 1, 2, 3, 4]
        assert calls[1:] == (["increment"] if max_staleness else ["get", "increment"]) * 5

    def test_counter_arguments_are_checked(self, engine: Engine) -> None:
        """Bad names, values and staleness are refused, naming the argument."""
        with pytest.raises(ValueError, match="name must be a non-empty string"):
            engine.counter("")
        with pytest.raises(TypeError, match=r"initial=\.\.\.\) must be an int, got 1.5"):
            engine.counter("x", initial=1.5)
        with pytest.raises(ValueError, match="max_staleness must be a number of seconds >= 0, got -1"):
            engine.counter("x", max_staleness=-1)
        assert isinstance(engine.counter("x"), hookrun.StepCounter)

    async def test_increment_argument_is_checked(self, counter: RemoteStepCounter[Any]) -> None:
        """increment(n) needs an int."""
        with pytest.raises(TypeError, match=r"increment\(n\) must be an int, got '1'"):
            await counter.increment("1")  # type: ignore[arg-type]

    async def test_step_session_results_and_hook_fetches(self, engine: Engine) -> None:
        """Each run is one remote task; the caller's and a hook's fetches are answered by key."""
        hook = FetchPid()
        with anyio.fail_after(60):
            async with hookrun.MonitoredSession(creating(engine, engine.remote.square), [hook]) as sess:
                results = [await sess.run("y", {"x": x}) for x in range(3)]
        assert results == [0, 1, 4]
        assert len(hook.pids) == 3 and all(pid != os.getpid() for pid in hook.pids)

    async def test_step_session_user_error_propagates_and_is_not_retried(self, engine: Engine) -> None:
        """A remote step's ValueError is raised as a ValueError; no re-creation."""
        hook = Creations()
        with anyio.fail_after(60), pytest.raises(ValueError, match="bad feed x=3"):
            create = creating(engine, engine.remote.failing)
            async with hookrun.MonitoredSession(create, [hook], retry=FAST_RETRY) as sess:
                await sess.run("y", {"x": 3})
        assert hook.created == 1

    async def test_actor_session_results_state_and_tags(self, engine: Engine) -> None:
        """The actor keeps state across runs; tags of the run's options reach the method."""
        async with engine.actor_creator(engine.remote.Model, 10) as creator:
            with anyio.fail_after(60):
                async with hookrun.MonitoredSession(creator) as sess:
                    assert await sess.run(["y", "calls"], {"x": 1}) == [11, 1]
                    tagged = hookrun.RunOptions(tags={"phase": "eval"})
                    assert await sess.run(["calls", "tags"], options=tagged) == [2, {"phase": "eval"}]
                    assert await sess.run({"n": "calls", "t": "tags"}) == {"n": 3, "t": None}
            assert creator.created == 1

    async def test_actor_session_other_method_keywords_and_closing(self, engine: Engine) -> None:
        """method= picks the actor method; constructor keywords reach the actor; a closed
        session refuses to run."""
        async with engine.actor_creator(engine.remote.Model, method="predict") as creator:
            session = await creator.create_session()
            with anyio.fail_after(60):
                assert await session.run(["a", "b"], {}) == ["predict:a", "predict:b"]
            await session.aclose()
            await session.aclose()  # twice: nothing more
            with pytest.raises(hookrun.SessionClosedError, match=r"predict, closed\): run\(\) after"):
                await session.run(["a"], {})
        async with engine.actor_creator(engine.remote.Model, offset=5) as creator:
            session = await creator.create_session()
            try:
                with anyio.fail_after(60):
                    assert await session.run(["y"], {"x": 1}) == [6]
            finally:
                await session.aclose()

    async def test_actor_user_error_propagates_and_is_not_retried(self, engine: Engine) -> None:
        """An exception in the actor method propagates as its own type; no re-creation."""
        hook = Creations()
        async with engine.actor_creator(engine.remote.Model) as creator:
            with anyio.fail_after(60), pytest.raises(ValueError, match="model cannot take 'nan'"):
                async with hookrun.MonitoredSession(creator, [hook], retry=FAST_RETRY) as sess:
                    await sess.run("y", {"fail": "nan"})
            assert creator.created == 1
        assert hook.created == 1

    async def test_constructor_error_surfaces_in_create_session(self, engine: Engine) -> None:
        """An actor whose constructor raises fails create_session, and is not retried."""
        async with engine.actor_creator(engine.remote.Broken) as creator:
            with anyio.fail_after(60), pytest.raises(engine.constructor_error, match="cannot build the model"):
                async with hookrun.MonitoredSession(creator, retry=FAST_RETRY):
                    pass
            assert creator.created == 0

    def test_creator_checks_the_step_method(self, engine: Engine) -> None:
        """A method the actor class does not have is refused when the creator is built."""
        with pytest.raises(AttributeError, match="Model has no method 'train'"):
            engine.actor_creator(engine.remote.Model, method="train")
