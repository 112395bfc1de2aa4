"""Cancellation at every schedule point: cancel after N schedule points, for N = 0, 1, 2, ...
until the work completes without being cancelled, and check the invariants each time; with
one lane (three ``run()`` calls) and with four steps in flight (an ``iterate()`` of six steps)."""

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
MAX_POINTS = 800


class Phases:
    """The hook phase in progress across one session's hooks: (phase, what it is for)."""

    def __init__(self) -> None:
        self.current: tuple[str, int] | None = None
        self.active = 0

    def enter(self, key: tuple[str, int]) -> None:
        assert self.active == 0 or self.current == key, f"{key} overlaps {self.current}"
        self.current = key
        self.active += 1

    def leave(self) -> None:
        self.active -= 1


class Tracked(SessionRunHook):
    """Suspends twice in each phase, counts the calls that are in progress and asserts one
    hook phase at a time (one step's before_run or after_run, one session's after_create_session)."""

    overlapping_steps = True

    def __init__(self, name: str, phases: Phases, fetch: str | None = None) -> None:
        self.name = name
        self.fetch = fetch
        self.phases = phases
        self.active = 0
        self.calls: list[str] = []

    async def _pause(self, phase: str, of: object = None) -> None:
        self.phases.enter((phase, id(of)))
        self.active += 1
        self.calls.append(phase)
        try:
            await anyio.lowlevel.checkpoint()
            await anyio.lowlevel.checkpoint()
        finally:
            self.active -= 1
            self.phases.leave()

    async def begin(self) -> None:
        await self._pause("begin")

    async def after_create_session(self, session: Any, coord: Any) -> None:
        await self._pause("after_create_session", session)

    async def before_run(self, run_context: SessionRunContext) -> SessionRunArgs | None:
        await self._pause("before_run", run_context)
        return SessionRunArgs(self.fetch) if self.fetch else None

    async def after_run(self, run_context: SessionRunContext, run_values: SessionRunValues) -> None:
        await self._pause("after_run", run_context)
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
    phases = Phases()
    return [Tracked("a", phases, fetch="x"), Tracked("b", phases), Tracked("c", phases, fetch="x")]


def hook_tasks() -> int:
    return sum(1 for task in anyio.get_running_tasks() if task.name == "hookrun hook worker")


async def work(sess: MonitoredSession, lanes: int) -> None:
    """Three run() calls with one lane; an iterate() of six steps with four in flight."""
    if lanes == 1:
        for _ in range(3):
            assert await sess.run("x") == 1
    else:
        assert [value async for value in sess.iterate("x", [None] * 6)] == [1] * 6


def idle_tasks() -> int:
    return len(anyio.get_running_tasks()) - hook_tasks()


async def run_cancelled_at(points: int, lanes: int) -> bool:
    """Cancel the work (not the block) after ``points`` schedule points; True if it completed."""
    hooks = make_hooks()
    creator = CheckpointingCreator()
    baseline = len(anyio.get_running_tasks())
    completed = False
    async with MonitoredSession(creator, hooks, retry=NO_WAIT, max_in_flight=lanes) as sess:
        entered = idle_tasks()
        async with anyio.create_task_group() as tg:
            with anyio.CancelScope() as scope:
                tg.start_soon(cancel_after, scope, points)
                await work(sess, lanes)
                completed = True
            tg.cancel_scope.cancel()
        assert all(hook.active == 0 for hook in hooks), "a hook call was left running"
        with anyio.fail_after(5):
            assert await sess.run("x") == 1  # usable after a cancelled run() or iterate()
        # A lane whose re-creation the cancellation cut stays without a session until a step
        # lands on it (that run() may have used another lane); the session's one coordinator
        # stays, at every N. Closing calls end unless no lane has a session.
        lost = lost_lanes(creator, lanes)
        assert idle_tasks() == entered  # the coordinator's host
    assert len(anyio.get_running_tasks()) == baseline
    assert all(hook.calls.count("begin") == 1 for hook in hooks)
    assert all(hook.calls.count("end") == (0 if lost == lanes else 1) for hook in hooks)
    assert all(session.closed == 1 for session in creator.sessions)
    return completed


def lost_lanes(creator: CheckpointingCreator, lanes: int) -> int:
    """Lanes whose session was closed and not (yet) replaced."""
    replaced = len(creator.sessions) - lanes
    closed = sum(session.closed for session in creator.sessions)
    assert 0 <= closed - replaced <= lanes
    return closed - replaced


async def block_cancelled_at(points: int, lanes: int) -> bool:
    """Cancel the whole ``async with`` body after ``points`` schedule points."""
    hooks = make_hooks()
    creator = CheckpointingCreator()
    baseline = len(anyio.get_running_tasks())
    completed = False
    async with anyio.create_task_group() as tg:
        with anyio.CancelScope() as scope:
            tg.start_soon(cancel_after, scope, points)
            async with MonitoredSession(creator, hooks, retry=NO_WAIT, max_in_flight=lanes) as sess:
                await work(sess, lanes)
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


@pytest.mark.parametrize("lanes", [1, 4])
@pytest.mark.parametrize("scenario", [run_cancelled_at, block_cancelled_at], ids=["run", "block"])
async def test_cancel_at_every_schedule_point(scenario: Any, lanes: int) -> None:
    """For every N, cancelling after N schedule points keeps every invariant; eventually nothing is cancelled."""
    for points in range(MAX_POINTS):
        with anyio.fail_after(10):
            if await scenario(points, lanes):
                assert points > 10  # the scenario really has many schedule points to cancel at
                return
    pytest.fail(f"the work never completed within {MAX_POINTS} schedule points")
