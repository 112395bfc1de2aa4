"""A stop or a close asked from another task ends ``iterate()`` while it waits for the next
item of an async feed that does not come: the coordinator's ``request_stop()`` (from a timer
task, a signal handler...), the session's ``aclose()``, a hook's ``run_context.request_stop()``
in another task's ``run()`` and a step function's ``step_context.request_stop()``. The loop
ends with the results before the stop, the feeds' async generator is finished, no task of
the iterator is left, and an item the source hands over just as the stop lands is run only
if ``run()`` would still run it.
Each test runs with one lane and with several."""

from __future__ import annotations

from collections.abc import AsyncGenerator, Mapping
from typing import Any

import anyio
import anyio.lowlevel
import pytest

from hookrun import (
    Coordinator,
    MonitoredSession,
    SessionRunContext,
    SessionRunValues,
    StepContext,
    StepSession,
)
from tests.session._in_flight_support import runners

pytestmark = pytest.mark.anyio

LIMIT = 3.0


async def _echo(feeds: Mapping[Any, Any]) -> dict[str, Any]:
    await anyio.lowlevel.checkpoint()
    return {"y": feeds.get("x")}


class Watch:
    """Keeps the session's coordinator, counts ``end``, and asks to stop in the ``after_run``
    of a step fed ``{"stop": True}``."""

    overlapping_steps = True

    def __init__(self) -> None:
        self.coord: Coordinator | None = None
        self.ended = 0
        self.ran: list[Any] = []

    def after_create_session(self, session: Any, coord: Coordinator) -> None:
        self.coord = coord

    def after_run(self, run_context: SessionRunContext, run_values: SessionRunValues) -> None:
        feed = run_context.original_args.feed_dict or {}
        self.ran.append(feed.get("x"))
        if feed.get("stop"):
            run_context.request_stop()

    def end(self, session: Any) -> None:
        self.ended += 1


class QuietFeeds:
    """An async generator of feeds that yields ``{"x": 1}``, then waits for ever: ``asked`` is
    set once iterate asked for the second item; ``finished`` once the generator is over."""

    def __init__(self) -> None:
        self.asked = anyio.Event()
        self.finished = False
        self.generator: AsyncGenerator[dict[str, int], None] | None = None

    def feeds(self) -> AsyncGenerator[dict[str, int], None]:
        self.generator = self._feeds()
        return self.generator

    @property
    def over(self) -> bool:
        """The generator ran its ``finally`` and is finished (nothing left to close)."""
        return self.finished and getattr(self.generator, "ag_frame", True) is None

    async def _feeds(self) -> AsyncGenerator[dict[str, int], None]:
        try:
            yield {"x": 1}
            self.asked.set()
            await anyio.sleep_forever()
            yield {"x": 2}  # pragma: no cover - never reached
        finally:
            self.finished = True


async def _iterate_while(sess: MonitoredSession, source: QuietFeeds, stop: Any) -> list[Any]:
    """Iterate ``source``'s feeds in this task and, in another one, call ``stop()`` once iterate
    waits for the second item; the results, once the loop ended."""
    results: list[Any] = []
    ended = False

    async def stopper() -> None:
        await source.asked.wait()
        await stop()

    with anyio.fail_after(LIMIT):
        async with anyio.create_task_group() as tg:
            tg.start_soon(stopper)
            async for y in sess.iterate("y", source.feeds()):
                results.append(y)
            ended = True  # the loop ended: no cancellation left it (the task group would hide one)
    assert ended
    return results


def _session(watch: Watch, max_in_flight: int) -> MonitoredSession:
    return MonitoredSession(lambda: StepSession(_echo), [watch], max_in_flight=max_in_flight)


@pytest.mark.parametrize("max_in_flight", [1, 2, 4])
async def test_a_coordinator_stop_from_another_task_ends_iterate_waiting_for_a_quiet_feed(max_in_flight: int) -> None:
    """``coord.request_stop()`` from another task (a timer, a signal handler) while iterate
    waits for a feed that does not come: the loop ends at once, the generator is finished."""
    watch = Watch()
    source = QuietFeeds()

    async def stop() -> None:
        assert watch.coord is not None
        watch.coord.request_stop()

    async with _session(watch, max_in_flight) as sess:
        assert await _iterate_while(sess, source, stop) == [1]
        assert sess.should_stop() and source.over
        await anyio.wait_all_tasks_blocked()
        assert runners() == 0
    assert watch.ended == 1


@pytest.mark.parametrize("max_in_flight", [1, 2, 4])
async def test_a_close_from_another_task_ends_iterate_waiting_for_a_quiet_feed(max_in_flight: int) -> None:
    """``await sess.aclose()`` from another task while iterate waits for a feed that does not
    come: the close returns (``end`` called once) and the iterating task's loop ends, as a
    stop would end it (a close makes ``should_stop()`` true)."""
    watch = Watch()
    source = QuietFeeds()
    closed = False

    async with _session(watch, max_in_flight) as sess:

        async def close() -> None:
            nonlocal closed
            await sess.aclose()
            closed = True

        assert await _iterate_while(sess, source, close) == [1]
        assert closed and watch.ended == 1 and sess.should_stop() and source.over
        await anyio.wait_all_tasks_blocked()
        assert runners() == 0
    assert watch.ended == 1


