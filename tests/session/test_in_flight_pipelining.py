"""``iterate`` with steps in flight admits steps in its runners, also while the caller's
loop body runs: bounded (N in flight, at most 2 N waiting to be taken), in the context of
the latest ``__anext__``, a feed that cannot be taken raised in its place, and every wait
of an admission (an async feed, a lane another caller holds) ended with the iterator."""

from __future__ import annotations

import contextvars
from collections.abc import AsyncIterator, Iterator
from typing import Any

import anyio
import pytest

from hookrun import MonitoredSession, OutOfRangeError, SessionRunContext, SessionRunHook
from tests.session._in_flight_support import GatedCreator, Gates, Recorder, feeds, runners

pytestmark = pytest.mark.anyio

mood: contextvars.ContextVar[str] = contextvars.ContextVar("mood", default="unset")


async def settle() -> None:
    for _ in range(3):
        await anyio.wait_all_tasks_blocked()


def open_gates() -> Gates:
    gates = Gates()
    gates.open_all = True
    return gates


async def test_steps_are_admitted_while_the_loop_body_runs_up_to_two_n_waiting() -> None:
    """While the caller holds a result, the runners go on: N in flight, and no more once
    2 N results wait to be taken; taking them lets admission go on."""
    gates = open_gates()
    recorder = Recorder()
    async with MonitoredSession(GatedCreator(gates), [recorder], max_in_flight=2) as sess:
        with anyio.fail_after(10):
            steps = sess.iterate("y", feeds(20))
            assert await steps.__anext__() == 0
            await settle()
            assert gates.finished == [0, 1, 2, 3, 4]  # the one taken, and 2 N waiting
            assert recorder.steps("after") == [1, 2, 3, 4, 5]
            assert [await steps.__anext__() for _ in range(4)] == [1, 2, 3, 4]
            await settle()
            assert gates.finished == list(range(9))
            assert [r async for r in steps] == list(range(5, 20))
    assert recorder.steps("before") == list(range(20))


async def test_each_step_sees_the_context_of_the_latest_anext() -> None:
    """A step admitted while the loop body runs has the context of the ``__anext__`` before
    it; one admitted after the next ``__anext__`` sees what the body set meanwhile."""
    seen: list[str] = []

    class Mood(SessionRunHook):
        overlapping_steps = True

        def before_run(self, run_context: SessionRunContext) -> None:
            seen.append(mood.get())

    mood.set("before")
    async with MonitoredSession(GatedCreator(open_gates()), [Mood()], max_in_flight=2) as sess:
        with anyio.fail_after(10):
            steps = sess.iterate("y", feeds(8))
            assert await steps.__anext__() == 0
            await settle()  # steps 1..4 admitted meanwhile
            mood.set("after")
            assert [r async for r in steps] == list(range(1, 8))
    assert seen == ["before"] * 5 + ["after"] * 3


def _bad_item() -> Iterator[Any]:
    yield {"i": 0}
    yield {"i": 1}
    yield 7
    yield {"i": 3}


def _failing_feeds() -> Iterator[Any]:
    yield {"i": 0}
    yield {"i": 1}
    raise ValueError("the source broke")


@pytest.mark.parametrize(
    ("source", "error", "match"),
    [(_bad_item, TypeError, "feeds item 2 is int 7"), (_failing_feeds, ValueError, "the source broke")],
    ids=["bad item", "source error"],
)
async def test_a_feed_that_cannot_be_taken_is_raised_in_its_place(
    source: Any, error: type[Exception], match: str
) -> None:
    """The results before it are yielded, then its error is raised; no later feed is taken."""
    gates = open_gates()
    results: list[int] = []
    async with MonitoredSession(GatedCreator(gates), [Recorder()], max_in_flight=3) as sess:
        with anyio.fail_after(10):
            with pytest.raises(error, match=match):
                async for r in sess.iterate("y", source()):
                    results.append(r)
            await settle()
            assert runners() == 0
    assert results == [0, 1]
    assert gates.started == [0, 1]


async def test_cancelling_the_caller_ends_an_admission_waiting_for_an_async_feed() -> None:
    """A runner waiting for the next item of an async feed is cancelled with the iterator:
    nothing is left running and the session's lanes are free again."""
    gates = open_gates()
    taken: list[int] = []

    async def slow_feeds() -> AsyncIterator[dict[str, int]]:
        yield {"i": 0}
        await anyio.sleep_forever()
        yield {"i": 1}  # pragma: no cover - never reached

    async with MonitoredSession(GatedCreator(gates), [Recorder()], max_in_flight=2) as sess:
        with anyio.fail_after(10):
            async with anyio.create_task_group() as tg:

                async def consume() -> None:
                    async for r in sess.iterate("y", slow_feeds()):
                        taken.append(r)

                tg.start_soon(consume)
                await settle()
                assert runners() == 2  # step 0's, parked, and the admission waiting for the feed
                tg.cancel_scope.cancel()
            await settle()
            assert runners() == 0
            assert await sess.run("y", {"i": 5}) == 5
    assert taken == [0]


