"""With one lane, ``iterate()`` waits for each item of an async feed under a cancel scope
around the feed's whole ``__anext__``, which a stop or a close from another task cancels:
fast feeds, waiting ones, feeds that alternate, feeds that open scopes of their own
around their waits (a shield, a task group: the stop reaches the feed from outside them,
as a cancellation of the loop would), errors, base exceptions and context variables."""

from __future__ import annotations

import contextlib
import contextvars
from collections.abc import AsyncGenerator, Generator, Mapping
from typing import Any

import anyio
import anyio.lowlevel
import pytest

from hookrun import Coordinator, MonitoredSession, StepSession

pytestmark = pytest.mark.anyio

LIMIT = 3.0

var: contextvars.ContextVar[int] = contextvars.ContextVar("var", default=-1)


async def _echo(feeds: Mapping[str, Any]) -> dict[str, Any]:
    return {"y": feeds.get("x")}


class CoordOf:
    """Keeps the session's coordinator."""

    def __init__(self) -> None:
        self.coord: Coordinator | None = None

    def after_create_session(self, session: Any, coord: Coordinator) -> None:
        self.coord = coord


def _counting_scopes(sess: MonitoredSession) -> list[int]:
    """Count the cancel scopes the session's dispatcher makes from now on."""
    count = [0]
    dispatcher = sess._dispatcher
    new_scope = dispatcher.new_scope

    def counted() -> Any:
        count[0] += 1
        return new_scope()

    dispatcher.new_scope = counted  # type: ignore[method-assign]
    return count


async def test_a_feed_that_alternates_runs_every_item_in_order() -> None:
    """Items that come at once and items that wait, alternately (with and without scopes
    of the feed's own around the wait): every item runs in order, and a scope is entered
    for the waits only."""

    async def feeds() -> AsyncGenerator[dict[str, int], None]:
        for x in range(8):
            if x % 4 == 1:
                await anyio.lowlevel.checkpoint()
            elif x % 4 == 3:
                with anyio.fail_after(LIMIT):
                    await anyio.lowlevel.checkpoint()
            yield {"x": x}

    async with MonitoredSession(lambda: StepSession(_echo)) as sess:
        scopes = _counting_scopes(sess)
        with anyio.fail_after(LIMIT):
            assert [y async for y in sess.iterate("y", feeds())] == list(range(8))
        assert 4 <= scopes[0] < 8 + 4  # only the waits: none for items 0, 2, 4, 6
        assert sess._lifetime.stop_waits == []


class Waiting:
    """An async generator of feeds that yields ``{"x": 1}``, then waits for ever (``how``:
    sleeping, which opens a scope of trio's before it waits; inside a ``move_on_after``
    of its own; on an event): ``asked`` is set once the second item is asked for."""

    def __init__(self, how: str) -> None:
        self.how = how
        self.asked = anyio.Event()
        self.finished = False

    async def feeds(self) -> AsyncGenerator[dict[str, int], None]:
        try:
            yield {"x": 1}
            self.asked.set()
            if self.how == "sleep":
                await anyio.sleep_forever()
            elif self.how == "own_scope":
                with anyio.move_on_after(3600):
                    await anyio.sleep_forever()
            else:
                await anyio.Event().wait()
            yield {"x": 2}  # pragma: no cover - never reached
        finally:
            self.finished = True


@pytest.mark.parametrize("how", ["sleep", "own_scope", "event"])
@pytest.mark.parametrize("stop", ["coordinator", "close", "iterator"])
async def test_a_stop_from_another_task_ends_a_feed_waiting_in_any_way(how: str, stop: str) -> None:
    """The feed waits for ever for its second item, however it waits (with scopes of its own
    opened before it waits, too); the coordinator's stop, the session's close or the
    iterator's ``aclose()`` from another task ends the loop at once and the feed is over."""
    source = Waiting(how)
    watch = CoordOf()
    results: list[Any] = []
    async with MonitoredSession(lambda: StepSession(_echo), [watch]) as sess:
        iterator = sess.iterate("y", source.feeds())

        async def stopper() -> None:
            await source.asked.wait()
            await anyio.wait_all_tasks_blocked()
            if stop == "coordinator":
                assert watch.coord is not None
                watch.coord.request_stop()
            elif stop == "close":
                await sess.aclose()
            else:
                await iterator.aclose()

        ended = False
        with anyio.fail_after(LIMIT):
            async with anyio.create_task_group() as tg:
                tg.start_soon(stopper)
                async for y in iterator:
                    results.append(y)
                ended = True  # the loop ended as it ends on a stop (a cancellation out of it would
                # be swallowed by the task group, which it cancels)
        assert ended and results == [1] and source.finished
        assert sess.should_stop() is (stop != "iterator")
        assert sess._lifetime.stop_waits == []


