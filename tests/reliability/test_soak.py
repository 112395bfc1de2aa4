"""Short soak: 10 hooks of every kind for thousands of steps on each backend; memory
(tracemalloc), gc object counts and task counts stay flat after warm-up.
(``benchmarks/soak.py`` is the long version: 1M steps, JSON figures.)"""

from __future__ import annotations

import gc
import tracemalloc

import anyio
import anyio.lowlevel
import pytest

from hookrun import (
    MonitoredSession,
    SessionRunArgs,
    SessionRunContext,
    SessionRunHook,
    SessionRunValues,
)

WARMUP, WINDOW, STEPS = 2_000, 2_000, 10_000


class _Plain(SessionRunHook):
    def __init__(self, name: str) -> None:
        self.name = name
        self.seen = 0

    def after_run(self, run_context: SessionRunContext, run_values: SessionRunValues) -> None:
        self.seen += 1


class _Fetches(SessionRunHook):
    def __init__(self, name: str) -> None:
        self.name = name
        self.request = SessionRunArgs({"a": "a", "pair": ("b", name + "/fed")}, {name + "/fed": 1})

    async def before_run(self, run_context: SessionRunContext) -> SessionRunArgs:
        return self.request

    async def after_run(self, run_context: SessionRunContext, run_values: SessionRunValues) -> None:
        assert run_values.results["pair"][1] == 1


class _Suspends(SessionRunHook):
    def __init__(self, name: str) -> None:
        self.name = name

    async def before_run(self, run_context: SessionRunContext) -> None:
        await anyio.lowlevel.checkpoint()


class _LeanSession:
    """No per-step record (ScriptedSession keeps every run)."""

    async def run(self, fetches: list[object], feed_dict: dict[object, object], *args: object) -> list[object]:
        return [feed_dict.get(key, 0) for key in fetches]


class _LeanCreator:
    async def create_session(self) -> _LeanSession:
        return _LeanSession()


def _hooks() -> list[SessionRunHook]:
    hooks: list[SessionRunHook] = [_Plain(f"plain{i}") for i in range(3)]
    hooks += [_Fetches(f"fetch{i}") for i in range(5)]
    hooks += [_Suspends(f"suspend{i}") for i in range(2)]
    return hooks


@pytest.mark.anyio
async def test_soak_memory_objects_and_tasks_stay_flat() -> None:
    """After warm-up, 10k steps leave no memory, objects or tasks behind."""
    with anyio.fail_after(120):
        async with MonitoredSession(_LeanCreator(), _hooks()) as sess:
            for _ in range(WARMUP):
                await sess.run("a")
            tasks = len(anyio.get_running_tasks())
            gc.collect()
            tracemalloc.start()
            try:
                for _ in range(WINDOW):
                    await sess.run("a")
                gc.collect()
                left_alive, _peak = tracemalloc.get_traced_memory()
            finally:
                tracemalloc.stop()
            gc.collect()
            objects = len(gc.get_objects())
            for step in range(STEPS):
                await sess.run("a")
                if step % 1_000 == 0:
                    assert len(anyio.get_running_tasks()) == tasks
            gc.collect()
            grown = len(gc.get_objects()) - objects
    assert left_alive < 32 * 1024, f"{WINDOW} steps left {left_alive} bytes alive"
    assert grown < 200, f"{STEPS} steps left {grown} more gc-tracked objects"
