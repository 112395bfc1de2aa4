"""The ways out of ``iterate()`` with steps in flight that an attack on its promises found
wrong: a close of the iterator from another task, a cancelled block, a feed that cannot be
taken with ``ordered=False``, and a feed dict reused from one feed to the next."""

from __future__ import annotations

import collections
import contextlib
from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any

import anyio
import pytest

from hookrun import AbortedError, MonitoredSession, RetryPolicy, SessionRunHook, StepSession

from ._in_flight_support import GatedCreator, Gates, Recorder, feeds, runners

pytestmark = pytest.mark.anyio

NO_WAIT = RetryPolicy(initial_delay=0.0, max_delay=0.0, jitter=False)


@pytest.mark.parametrize("n", [1, 4])
async def test_aclose_of_the_iterator_from_another_task_ends_the_loop(n: int) -> None:
    """aclose() of the iterator from another task ends the iterating task's loop, as with
    one lane: no RuntimeError about a failed step, and leaving the block calls end."""
    gates = Gates()
    hook = Recorder()
    got: list[int] = []
    with anyio.fail_after(10):
        async with MonitoredSession(GatedCreator(gates), [hook], max_in_flight=n) as sess:
            iterator = sess.iterate("y", feeds(10))

            async def consume() -> None:
                async for value in iterator:
                    got.append(value)

            async with anyio.create_task_group() as tg:
                tg.start_soon(consume)
                gates.open(0)
                while len(gates.started) < min(n, 2) + (n == 1):
                    await anyio.wait_all_tasks_blocked()
                await iterator.aclose()
                gates.open(*range(10))  # with one lane the step running goes on to its end
            await anyio.wait_all_tasks_blocked()
            assert runners() == 0
    assert got[:1] == [0] and len(got) <= 2
    assert hook.ends == 1 and hook.exceptions == []


async def test_a_recoverable_error_as_the_iterator_closes_does_not_escape() -> None:
    """A run that raises a recoverable error while aclose() of its iterator lands: the
    loop ends, the error goes with the abandoned step, and hooks get end."""
    gates = Gates()
    hook = Recorder()
    creator = GatedCreator(gates, errors={0: {1: AbortedError("lost as the close landed")}})
    with anyio.fail_after(10):
        async with MonitoredSession(creator, [hook], max_in_flight=4, retry=NO_WAIT) as sess:
            iterator = sess.iterate("y", feeds(10))

            async def consume() -> None:
                async for _ in iterator:
                    pass

            async with anyio.create_task_group() as tg:
                tg.start_soon(consume)
                while len(gates.started) < 4:
                    await anyio.wait_all_tasks_blocked()
                closing = anyio.Event()

                async def close() -> None:
                    closing.set()
                    await iterator.aclose()

                tg.start_soon(close)
                await closing.wait()
                gates.open(1)  # raises AbortedError as the close lands
                gates.open(*range(10))
    assert hook.ends == 1 and hook.exceptions == []


async def test_a_cancelled_block_calls_on_exception_after_every_lane_hook_call_ended() -> None:
    """Cancelling the task iterating (in the loop body) and so the block: every hook call
    of every lane has ended before on_exception, and none starts after it."""
    events: list[str] = []

    class Slow(SessionRunHook):
        overlapping_steps = True

        async def before_run(self, run_context: Any) -> None:
            events.append(f"before {run_context.global_step}")
            try:
                await anyio.sleep(0.002)
            finally:
                events.append(f"before {run_context.global_step} ended")

        async def after_run(self, run_context: Any, run_values: Any) -> None:
            events.append(f"after {run_values.global_step}")
            try:
                await anyio.sleep(0.002)
            finally:
                events.append(f"after {run_values.global_step} ended")

        def on_exception(self, session: object, exception: BaseException) -> None:
            events.append("on_exception")

    async def step(feed: dict[str, int]) -> dict[str, int]:
        await anyio.sleep(0.003)
        return {"y": feed["i"]}

    with anyio.move_on_after(0.05):
        async with MonitoredSession(lambda: StepSession(step), [Slow()], max_in_flight=4) as sess:
            async for _ in sess.iterate("y", ({"i": i} for i in range(10_000))):
                await anyio.sleep(0.004)  # the loop body, where the cancellation lands
    assert "on_exception" in events
    after = events[events.index("on_exception") + 1:]
    assert after == [], f"hook calls after on_exception: {after}"
    started = [e for e in events if not e.endswith("ended") and e != "on_exception"]
    assert all(f"{e} ended" in events for e in started)


