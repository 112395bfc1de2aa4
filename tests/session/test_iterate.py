"""MonitoredSession.iterate: one step per feed, ending cleanly on exhausted input or a stop."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from typing import Any

import anyio
import pytest

import hookrun
from hookrun.hooks import StopAtStepHook
from hookrun.testing import RecordingHook, ScriptedCreator

pytestmark = pytest.mark.anyio


def doubling_creator(**kwargs: Any) -> ScriptedCreator:
    """Sessions answering fetch "y" with twice the fed "x" (and "x" with the feed)."""
    return ScriptedCreator({"y": lambda step, feed: 2 * feed["x"]}, **kwargs)


class CountingFeeds:
    """A sync iterable of feed dicts that counts how many items were taken."""

    def __init__(self, n: int) -> None:
        self.n = n
        self.taken = 0

    def __iter__(self) -> Iterator[dict[str, int]]:
        for x in range(self.n):
            self.taken += 1
            yield {"x": x}


async def test_one_step_per_sync_feed_then_a_clean_end() -> None:
    recorder = RecordingHook()
    creator = doubling_creator()
    with anyio.fail_after(5):
        async with hookrun.MonitoredSession(creator, [recorder]) as sess:
            results = [y async for y in sess.iterate("y", [{"x": 1}, {"x": 2}, {"x": 3}])]
            assert not sess.should_stop()  # the feeds ending is not a stop request
            assert await sess.run("y", {"x": 10}) == 20  # the session is still usable
    assert results == [2, 4, 6]
    assert [feed for _, feed, _ in creator.sessions[0].runs] == [{"x": 1}, {"x": 2}, {"x": 3}, {"x": 10}]
    assert recorder.count("after_run") == 4 and recorder.count("end") == 1


async def test_async_iterable_feeds_and_nested_fetches() -> None:
    async def feeds() -> AsyncIterator[dict[str, int]]:
        for x in range(3):
            await anyio.lowlevel.checkpoint()
            yield {"x": x}

    with anyio.fail_after(5):
        async with hookrun.MonitoredSession(doubling_creator()) as sess:
            results = [r async for r in sess.iterate({"double": "y", "same": ["x"]}, feeds())]
    assert results == [{"double": 2 * x, "same": [x]} for x in range(3)]


async def test_memory_stream_feeds_end_when_the_sender_closes() -> None:
    send, receive = anyio.create_memory_object_stream[dict[str, int]](4)
    async with send:
        for x in range(4):
            send.send_nowait({"x": x})
    with anyio.fail_after(5):
        async with receive, hookrun.MonitoredSession(doubling_creator()) as sess:
            assert [y async for y in sess.iterate("y", receive)] == [0, 2, 4, 6]


async def test_no_feeds_runs_until_a_hook_requests_stop() -> None:
    creator = ScriptedCreator({"n": lambda step, feed: step})
    with anyio.fail_after(5):
        async with hookrun.MonitoredSession(creator, [StopAtStepHook(last_step=4)]) as sess:
            results = [n async for n in sess.iterate("n")]
            assert sess.should_stop()
    assert results == [0, 1, 2, 3]
    assert creator.sessions[0].runs[0][1] == {}  # nothing fed


async def test_a_stop_takes_no_further_feed() -> None:
    """Items after the stop stay in the caller's iterable: none is taken and dropped."""
    feeds = CountingFeeds(10)
    with anyio.fail_after(5):
        async with hookrun.MonitoredSession(doubling_creator(), [StopAtStepHook(last_step=3)]) as sess:
            assert [y async for y in sess.iterate("y", feeds)] == [0, 2, 4]
    assert feeds.taken == 3


async def test_none_items_feed_nothing() -> None:
    creator = ScriptedCreator({"n": lambda step, feed: len(feed)})
    with anyio.fail_after(5):
        async with hookrun.MonitoredSession(creator) as sess:
            assert [n async for n in sess.iterate("n", [None, {"a": 1}, None])] == [0, 1, 0]


