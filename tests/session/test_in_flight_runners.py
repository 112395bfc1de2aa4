"""The tasks that run the steps ``iterate`` admits with steps in flight: parked runners,
reused from step to step, each step in a fresh copy of the iterating task's context, the
raw runs starting in feed order, and none left once the iterator ended."""

from __future__ import annotations

import contextvars
from collections.abc import AsyncIterator, Hashable, Mapping, Sequence
from typing import Any

import anyio
import anyio.lowlevel
import pytest

from hookrun import (
    MonitoredSession,
    RetryPolicy,
    RunMetadata,
    RunOptions,
    SessionRunContext,
    SessionRunHook,
    SessionRunValues,
)
from tests.session._in_flight_support import (
    RUNNER,
    FailsOnce,
    GatedCreator,
    Gates,
    Recorder,
    WaitsOnce,
    feeds,
    runners,
)

pytestmark = pytest.mark.anyio

seen_var: contextvars.ContextVar[str] = contextvars.ContextVar("seen_var", default="unset")

NO_WAIT = RetryPolicy(initial_delay=0, jitter=False)


async def test_raw_runs_start_in_feed_order_without_hooks() -> None:
    """With no hook to show the order, the raw runs still start in feed order (trio starts the
    tasks woken together in either order)."""
    gates = Gates()
    gates.open_all = True
    async with MonitoredSession(GatedCreator(gates), max_in_flight=4) as sess:
        with anyio.fail_after(10):
            assert [r async for r in sess.iterate("y", feeds(60))] == list(range(60))
    assert gates.started == list(range(60))


async def test_a_step_starts_its_raw_run_before_the_next_step_is_admitted() -> None:
    """Each step admitted starts its raw run before ``before_run`` of the next one: steps
    admitted back to back do not wait for the iterating task to admit the rest first."""
    gates = Gates()
    gates.open_all = True
    started_before: list[int] = []

    class Watch(SessionRunHook):
        overlapping_steps = True

        def before_run(self, run_context: SessionRunContext) -> None:
            started_before.append(len(gates.started))

    async with MonitoredSession(GatedCreator(gates), [Watch()], max_in_flight=4) as sess:
        with anyio.fail_after(10):
            assert [r async for r in sess.iterate("y", feeds(40))] == list(range(40))
    assert started_before == list(range(40))


class _ContextSession:
    """Records the variable each run sees, then sets it (in the step's own context)."""

    def __init__(self) -> None:
        self.seen: list[str] = []

    async def run(
        self, fetches: Sequence[Hashable], feed_dict: Mapping[Any, Any], options: RunOptions, run_metadata: RunMetadata
    ) -> list[Any]:
        self.seen.append(seen_var.get())
        seen_var.set(f"set by step {feed_dict['i']}")
        await anyio.lowlevel.checkpoint()
        return [feed_dict["i"] for _ in fetches]


async def test_each_step_runs_in_a_copy_of_the_iterating_tasks_context() -> None:
    """A runner reused by later steps runs each in a fresh copy of the iterating task's
    context, as a task spawned for it would: what a step set is not seen by the next."""
    raw = _ContextSession()
    seen_var.set("the caller's")
    async with MonitoredSession(lambda: raw, [Recorder()], max_in_flight=2) as sess:
        with anyio.fail_after(10):
            assert [r async for r in sess.iterate("y", feeds(20))] == list(range(20))
    assert raw.seen == ["the caller's"] * 20
    assert seen_var.get() == "the caller's"


async def test_no_runner_is_left_once_the_iterator_ended() -> None:
    """Runners are reused while the iterator runs (at most one per step in flight) and leave
    when it ends: exhausted, closed, or failed."""
    gates = Gates()
    gates.open_all = True
    async with MonitoredSession(GatedCreator(gates), [Recorder()], max_in_flight=3) as sess:
        with anyio.fail_after(10):
            most = 0
            async for _ in sess.iterate("y", feeds(30)):
                most = max(most, runners())
            assert 1 <= most <= 3
            await anyio.wait_all_tasks_blocked()
            assert runners() == 0
            steps = sess.iterate("y", feeds(30))
            assert await steps.__anext__() == 0
            await steps.aclose()
            await anyio.wait_all_tasks_blocked()
            assert runners() == 0


async def test_a_runner_whose_step_ended_takes_the_next_admission_instead_of_a_new_runner() -> None:
    """Steps whose runs end out of order wait for their ``after_run`` turn, and a slow loop
    body fills the window: the jobs whose step ended meanwhile park and are handed the next
    admissions, so no more runners are started than steps were admitted and not ended (at
    most ``2 N``) plus the admission, however long the stream."""
    gates = Gates()
    n, count = 3, 60
    started: set[object] = set()

    async def open_gates() -> None:
        for first in range(0, count, n):  # each group of n runs ends in reverse order
            for i in reversed(range(first, first + n)):
                await anyio.sleep(0.001)
                gates.open(i)

    async with MonitoredSession(GatedCreator(gates), [Recorder()], max_in_flight=n) as sess:
        with anyio.fail_after(10):
            async with anyio.create_task_group() as tg:
                tg.start_soon(open_gates)
                got = []
                async for r in sess.iterate("y", feeds(count)):
                    started.update(task.id for task in anyio.get_running_tasks() if task.name == RUNNER)
                    if r % 7 == 0:  # a slow loop body: the window fills, the jobs park
                        for _ in range(5):
                            await anyio.lowlevel.checkpoint()
                    got.append(r)
            assert got == list(range(count))
            await anyio.wait_all_tasks_blocked()
            assert runners() == 0
    assert 1 <= len(started) <= 2 * n + 1