async def test_a_stop_asked_by_the_feed_before_it_waits_ends_the_loop() -> None:
    """The feed asks the coordinator to stop, then waits for ever: the wait is cancelled
    at once, as when the stop comes from another task."""
    watch = CoordOf()
    finished = False

    async def feeds() -> AsyncGenerator[dict[str, int], None]:
        nonlocal finished
        try:
            yield {"x": 1}
            assert watch.coord is not None
            watch.coord.request_stop()
            await anyio.sleep_forever()
            yield {"x": 2}  # pragma: no cover - never reached
        finally:
            finished = True

    async with MonitoredSession(lambda: StepSession(_echo), [watch]) as sess:
        with anyio.fail_after(LIMIT):
            assert [y async for y in sess.iterate("y", feeds())] == [1]
        assert finished and sess.should_stop()


async def test_an_outer_cancellation_of_a_waiting_feed_is_not_taken_for_a_stop() -> None:
    """The iterating task's own scope is cancelled while the feed waits: the cancellation
    goes on out of the loop (the loop does not just end), and the session did not stop."""
    source = Waiting("sleep")
    results: list[Any] = []
    async with MonitoredSession(lambda: StepSession(_echo)) as sess:
        with anyio.fail_after(LIMIT):
            with anyio.CancelScope() as outer:
                async with anyio.create_task_group() as tg:

                    async def cancel() -> None:
                        await source.asked.wait()
                        outer.cancel()

                    tg.start_soon(cancel)
                    async for y in sess.iterate("y", source.feeds()):
                        results.append(y)
                    pytest.fail("the loop ended instead of being cancelled")  # pragma: no cover
        assert outer.cancelled_caught and results == [1] and source.finished
        assert not sess.should_stop()


async def test_a_stop_that_comes_with_an_outer_cancellation_lets_the_cancellation_go_on() -> None:
    """A stop and a cancellation of the iterating task's own scope land together while the
    feed waits: the cancellation goes on out of the loop, which does not just end."""
    source = Waiting("sleep")
    watch = CoordOf()
    ended = False
    async with MonitoredSession(lambda: StepSession(_echo), [watch]) as sess:
        with anyio.fail_after(LIMIT):
            with anyio.CancelScope() as outer:
                async with anyio.create_task_group() as tg:

                    async def both() -> None:
                        await source.asked.wait()
                        await anyio.wait_all_tasks_blocked()
                        outer.cancel()
                        assert watch.coord is not None
                        watch.coord.request_stop()

                    tg.start_soon(both)
                    async for _ in sess.iterate("y", source.feeds()):
                        pass
                    ended = True
        assert outer.cancelled_caught and not ended and source.finished


@pytest.mark.parametrize("wait", [False, True])
async def test_an_error_of_the_feed_comes_out_of_the_loop(wait: bool) -> None:
    """The feed raises, before or after it waits: the error comes out of the loop, and the
    iterator is over."""

    async def feeds() -> AsyncGenerator[dict[str, int], None]:
        yield {"x": 1}
        if wait:
            await anyio.lowlevel.checkpoint()
        raise ValueError("no more")

    async with MonitoredSession(lambda: StepSession(_echo)) as sess:
        iterator = sess.iterate("y", feeds())
        results: list[Any] = []
        with pytest.raises(ValueError, match="no more"):
            async for y in iterator:
                results.append(y)
        assert results == [1]
        assert [y async for y in iterator] == []
        assert sess._lifetime.stop_waits == []
        assert await sess.run("y", {"x": 5}) == 5


@pytest.mark.parametrize("wait", [False, True])
async def test_a_keyboard_interrupt_from_the_feed_comes_out_as_itself(wait: bool) -> None:
    """``KeyboardInterrupt`` raised by the feed, before or after it waits, comes out of the
    loop as itself; the iterator is free again and the session goes on."""

    async def feeds() -> AsyncGenerator[dict[str, int], None]:
        yield {"x": 1}
        if wait:
            await anyio.lowlevel.checkpoint()
        raise KeyboardInterrupt

    async with MonitoredSession(lambda: StepSession(_echo)) as sess:
        iterator = sess.iterate("y", feeds())
        with pytest.raises(KeyboardInterrupt):
            async for _ in iterator:
                pass
        assert not iterator._busy
        assert iterator._waiting is None
        assert sess._lifetime.stop_waits == []
        assert await sess.run("y", {"x": 5}) == 5