async def test_end_of_input_inside_a_step_ends_iteration_and_stops_the_session() -> None:
    recorder = RecordingHook()
    source = iter([1, 2])

    async def step(feed: Any) -> dict[str, int]:
        try:
            return {"v": next(source)}
        except StopIteration:
            raise anyio.EndOfStream from None

    async def create() -> hookrun.StepSession:
        return hookrun.StepSession(step)

    after_loop = False
    with anyio.fail_after(5):
        async with hookrun.MonitoredSession(create, [recorder]) as sess:
            values = [v async for v in sess.iterate("v")]
            after_loop = True  # the loop ended normally: code after it runs
            assert sess.should_stop()
            assert [v async for v in sess.iterate("v")] == []
            with pytest.raises(hookrun.RunAfterStopError):
                await sess.run("v")
    assert values == [1, 2] and after_loop
    assert recorder.count("end") == 1


async def test_out_of_range_error_also_ends_iteration() -> None:
    creator = ScriptedCreator({"y": 1}, session_errors={0: {2: hookrun.OutOfRangeError("done")}})
    with anyio.fail_after(5):
        async with hookrun.MonitoredSession(creator) as sess:
            assert [y async for y in sess.iterate("y")] == [1, 1]
            assert sess.should_stop()


async def test_a_recovered_step_reruns_the_same_feed() -> None:
    """A lost worker loses no feed: the failed step is re-run with its own feed."""
    creator = doubling_creator(session_errors={0: {1: hookrun.UnavailableError("lost")}})
    policy = hookrun.RetryPolicy(initial_delay=0.0, jitter=False)
    with anyio.fail_after(5):
        async with hookrun.MonitoredSession(creator, retry=policy) as sess:
            results = [y async for y in sess.iterate("y", [{"x": x} for x in range(4)])]
    assert results == [0, 2, 4, 6]
    assert len(creator.sessions) == 2
    assert [feed["x"] for _, feed, _ in creator.sessions[1].runs] == [1, 2, 3]


async def test_other_errors_propagate_and_skip_end() -> None:
    recorder = RecordingHook()
    creator = doubling_creator(session_errors={0: {1: ValueError("bad batch")}})
    with anyio.fail_after(5), pytest.raises(ValueError, match="bad batch"):
        async with hookrun.MonitoredSession(creator, [recorder]) as sess:
            async for _ in sess.iterate("y", [{"x": 0}, {"x": 1}, {"x": 2}]):
                pass
    assert recorder.count("end") == 0
    assert creator.sessions[0].closed == 1


async def test_breaking_out_leaves_the_session_usable() -> None:
    feeds = CountingFeeds(10)
    with anyio.fail_after(5):
        async with hookrun.MonitoredSession(doubling_creator()) as sess:
            steps = sess.iterate("y", feeds)
            async for y in steps:
                if y == 4:
                    break
            assert await anext(steps) == 6  # the same iterator carries on where it was
            assert await sess.run("y", {"x": 50}) == 100
    assert feeds.taken == 4


async def test_cancelling_a_step_of_the_loop_closes_everything() -> None:
    creator = ScriptedCreator({"y": 1}, hang_at={0: [2]})
    with anyio.fail_after(5):
        with anyio.move_on_after(0.05) as scope:
            async with hookrun.MonitoredSession(creator) as sess:
                async for _ in sess.iterate("y"):
                    pass
    assert scope.cancelled_caught
    assert creator.sessions[0].steps == 3 and creator.sessions[0].closed == 1


async def test_a_second_task_stepping_the_same_iterator_is_refused_before_taking_a_feed() -> None:
    feeds = CountingFeeds(10)
    entered, release = anyio.Event(), anyio.Event()

    async def step(feed: Any) -> dict[str, int]:
        entered.set()
        await release.wait()
        return {"y": feed["x"]}

    async def create() -> hookrun.StepSession:
        return hookrun.StepSession(step)

    with anyio.fail_after(5):
        async with hookrun.MonitoredSession(create) as sess:
            steps = sess.iterate("y", feeds)
            async with anyio.create_task_group() as tg:
                tg.start_soon(anext, steps)
                await entered.wait()
                with pytest.raises(RuntimeError, match="another task is already running a step of this iterator"):
                    await anext(steps)
                assert feeds.taken == 1
                release.set()
            assert await anext(steps) == 1  # the next feed, none skipped
    assert feeds.taken == 2


