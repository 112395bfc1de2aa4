"""Cancellation at every schedule point: cancel after N schedule points, for N = 0, 1, 2, ...
until the work completes without being cancelled, and check the invariants each time."""

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
from hookrun.testing import ScriptedCreator

pytestmark = pytest.mark.anyio

NO_WAIT = RetryPolicy(initial_delay=0, jitter=False)
MAX_POINTS = 400


class Tracked(SessionRunHook):
    """Suspends twice in each phase and counts the calls that are in progress."""

    def __init__(self, name: str, fetch: str | None = None) -> None:
        self.name = name
        self.fetch = fetch
        self.active = 0
        self.calls: list[str] = []

    async def _pause(self, phase: str) -> None:
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
    """Creation takes schedule points too; the first session fails its second step (recovery)."""

    def __init__(self) -> None:
        super().__init__({"x": 1}, session_errors={0: {1: AbortedError("preempted")}})

    async def create_session(self) -> Any:
        await anyio.lowlevel.checkpoint()
        return await super().create_session()


def make_hooks() -> list[Tracked]:
    return [Tracked("a", fetch="x"), Tracked("b"), Tracked("c", fetch="x")]


async def cancel_after(scope: anyio.CancelScope, points: int) -> None:
    for _ in range(points):
        await anyio.lowlevel.checkpoint()
    scope.cancel()


def hook_tasks() -> int:
    return sum(1 for task in anyio.get_running_tasks() if task.name == "hookrun hook worker")


async def run_cancelled_at(points: int) -> bool:
    """Cancel ``run()`` calls after ``points`` schedule points; True if they all completed."""
    hooks = make_hooks()
    creator = CheckpointingCreator()
    baseline = len(anyio.get_running_tasks())
    completed = False
    async with MonitoredSession(creator, hooks, retry=NO_WAIT) as sess:
        async with anyio.create_task_group() as tg:
            with anyio.CancelScope() as scope:
                tg.start_soon(cancel_after, scope, points)
                for _ in range(3):
                    assert await sess.run("x") == 1
                completed = True
            tg.cancel_scope.cancel()
        assert all(hook.active == 0 for hook in hooks), "a hook call was left running"
        with anyio.fail_after(5):
            assert await sess.run("x") == 1  # usable after a cancelled run()
        assert len(anyio.get_running_tasks()) - hook_tasks() == baseline + 1  # + the coordinator host
    assert len(anyio.get_running_tasks()) == baseline
    assert all(hook.calls.count("begin") == 1 and hook.calls.count("end") == 1 for hook in hooks)
    assert all(session.closed == 1 for session in creator.sessions)
    return completed


async def block_cancelled_at(points: int) -> bool:
    """Cancel the whole ``async with`` body after ``points`` schedule points."""
    hooks = make_hooks()
    creator = CheckpointingCreator()
    baseline = len(anyio.get_running_tasks())
    completed = False
    async with anyio.create_task_group() as tg:
        with anyio.CancelScope() as scope:
            tg.start_soon(cancel_after, scope, points)
            async with MonitoredSession(creator, hooks, retry=NO_WAIT) as sess:
                for _ in range(3):
                    assert await sess.run("x") == 1
            completed = True
        tg.cancel_scope.cancel()
    assert len(anyio.get_running_tasks()) == baseline
    assert all(hook.active == 0 for hook in hooks), "a hook call was left running"
    assert all(session.closed == 1 for session in creator.sessions)
    for hook in hooks:
        assert hook.calls.count("begin") <= 1
        # end runs once on a completed block; a cancellation may also land while ending
        assert hook.calls.count("end") == 1 if completed else hook.calls.count("end") <= 1
    return completed


@pytest.mark.parametrize("scenario", [run_cancelled_at, block_cancelled_at], ids=["run", "block"])
async def test_cancel_at_every_schedule_point(scenario: Any) -> None:
    """For every N, cancelling after N schedule points keeps every invariant; eventually nothing is cancelled."""
    for points in range(MAX_POINTS):
        with anyio.fail_after(10):
            if await scenario(points):
                assert points > 10  # the scenario really has many schedule points to cancel at
                return
    pytest.fail(f"the work never completed within {MAX_POINTS} schedule points")