@pytest.mark.parametrize("rescoped", [False, True], ids=["one scope", "after a recovery under a new scope"])
async def test_a_fatal_error_late_in_a_stream_cancels_the_steps_beside_it(rescoped: bool) -> None:
    """A runner runs many steps one after another under one cancel scope: a step that
    fails for good after thirty others (and, in the second case, after a hook failure
    cancelled an earlier step's scope, so that its runner went on under a new one) still
    cancels exactly the steps in flight beside it, and nothing of the iterator is left."""
    gates = Gates()
    gates.open(*range(30))  # 30 fails once 31 and 32 wait at their gates beside it
    fatal = ValueError("bad item 30")
    creator = GatedCreator(gates, errors={n: {30: fatal} for n in range(4)})
    hooks: list[SessionRunHook] = [Recorder()]
    if rescoped:
        hooks += [WaitsOnce("before_run"), FailsOnce("before_run")]
    got: list[int] = []

    async def fail_beside_two() -> None:
        while not {31, 32} <= set(gates.started):
            await anyio.lowlevel.checkpoint()
        gates.open(30)

    async with MonitoredSession(creator, hooks, retry=NO_WAIT, max_in_flight=3) as sess:
        with anyio.fail_after(10):
            async with anyio.create_task_group() as tg:
                tg.start_soon(fail_beside_two)
                with pytest.raises(ValueError) as raised:
                    async for y in sess.iterate("y", feeds(40)):
                        got.append(y)
        assert raised.value is fatal
        await anyio.wait_all_tasks_blocked()
        assert runners() == 0
    assert got == list(range(30))
    assert sorted(gates.started)[-3:] == [30, 31, 32]
    assert 31 not in gates.finished and 32 not in gates.finished
    assert len(creator.sessions) == (4 if rescoped else 3)


class _Race:
    """Another caller's run (``{"i": -1}``) waits until step 1's ``after_run`` waits, then
    fails for good; every other run waits a millisecond."""

    def __init__(self) -> None:
        self.in_before_run = anyio.Event()
        self.in_after_run = anyio.Event()

    async def run(
        self, fetches: Sequence[Hashable], feed_dict: Mapping[Any, Any], options: RunOptions, run_metadata: RunMetadata
    ) -> list[Any]:
        if feed_dict["i"] == -1:
            await self.in_after_run.wait()
            raise ValueError("the other caller's bad item")
        await anyio.sleep(0.001)
        return [feed_dict["i"] for _ in fetches]


class _SwallowsInAfterRun(SessionRunHook):
    """Holds step 1's ``before_run`` until every other task waits (the other caller for the
    phase lock, holding the other lane), then swallows the cancellation of step 1's
    ``after_run`` (a misbehaving hook)."""

    overlapping_steps = True

    def __init__(self, race: _Race) -> None:
        self.race = race
        self.swallowed = False

    async def before_run(self, run_context: SessionRunContext) -> None:
        if run_context.global_step == 0:
            self.race.in_before_run.set()
            await anyio.wait_all_tasks_blocked()

    async def after_run(self, run_context: SessionRunContext, run_values: SessionRunValues) -> None:
        if run_values.global_step == 1:
            self.race.in_after_run.set()
            try:
                await anyio.sleep(10)
            except anyio.get_cancelled_exc_class():
                self.swallowed = True


async def test_a_step_that_swallowed_its_cancellation_leaves_the_next_steps_a_new_scope() -> None:
    """Another caller's fatal error cancels the ``iterate`` step in flight beside it, whose
    ``after_run`` swallows the cancellation, so that the step ends whole: its results are
    yielded, and the steps its runner admits next run under a new cancel scope, not the
    cancelled one."""
    race = _Race()
    hook = _SwallowsInAfterRun(race)
    async with MonitoredSession(lambda: race, [hook], max_in_flight=2) as sess:
        with anyio.fail_after(10):
            async with anyio.create_task_group() as tg:

                failed = anyio.Event()

                async def other_caller() -> None:
                    await race.in_before_run.wait()  # step 1 is being admitted: this one is step 2
                    with pytest.raises(ValueError, match="other caller"):
                        await sess.run("y", {"i": -1})
                    failed.set()

                async def later_feeds() -> AsyncIterator[dict[str, int]]:
                    # Step 1's run frees its lane at once: the next feed comes after the
                    # failure, so that step 1 is the only iterate step it cancels.
                    for i, feed in enumerate(feeds(6)):
                        if i == 1:
                            await failed.wait()
                        yield feed

                tg.start_soon(other_caller)
                assert [r async for r in sess.iterate("y", later_feeds())] == list(range(6))
    assert hook.swallowed