@pytest.mark.parametrize(
    ("feeds", "message"),
    [
        ({"x": 1}, r"feeds is a single mapping; pass an iterable of feed dicts, for example \[\{'x': 1\}\]"),
        (3, "feeds must be an iterable or async iterable of feed dicts, or None; got int 3"),
        ("xy", "feeds must be an iterable .* got str 'xy'"),
    ],
)
async def test_bad_feeds_are_refused_by_name(feeds: object, message: str) -> None:
    async with hookrun.MonitoredSession(doubling_creator()) as sess:
        with pytest.raises(TypeError, match=message):
            sess.iterate("y", feeds)


async def test_a_feed_item_that_is_not_a_mapping_is_named() -> None:
    async with hookrun.MonitoredSession(doubling_creator()) as sess:
        steps = sess.iterate("y", [{"x": 1}, [("x", 2)]])
        assert await anext(steps) == 2
        with pytest.raises(TypeError, match=r"feeds item 1 is list \[\('x', 2\)\]; each item must be a feed dict"):
            await anext(steps)
        with pytest.raises(StopAsyncIteration):
            await anext(steps)


async def test_iterate_outside_or_after_the_block_is_refused() -> None:
    sess = hookrun.MonitoredSession(doubling_creator())
    with pytest.raises(hookrun.SessionClosedError, match=r"iterate\(\) called outside 'async with'"):
        sess.iterate("y")
    async with sess:
        pass
    with pytest.raises(hookrun.SessionClosedError, match=r"iterate\(\) called after the session closed"):
        sess.iterate("y")


async def test_singular_session_iterates_too() -> None:
    async with hookrun.SingularMonitoredSession(doubling_creator()) as sess:
        steps = sess.iterate("y", [{"x": 4}])
        assert repr(steps) == "StepIterator(running, 0 steps)"
        assert [y async for y in steps] == [8]
        assert repr(steps) == "StepIterator(ended, 1 steps)"


def _doubling_step_session() -> hookrun.StepSession:
    return hookrun.StepSession(lambda feeds: {"y": 2 * feeds.get("x", 0)})


async def test_feed_dicts_passed_as_the_fetches_are_explained() -> None:
    """iterate([{"x": 1}, ...]) fails at its first step with a note: the fetches come first, the feeds second."""
    async with hookrun.MonitoredSession(_doubling_step_session) as sess:
        with anyio.fail_after(5), pytest.raises(KeyError, match="no value for fetch 1") as caught:
            async for _ in sess.iterate([{"x": 1}, {"x": 2}]):
                pass  # pragma: no cover - the first step fails
        assert caught.value.__notes__[-1].startswith(
            "hookrun: iterate(fetches, feeds) takes what each step fetches first and the feed dicts second"
        )
        assert "iterate(feeds=[...])" in caught.value.__notes__[-1]
        assert [r async for r in sess.iterate("y", [{"x": 1}, {"x": 2}])] == [2, 4]  # the right way


async def test_an_iterator_of_feeds_passed_as_the_fetches_is_refused() -> None:
    """A generator as the fetches (never a fetch structure) is a TypeError at iterate(), naming the order."""
    async with hookrun.MonitoredSession(_doubling_step_session) as sess:
        with pytest.raises(TypeError, match=r"^iterate\(\): the fetches are generator .*the feed dicts come second"):
            sess.iterate(feed for feed in [{"x": 1}])


async def test_a_fetch_structure_of_dicts_still_works() -> None:
    """A list of dicts is also a valid fetch structure: with feeds it is fetched, no note is added."""
    async with hookrun.MonitoredSession(_doubling_step_session) as sess:
        assert [r async for r in sess.iterate([{"a": "y"}], [{"x": 3}])] == [[{"a": 6}]]