async def test_cancelling_the_caller_ends_an_admission_waiting_for_a_lane_another_caller_holds() -> None:
    """``run()`` callers hold every lane: the admission waits for one, and cancelling the
    iterating task ends that wait; the iterator ran nothing, the callers' steps complete."""
    gates = Gates()
    got: list[int] = []
    async with MonitoredSession(GatedCreator(gates), [Recorder()], max_in_flight=2) as sess:
        with anyio.fail_after(10):
            async with anyio.create_task_group() as tg:
                for i in (100, 101):

                    async def call(i: int = i) -> None:
                        got.append(await sess.run("y", {"i": i}))

                    tg.start_soon(call)
                await settle()
                steps = sess.iterate("y", feeds(3))
                with anyio.CancelScope() as waiting:
                    tg.start_soon(cancel_when_settled, waiting)
                    await steps.__anext__()
                assert waiting.cancelled_caught
                await settle()
                assert runners() == 0
                gates.open(100, 101)
    assert sorted(got) == [100, 101]
    assert sorted(gates.started) == [100, 101]


async def cancel_when_settled(scope: anyio.CancelScope) -> None:
    await settle()
    scope.cancel()


async def test_a_feed_taken_as_a_clean_stop_landed_is_not_run() -> None:
    """A clean-stop error ends admission while the next admission waits for its async feed:
    that wait gives up (the item is not taken, nor run) and iteration ends cleanly."""
    gates = Gates()
    arrived = anyio.Event()
    taken: list[int] = []

    async def feeds_after_a_wait() -> AsyncIterator[dict[str, int]]:
        yield {"i": 0}
        await arrived.wait()
        taken.append(1)
        yield {"i": 1}

    creator = GatedCreator(gates, errors={0: {0: OutOfRangeError("end of the stream")}})
    async with MonitoredSession(creator, [Recorder()], max_in_flight=2) as sess:
        with anyio.fail_after(10):
            results: list[int] = []
            async with anyio.create_task_group() as tg:

                async def consume() -> None:
                    results.extend([r async for r in sess.iterate("y", feeds_after_a_wait())])

                tg.start_soon(consume)
                await settle()  # step 0 runs; the next admission waits for its feed
                gates.open(0)
                await settle()  # step 0 met the end of its stream
                arrived.set()
            await settle()
            assert runners() == 0
    assert results == [] and taken == []
    assert gates.started == [0]


@pytest.mark.parametrize("refused_from", [0, 1], ids=["first runner", "later runners"])
async def test_a_runner_the_task_group_refuses(monkeypatch: pytest.MonkeyPatch, refused_from: int) -> None:
    """Starting a runner can fail (the session's task group is closing). Refused at the
    first ``__anext__``: it raises the refusal, and nothing is left admitting. Refused
    later, where an admission would start one more runner: that admission does not
    start, the steps admitted are yielded in order, and the next ``__anext__`` that
    starts an admission raises the refusal."""
    gates = open_gates()
    started = 0

    class Refusing:
        def __init__(self, task_group: Any) -> None:
            self.task_group = task_group

        def start_soon(self, fn: Any, *args: Any, name: object = None) -> None:
            nonlocal started
            if started >= refused_from:
                raise RuntimeError("This task group is not active")
            started += 1
            self.task_group.start_soon(fn, *args, name=name)

    async with MonitoredSession(GatedCreator(gates), [], max_in_flight=2) as sess:
        real = sess._task_group
        monkeypatch.setattr(sess, "_task_group", lambda: Refusing(real()))
        with anyio.fail_after(10):
            steps = sess.iterate("y", feeds(6))
            if refused_from == 0:
                with pytest.raises(RuntimeError, match="not active"):
                    await steps.__anext__()
                await steps.aclose()
                assert gates.started == []
            else:
                results: list[int] = []
                with pytest.raises(RuntimeError, match="not active"):
                    async for r in steps:
                        results.append(r)
                assert results == list(range(len(results))) and results
            await settle()
            assert runners() == 0
    assert started == refused_from


async def test_leaving_the_session_after_a_break_ends_an_admission_waiting_for_a_feed() -> None:
    """Breaking out of ``async for`` leaves the pipeline running: an admission may wait for
    an async feed that never comes. Leaving the session ends that wait."""
    gates = open_gates()
    results: list[int] = []

    async def stalling_feeds() -> AsyncIterator[dict[str, int]]:
        yield {"i": 0}
        yield {"i": 1}
        await anyio.sleep_forever()
        yield {"i": 2}  # pragma: no cover - never reached

    with anyio.fail_after(10):
        async with MonitoredSession(GatedCreator(gates), [Recorder()], max_in_flight=2) as sess:
            async for r in sess.iterate("y", stalling_feeds()):
                results.append(r)
                break
            await settle()
            assert runners() >= 1  # the admission waiting for item 2
        assert runners() == 0
    assert results == [0] and gates.finished == [0, 1]


async def test_closing_from_another_task_ends_the_iteration_of_the_task_waiting_in_it() -> None:
    """``aclose()`` from another task while the iterating task waits in ``__anext__`` (for
    an async feed that does not come): the wait is cancelled, the iterating task's loop
    ends as the feeds' end would, and no runner is left."""
    gates = open_gates()
    results: list[int] = []

    async def stalling_feeds() -> AsyncIterator[dict[str, int]]:
        yield {"i": 0}
        await anyio.sleep_forever()
        yield {"i": 1}  # pragma: no cover - never reached

    async with MonitoredSession(GatedCreator(gates), [Recorder()], max_in_flight=2) as sess:
        with anyio.fail_after(10):
            steps = sess.iterate("y", stalling_feeds())
            async with anyio.create_task_group() as tg:

                async def consume() -> None:
                    results.extend([r async for r in steps])

                tg.start_soon(consume)
                await settle()
                assert results == [] and runners() == 2  # step 0's, parked, and the wait for item 1
                await steps.aclose()
            await settle()
            assert runners() == 0
    assert results == [0]