@pytest.mark.parametrize("wait", [False, True])
async def test_the_feed_runs_in_the_iterating_tasks_context(wait: bool) -> None:
    """A context variable the feed sets is seen by the loop's body, whether or not the feed
    waited for the item (an ``await`` of the item, not a call in a context of its own)."""

    async def feeds() -> AsyncGenerator[dict[str, int], None]:
        for x in range(3):
            if wait:
                await anyio.lowlevel.checkpoint()
            var.set(x)
            yield {"x": x}

    async with MonitoredSession(lambda: StepSession(_echo)) as sess:
        seen = [(y, var.get()) async for y in sess.iterate("y", feeds())]
    assert seen == [(0, 0), (1, 1), (2, 2)]


class Awaitables:
    """An async iterator whose ``__anext__`` is a plain method returning an awaitable that is
    not a coroutine (waiting or not)."""

    def __init__(self, wait: bool) -> None:
        self.wait = wait
        self.x = 0

    def __aiter__(self) -> Awaitables:
        return self

    def __anext__(self) -> Item:
        self.x += 1
        return Item(self.x, self.wait)


class Item:
    def __init__(self, x: int, wait: bool) -> None:
        self.x = x
        self.wait = wait

    def __await__(self) -> Generator[Any, Any, dict[str, int]]:
        if self.x > 3:
            raise StopAsyncIteration
        if self.wait:
            yield from anyio.lowlevel.checkpoint().__await__()
        return {"x": self.x}


@pytest.mark.parametrize("wait", [False, True])
async def test_an_anext_that_returns_any_awaitable_is_awaited(wait: bool) -> None:
    async with MonitoredSession(lambda: StepSession(_echo)) as sess:
        with anyio.fail_after(LIMIT):
            assert [y async for y in sess.iterate("y", Awaitables(wait))] == [1, 2, 3]


class Holder:
    """Keeps the coordinator a session's hooks receive."""

    def __init__(self) -> None:
        self.coord: Coordinator | None = None

    def after_create_session(self, session: object, coord: Coordinator) -> None:
        self.coord = coord


async def _stop_later(holder: Holder, started: anyio.Event) -> None:
    await started.wait()
    await anyio.wait_all_tasks_blocked()
    assert holder.coord is not None
    holder.coord.request_stop()


async def test_a_stop_does_not_reach_into_a_feeds_shielded_wait() -> None:
    """A feed waiting in a shielded scope of its own when a stop comes: its wait finishes,
    its item is run, then the loop ends (the stop reaches the feed from outside its shield)."""
    holder, started, log = Holder(), anyio.Event(), []
    gate = anyio.Event()

    async def feed() -> AsyncGenerator[dict[str, int], None]:
        yield {"x": 0}
        with anyio.CancelScope(shield=True):
            started.set()
            await gate.wait()
            log.append("shielded wait over")
        yield {"x": 1}
        await anyio.sleep_forever()

    async def release() -> None:
        await _stop_later(holder, started)
        gate.set()

    with anyio.fail_after(LIMIT):
        async with (
            MonitoredSession(lambda: StepSession(_echo), [holder]) as sess,
            contextlib.aclosing(feed()) as items,
            anyio.create_task_group() as tg,
        ):
            tg.start_soon(release)
            ys = [y async for y in sess.iterate("y", items)]
    assert log == ["shielded wait over"]
    assert ys[0] == 0 and ys[1:] in ([], [1])


@pytest.mark.parametrize("how", ["stop", "iterator aclose", "session aclose"])
async def test_a_stop_ends_a_feed_waiting_in_its_own_task_group(how: str) -> None:
    """A feed whose item is received by a child task of its own task group (a quiet source):
    a stop, the iterator's aclose() or the session's close from another task ends the loop,
    and no half-built item is run."""
    holder, started = Holder(), anyio.Event()
    seen: list[Any] = []

    async def feed() -> AsyncGenerator[dict[str, int], None]:
        yield {"x": 0}
        item: dict[str, int] = {}
        async with anyio.create_task_group() as tg:

            async def receive() -> None:
                started.set()
                await anyio.sleep_forever()
                item["x"] = 1  # pragma: no cover  # the source stays quiet

            tg.start_soon(receive)
        yield item

    with anyio.fail_after(LIMIT):
        async with MonitoredSession(lambda: StepSession(_echo), [holder]) as sess:
            steps = sess.iterate("y", feed())

            async def end() -> None:
                if how == "stop":
                    await _stop_later(holder, started)
                    return
                await started.wait()
                await anyio.wait_all_tasks_blocked()
                await (steps.aclose() if how == "iterator aclose" else sess.aclose())

            ended = False
            async with anyio.create_task_group() as tg:
                tg.start_soon(end)
                async for y in steps:
                    seen.append(y)
                ended = True
            assert ended
    assert seen == [0]
