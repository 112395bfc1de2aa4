"""A cancellation by the backend's own means (asyncio's ``Task.cancel()`` and
``asyncio.timeout()``; trio's own cancel scopes), landing in ``iterate()``'s loop body,
cancels the steps in flight as an anyio one does: no run or hook starts afterwards, no
``after_run`` comes, and the session stays usable."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Hashable, Mapping, Sequence
from typing import Any

import anyio
import pytest
import sniffio

from hookrun import MonitoredSession, RunMetadata, RunOptions, SessionRunContext, SessionRunValues
from hookrun._cancelling import task_cancelled

pytestmark = pytest.mark.anyio

Events = list[tuple[Any, ...]]


class Raw:
    def __init__(self, events: Events) -> None:
        self.events = events

    async def run(
        self, fetches: Sequence[Hashable], feeds: Mapping[Any, Any], options: RunOptions, metadata: RunMetadata
    ) -> list[Any]:
        self.events.append(("run_start", feeds["i"]))
        await anyio.sleep(0.01)
        self.events.append(("run_end", feeds["i"]))
        return [feeds["i"] for _ in fetches]

    async def aclose(self) -> None:
        pass


def _fed(run_context: SessionRunContext) -> Any:
    feeds = run_context.original_args.feed_dict
    assert feeds is not None
    return feeds["i"]


class Hook:
    overlapping_steps = True

    def __init__(self, events: Events) -> None:
        self.events = events

    def before_run(self, run_context: SessionRunContext) -> None:
        self.events.append(("before", _fed(run_context)))

    def after_run(self, run_context: SessionRunContext, run_values: SessionRunValues) -> None:
        self.events.append(("after", _fed(run_context)))


async def _consume(sess: MonitoredSession, events: Events, ordered: bool, cancel: Callable[[], object]) -> None:
    """Iterate; the first loop body cancels the task by ``cancel`` and waits, where the
    cancellation lands."""
    async for _ in sess.iterate("x", ({"i": i} for i in range(1000)), ordered=ordered):
        cancel()
        try:
            await anyio.sleep(1)
        except BaseException:
            events.append(("cancelled in the body",))
            raise


async def _cancel_natively(sess: MonitoredSession, events: Events, ordered: bool, how: str) -> None:
    """``how``: the task cancelled (asyncio: ``Task.cancel()``; trio: its cancel scope's
    ``cancel()``), or a deadline reached (``asyncio.timeout``; a trio scope's deadline)."""
    if sniffio.current_async_library() == "trio":
        import trio

        with trio.CancelScope() as scope:
            if how == "cancel":
                await _consume(sess, events, ordered, scope.cancel)
            else:
                await _consume(sess, events, ordered, lambda: setattr(scope, "deadline", trio.current_time()))
        assert scope.cancelled_caught
        return
    if how == "cancel":
        task = asyncio.ensure_future(_consume(sess, events, ordered, lambda: task.cancel()))
        with pytest.raises(asyncio.CancelledError):
            await task
    else:
        with pytest.raises(TimeoutError):
            async with asyncio.timeout(None) as timeout:
                loop = asyncio.get_running_loop()
                await _consume(sess, events, ordered, lambda: timeout.reschedule(loop.time()))


@pytest.mark.parametrize("ordered", [True, False])
@pytest.mark.parametrize("how", ["cancel", "timeout"])
async def test_a_cancellation_of_the_backend_in_the_loop_body_cancels_the_steps(ordered: bool, how: str) -> None:
    events: Events = []
    with anyio.fail_after(10):
        async with MonitoredSession(lambda: Raw(events), [Hook(events)], max_in_flight=4) as sess:
            await _cancel_natively(sess, events, ordered, how)
            await anyio.sleep(0.05)  # time for anything still running to show
            landed = events.index(("cancelled in the body",))
            late = [e for e in events[landed + 1:] if e[0] in ("run_start", "before", "after")]
            assert late == []
            afters = sum(1 for e in events if e[0] == "after")
            assert await sess.global_step() == afters
            events.clear()
            assert await sess.run("x", {"i": -1}) == -1  # usable afterwards
            assert [r async for r in sess.iterate("x", [{"i": -2}, {"i": -3}])] == [-2, -3]


async def test_the_cancellation_check_reads_every_way_a_task_is_cancelled() -> None:
    assert not task_cancelled()
    with anyio.CancelScope() as scope:  # noqa: ASYNC100  # read, never awaited
        scope.cancel()
        assert task_cancelled()  # seen before the cancellation is delivered
    with anyio.CancelScope(deadline=anyio.current_time() - 1):  # noqa: ASYNC100
        assert task_cancelled()
    if sniffio.current_async_library() == "asyncio":
        task = asyncio.current_task()
        assert task is not None
        task.cancel()
        assert task_cancelled()
        task.uncancel()
        assert not task_cancelled()


def test_the_cancellation_check_outside_an_event_loop_says_no() -> None:
    assert not task_cancelled()  # an iterator collected after its event loop ended