async def test_unordered_a_feed_that_cannot_be_taken_comes_after_the_results_before_it() -> None:
    """iterate(ordered=False): the error of a feed that cannot be taken is raised after the
    results of every feed before it."""

    def bad_feeds() -> Iterator[dict[str, int]]:
        yield from feeds(6)
        raise ValueError("feed 6 is broken")

    for _ in range(8):
        gates = Gates()
        gates.open_all = True
        got: list[int] = []
        with anyio.fail_after(10):
            async with MonitoredSession(GatedCreator(gates), max_in_flight=4) as sess:
                with pytest.raises(ValueError, match="feed 6 is broken"):
                    async for value in sess.iterate("y", bad_feeds(), ordered=False):
                        got.append(value)
        assert sorted(got) == list(range(6))


@pytest.mark.parametrize("n", [1, 4])
@pytest.mark.parametrize("kind", ["sync", "async"])
@pytest.mark.parametrize("cls", [dict, collections.OrderedDict, lambda: collections.defaultdict(int)])
async def test_a_feed_dict_reused_and_changed_in_place_gives_each_step_its_own_feed(
    n: int, kind: str, cls: Callable[[], dict[str, int]]
) -> None:
    """A feeds generator that yields one dict object (of any dict class) changed in place:
    every step runs on the feed it was given when it was admitted, of that class (iterate
    takes a copy of each feed)."""
    kinds: set[type] = set()

    def same_dict() -> Iterator[dict[str, int]]:
        feed: dict[str, int] = cls()
        for i in range(16):
            feed["i"] = i
            yield feed

    async def same_dict_async() -> AsyncIterator[dict[str, int]]:
        for feed in same_dict():
            yield feed

    async def step(feed: dict[str, int]) -> dict[str, int]:
        kinds.add(type(feed))
        i = feed["i"]
        await anyio.sleep(0.001 * (i % 3))
        assert feed["i"] == i, "the feed changed under the step"
        return {"y": i}

    source = same_dict() if kind == "sync" else same_dict_async()
    with anyio.fail_after(10):
        async with MonitoredSession(lambda: StepSession(step), max_in_flight=n) as sess:
            assert [y async for y in sess.iterate("y", source)] == list(range(16))
    assert kinds == {type(cls())}


async def settle() -> None:
    for _ in range(3):
        await anyio.wait_all_tasks_blocked()


