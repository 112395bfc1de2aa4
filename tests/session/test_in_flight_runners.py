"""The tasks that run the steps ``iterate`` admits with steps in flight: parked runners,
reused from step to step, each step in a fresh copy of the iterating task's context, the
raw runs starting in feed order, and none left once the iterator ended."""

from __future__ import annotations

import contextvars
from collections.abc import Hashable, Mapping, Sequence
from typing import Any

import anyio
import anyio.lowlevel
import pytest

from hookrun import MonitoredSession, RunMetadata, RunOptions, SessionRunContext, SessionRunHook
from tests.session._in_flight_support import GatedCreator, Gates, Recorder, feeds, runners

pytestmark = pytest.mark.anyio

seen_var: contextvars.ContextVar[str] = contextvars.ContextVar("seen_var", default="unset")


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