@pytest.mark.parametrize("max_in_flight", [1, 2, 4])
@pytest.mark.parametrize("how", ["hook", "step_fn"])
async def test_a_stop_asked_by_another_tasks_step_ends_iterate_waiting_for_a_quiet_feed(
    max_in_flight: int, how: str
) -> None:
    """Another task's ``run()`` whose hook asks to stop in ``after_run``, or its
    ``run_step_fn()`` whose step function asks to stop, while iterate waits for a feed that
    does not come: the loop ends at once."""
    watch = Watch()
    source = QuietFeeds()

    async with _session(watch, max_in_flight) as sess:

        async def stop() -> None:
            if how == "hook":
                assert await sess.run("y", {"x": 9, "stop": True}) == 9
            else:
                await sess.run_step_fn(_stopping)

        assert await _iterate_while(sess, source, stop) == [1]
        assert sess.should_stop() and source.over
        await anyio.wait_all_tasks_blocked()
        assert runners() == 0
    assert watch.ended == 1


class StoppingFeeds:
    """An async iterator of feeds whose second ``__anext__`` asks to stop (``how``) and then
    hands over ``{"x": 2}`` at once: an item handed over just as the stop lands."""

    def __init__(self, sess: MonitoredSession, watch: Watch, how: str) -> None:
        self.sess = sess
        self.watch = watch
        self.how = how
        self.taken = 0

    def __aiter__(self) -> StoppingFeeds:
        return self

    async def __anext__(self) -> dict[str, int]:
        self.taken += 1
        if self.taken == 2:
            if self.how == "coordinator":
                assert self.watch.coord is not None
                self.watch.coord.request_stop()
            else:
                await self.sess.run_step_fn(_stopping)
        elif self.taken > 2:  # pragma: no cover - a stop takes no further item
            raise AssertionError("iterate took an item after the stop")
        return {"x": self.taken}


async def _stopping(step_context: StepContext) -> None:
    step_context.request_stop()


@pytest.mark.parametrize("max_in_flight", [1, 2, 4])
@pytest.mark.parametrize("how", ["step_fn", "coordinator"])
async def test_an_item_handed_over_as_the_stop_lands_runs_only_if_run_still_would(max_in_flight: int, how: str) -> None:
    """The wait for the second item ends with the stop asked meanwhile, though the source
    hands the item over: after a step function's (or a hook's) stop that item is not run, as
    ``run()`` would be refused; after the coordinator's, which leaves ``run()`` working, it is
    run. Either way the loop then ends and takes no further item."""
    watch = Watch()
    async with _session(watch, max_in_flight) as sess:
        source = StoppingFeeds(sess, watch, how)
        expected = [1] if how == "step_fn" else [1, 2]
        with anyio.fail_after(LIMIT):
            assert [y async for y in sess.iterate("y", source)] == expected
        assert sess.should_stop() and source.taken == 2 and watch.ran == expected


@pytest.mark.parametrize(
    ("message", "noted"),
    [
        ("Attempted to exit a cancel scope that isn't the current tasks's current cancel scope", True),
        ("Cancel scope stack corrupted: attempted to exit <trio.CancelScope>", True),
        ("Nursery stack corrupted: attempted to exit <trio.Nursery>", True),
        ("something else went wrong", False),
    ],
)
def test_a_scope_left_out_of_order_around_an_item_is_explained(message: str, noted: bool) -> None:
    """The feeds' async generator yielded from inside a scope of its own: the error says so."""
    from hookrun._session._iterate import note_scope_across_yield

    exc = RuntimeError(message)
    note_scope_across_yield(exc)
    notes = getattr(exc, "__notes__", [])
    assert bool(notes) is noted
    if noted:
        assert "must not yield from inside a cancel scope" in notes[0]


@pytest.mark.parametrize("max_in_flight", [1, 2, 4])
async def test_the_iterators_aclose_from_another_task_ends_its_wait_for_a_quiet_feed(max_in_flight: int) -> None:
    """``aclose()`` of the iterator itself (not the session) from another task while it waits
    for a feed that does not come: the loop ends at once, and the session goes on."""
    watch = Watch()
    source = QuietFeeds()
    results: list[Any] = []
    async with _session(watch, max_in_flight) as sess:
        iterator = sess.iterate("y", source.feeds())

        async def closer() -> None:
            await source.asked.wait()
            await iterator.aclose()

        with anyio.fail_after(LIMIT):
            async with anyio.create_task_group() as tg:
                tg.start_soon(closer)
                async for y in iterator:
                    results.append(y)
        # With lanes the second item is asked for while the first step may still be in
        # flight: the close cancels it (its result is not yielded).
        assert results == [1] if max_in_flight == 1 else results in ([], [1])
        assert not sess.should_stop() and source.over
        assert await sess.run("y", {"x": 7}) == 7
    assert watch.ended == 1