@pytest.mark.parametrize(("ordered", "how"), [(True, "cancel"), (False, "cancel"), (True, "deadline"), (True, "group")])
async def test_cancelled_in_the_loop_body_with_the_session_open_cancels_the_runs_and_admits_none(
    ordered: bool, how: str
) -> None:
    """Cancelling the iterating task while its loop body runs (its scope cancelled, its
    deadline passed, or its task group cancelled from another task), the session staying
    open: the runs in flight are cancelled (none ends), no run starts after, no runner is
    left, the step counter holds only the step whose after_run ran, and the session goes
    on (a run, then a new iterate)."""
    gates, hook = Gates(), Recorder()
    got: list[int] = []

    async def consume(scope: anyio.CancelScope, in_body: anyio.Event) -> None:
        async for value in sess.iterate("y", feeds(20), ordered=ordered):
            got.append(value)
            while len(gates.started) < 5:  # step 0 done, 4 runs in flight
                await anyio.wait_all_tasks_blocked()
            await settle()
            if how == "cancel":
                scope.cancel()
            elif how == "deadline":
                scope.deadline = anyio.current_time()
            in_body.set()
            await anyio.sleep_forever()  # cancelled here, in the loop body

    with anyio.fail_after(10):
        async with MonitoredSession(GatedCreator(gates), [hook], max_in_flight=4) as sess:
            gates.open(0)
            if how == "group":
                async with anyio.create_task_group() as tg:
                    in_body = anyio.Event()
                    tg.start_soon(consume, tg.cancel_scope, in_body)
                    await in_body.wait()
                    tg.cancel_scope.cancel()
            else:
                with anyio.CancelScope() as scope:
                    await consume(scope, anyio.Event())
            started, calls = list(gates.started), list(hook.calls)
            gates.open(*range(20))
            await settle()
            assert got == [0]
            assert gates.started == started, "a run started after the loop body was cancelled"
            assert gates.finished == [0], "a run in flight went on to its end"
            assert hook.calls == calls, "a hook phase started after the loop body was cancelled"
            assert runners() == 0
            assert await sess.global_step() == 1
            gates.open(50, 51, 52)
            assert await sess.run("y", {"i": 50}) == 50
            assert [y async for y in sess.iterate("y", [{"i": 51}, {"i": 52}])] == [51, 52]
            await settle()
            assert runners() == 0
            assert await sess.global_step() == 4
    after = hook.steps("after")
    assert after == sorted(after) and len(after) == len(set(after)) == 4
    assert hook.ends == 1 and hook.exceptions == []


async def test_cancelled_in_the_loop_body_ends_an_admission_waiting_for_a_feed() -> None:
    """An admission waiting for an async feed as the loop body is cancelled: the wait ends
    (no feed is taken after), and no runner is left, the session staying open."""
    gates = Gates()
    gates.open_all = True
    taken: list[int] = []
    release = anyio.Event()

    async def stalling_feeds() -> AsyncIterator[dict[str, int]]:
        for i in range(10):
            if i == 2:
                await release.wait()
            taken.append(i)
            yield {"i": i}

    with anyio.fail_after(10):
        async with MonitoredSession(GatedCreator(gates), max_in_flight=2) as sess:
            with anyio.CancelScope() as scope:
                async for _ in sess.iterate("y", stalling_feeds()):
                    await settle()  # the admission waits for feed 2
                    scope.cancel()
                    await anyio.sleep_forever()
            release.set()
            await settle()
            assert taken == [0, 1]
            assert runners() == 0
            assert await sess.run("y", {"i": 7}) == 7


async def test_a_held_iterator_is_cancelled_with_aclosing() -> None:
    """An iterator kept in a variable outlives its loop: ``contextlib.aclosing`` cancels its
    runs in flight when the loop body is cancelled."""
    gates = Gates()
    with anyio.fail_after(10):
        async with MonitoredSession(GatedCreator(gates), max_in_flight=4) as sess:
            gates.open(0)
            steps = sess.iterate("y", feeds(20))
            with anyio.CancelScope() as scope:
                async with contextlib.aclosing(steps):
                    async for _ in steps:
                        while len(gates.started) < 5:
                            await anyio.wait_all_tasks_blocked()
                        scope.cancel()
                        await anyio.sleep_forever()
            started = list(gates.started)
            gates.open(*range(20))
            await settle()
            assert gates.started == started and gates.finished == [0]
            assert runners() == 0


async def test_after_a_break_the_runners_leave_once_the_steps_in_flight_ended() -> None:
    """A break leaves the steps in flight to finish; once they did, no runner of the
    iterator is left parked in the open session, and the session goes on."""
    gates = Gates()
    gates.open_all = True
    with anyio.fail_after(10):
        async with MonitoredSession(GatedCreator(gates), max_in_flight=4) as sess:
            async for _ in sess.iterate("y", feeds(20)):
                break
            await settle()
            assert runners() == 0
            assert await sess.run("y", {"i": 30}) == 30
