"""Cancellation at every schedule point with four steps in flight: cancel after N schedule
points, for N = 0, 1, 2, ... until the work completes, and check the invariants each time
(no hook call left running, no task left, every lane's session closed exactly once, one
hook phase at a time)."""

from __future__ import annotations

from typing import Any

import anyio
import anyio.lowlevel
import pytest

from hookrun import (
    AbortedError,
    MonitoredSession,
    RetryPolicy,
    SessionRunArgs,
    SessionRunContext,
    SessionRunHook,
    SessionRunValues,
)
from hookrun.testing import ScriptedCreator, cancel_after

pytestmark = pytest.mark.anyio

NO_WAIT = RetryPolicy(initial_delay=0, jitter=False)
MAX_POINTS = 600
LANES = 4


class Phases:
    """Counts the hook phases in progress across every hook of one session."""

    def __init__(self) -> None:
        self.active = 0


class Tracked(SessionRunHook):
    """Suspends twice in each phase; asserts no other phase of the session's hooks runs."""

    overlapping_steps = True

    def __init__(self, name: str, phases: Phases, fetch: str | None = None) -> None:
        self.name = name
        self.fetch = fetch
        self.phases = phases
        self.active = 0
        self.calls: list[str] = []

    async def _pause(self, phase: str) -> None:
        if phase in ("before_run", "after_run"):
            assert self.active == 0, "two phases of one hook overlapped"
        self.active += 1
        self.calls.append(phase)
        try:
            await anyio.lowlevel.checkpoint()
            await anyio.lowlevel.checkpoint()
        finally:
            self.active -= 1

    async def begin(self) -> None:
        await self._pause("begin")

    async def after_create_session(self, session: Any, coord: Any) -> None:
        await self._pause("after_create_session")

    async def before_run(self, run_context: SessionRunContext) -> SessionRunArgs | None:
        await self._pause("before_run")
        return SessionRunArgs(self.fetch) if self.fetch else None

    async def after_run(self, run_context: SessionRunContext, run_values: SessionRunValues) -> None:
        await self._pause("after_run")
        if self.fetch:
            assert run_values.results == 1

    async def end(self, session: Any) -> None:
        await self._pause("end")


class CheckpointingCreator(ScriptedCreator):
    """Creation takes schedule points too; the second session fails its first step (recovery)."""

    def __init__(self) -> None:
        super().__init__({"x": 1}, session_errors={1: {0: AbortedError("preempted")}})

    async def create_session(self) -> Any:
        await anyio.lowlevel.checkpoint()
        return await super().create_session()


def make_hooks() -> list[Tracked]:
    phases = Phases()
    return [Tracked("a", phases, fetch="x"), Tracked("b", phases), Tracked("c", phases, fetch="x")]


async def iterate_cancelled_at(points: int, ordered: bool = True) -> bool:
    """Cancel an ``iterate()`` of 8 steps (in feed order or, with ``ordered=False``, as
    they end) after ``points`` schedule points."""
    hooks = make_hooks()
    creator = CheckpointingCreator()
    baseline = len(anyio.get_running_tasks())
    completed = False
    async with anyio.create_task_group() as tg:
        with anyio.CancelScope() as scope:
            tg.start_soon(cancel_after, scope, points)
            async with MonitoredSession(creator, hooks, retry=NO_WAIT, max_in_flight=LANES) as sess:
                assert [r async for r in sess.iterate("x", [None] * 8, ordered=ordered)] == [1] * 8
            completed = True
        tg.cancel_scope.cancel()
    check(hooks, creator, baseline, completed)
    return completed


async def runs_cancelled_at(points: int) -> bool:
    """Cancel six concurrent ``run()`` callers after ``points`` schedule points."""
    hooks = make_hooks()
    creator = CheckpointingCreator()
    baseline = len(anyio.get_running_tasks())
    completed = False
    async with anyio.create_task_group() as tg:
        with anyio.CancelScope() as scope:
            tg.start_soon(cancel_after, scope, points)
            sess = MonitoredSession(creator, hooks, retry=NO_WAIT, max_in_flight=LANES)
            async with sess, anyio.create_task_group() as callers:
                for _ in range(6):
                    callers.start_soon(sess.run, "x")
            completed = True
        tg.cancel_scope.cancel()
    check(hooks, creator, baseline, completed)
    return completed


def check(hooks: list[Tracked], creator: CheckpointingCreator, baseline: int, completed: bool) -> None:
    assert len(anyio.get_running_tasks()) == baseline, "a task was left running"
    assert all(hook.active == 0 for hook in hooks), "a hook call was left running"
    assert all(session.closed == 1 for session in creator.sessions), "a lane's session not closed exactly once"
    for hook in hooks:
        assert hook.calls.count("begin") <= 1
        assert hook.calls.count("end") == 1 if completed else hook.calls.count("end") <= 1
        if completed:
            assert hook.calls.count("after_run") == hook.calls.count("before_run") - 1  # one re-run


async def unordered_iterate_cancelled_at(points: int) -> bool:
    return await iterate_cancelled_at(points, ordered=False)


@pytest.mark.parametrize(
    "scenario",
    [iterate_cancelled_at, unordered_iterate_cancelled_at, runs_cancelled_at],
    ids=["iterate", "iterate unordered", "runs"],
)
async def test_cancel_at_every_schedule_point_with_four_lanes(scenario: Any) -> None:
    """For every N, cancelling after N schedule points keeps every invariant; eventually nothing is cancelled."""
    for points in range(MAX_POINTS):
        with anyio.fail_after(10):
            if await scenario(points):
                assert points > 10
                return
    pytest.fail(f"the work never completed within {MAX_POINTS} schedule points")
