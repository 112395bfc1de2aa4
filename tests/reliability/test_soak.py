"""Short soak: 10 hooks of every kind for thousands of steps on each backend, one step at a
time and four steps in flight; memory (tracemalloc), gc object counts and task counts stay
flat after warm-up.
(``benchmarks/soak.py`` is the long version: 1M steps, JSON figures.)"""

from __future__ import annotations

import gc
import itertools
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
from hookrun._observe._statistics import _FOLD

WARMUP, WINDOW, STEPS = 2_000, 2_000, 10_000
#: Four lanes: fewer steps (each costs more); a raw run's schedule points (so runs overlap).
LANE_WARMUP, LANE_WINDOW, LANE_STEPS, RUN_POINTS = 1_000, 1_000, 4_000, 20


class _Plain(SessionRunHook):
    overlapping_steps = True

    def __init__(self, name: str) -> None:
        self.name = name
        self.seen = 0

    def after_run(self, run_context: SessionRunContext, run_values: SessionRunValues) -> None:
        self.seen += 1


class _Fetches(SessionRunHook):
    overlapping_steps = True

    def __init__(self, name: str) -> None:
        self.name = name
        self.request = SessionRunArgs({"a": "a", "pair": ("b", name + "/fed")}, {name + "/fed": 1})

    async def before_run(self, run_context: SessionRunContext) -> SessionRunArgs:
        return self.request

    async def after_run(self, run_context: SessionRunContext, run_values: SessionRunValues) -> None:
        assert run_values.results["pair"][1] == 1


class _Suspends(SessionRunHook):
    overlapping_steps = True

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


class _Overlapping:
    """A lean session whose run suspends once, so the runs of four lanes overlap; records
    the most runs in progress at once across every lane (``peak``)."""

    def __init__(self, shared: list[int]) -> None:
        self.shared = shared  # [in progress, peak]

    async def run(self, fetches: list[object], feed_dict: dict[object, object], *args: object) -> list[object]:
        shared = self.shared
        shared[0] += 1
        shared[1] = max(shared[1], shared[0])
        try:
            for _ in range(RUN_POINTS):
                await anyio.lowlevel.checkpoint()
        finally:
            shared[0] -= 1
        return [feed_dict.get(key, 0) for key in fetches]


class _OverlappingCreator:
    def __init__(self) -> None:
        self.shared = [0, 0]

    async def create_session(self) -> _Overlapping:
        return _Overlapping(self.shared)


def _hooks() -> list[SessionRunHook]:
    hooks: list[SessionRunHook] = [_Plain(f"plain{i}") for i in range(3)]
    hooks += [_Fetches(f"fetch{i}") for i in range(5)]
    hooks += [_Suspends(f"suspend{i}") for i in range(2)]
    return hooks


def _settle(sess: MonitoredSession) -> None:
    """Fold the timed durations still batched (at most ``_FOLD`` records, a bounded buffer,
    checked here) into the histograms, then collect: what is left alive after is a leak."""
    assert len(sess._stats.records) <= _FOLD, "the batch of timed durations outgrew its bound"
    sess.statistics()
    gc.collect()


@pytest.mark.anyio
async def test_soak_memory_objects_and_tasks_stay_flat() -> None:
    """After warm-up, 10k steps leave no memory, objects or tasks behind."""
    with anyio.fail_after(120):
        async with MonitoredSession(_LeanCreator(), _hooks()) as sess:
            for _ in range(WARMUP):
                await sess.run("a")
            tasks = len(anyio.get_running_tasks())
            _settle(sess)
            tracemalloc.start()
            try:
                for _ in range(WINDOW):
                    await sess.run("a")
                _settle(sess)
                left_alive, _peak = tracemalloc.get_traced_memory()
            finally:
                tracemalloc.stop()
            _settle(sess)
            objects = len(gc.get_objects())
            for step in range(STEPS):
                await sess.run("a")
                if step % 1_000 == 0:
                    assert len(anyio.get_running_tasks()) == tasks
                    assert len(sess._stats.records) <= _FOLD
            _settle(sess)
            grown = len(gc.get_objects()) - objects
    assert left_alive < 32 * 1024, f"{WINDOW} steps left {left_alive} bytes alive"
    assert grown < 200, f"{STEPS} steps left {grown} more gc-tracked objects"


async def _steps(sess: MonitoredSession, n: int) -> None:
    async for _ in sess.iterate("a", itertools.repeat(None, n)):
        pass


@pytest.mark.anyio
async def test_soak_with_four_steps_in_flight_stays_flat() -> None:
    """Four lanes, iterate() windows: after warm-up, 4k steps leave no memory, objects or
    tasks behind, and the runs really overlapped four at a time."""
    creator = _OverlappingCreator()
    with anyio.fail_after(120):
        async with MonitoredSession(creator, _hooks(), max_in_flight=4) as sess:
            await _steps(sess, LANE_WARMUP)
            tasks = len(anyio.get_running_tasks())
            _settle(sess)
            tracemalloc.start()
            try:
                await _steps(sess, LANE_WINDOW)
                _settle(sess)
                left_alive, _peak = tracemalloc.get_traced_memory()
            finally:
                tracemalloc.stop()
            _settle(sess)
            objects = len(gc.get_objects())
            for _ in range(LANE_STEPS // 500):
                await _steps(sess, 500)
                assert len(anyio.get_running_tasks()) == tasks
                assert len(sess._stats.records) <= _FOLD
            _settle(sess)
            grown = len(gc.get_objects()) - objects
    assert creator.shared[1] == 4, f"at most {creator.shared[1]} runs overlapped"
    assert left_alive < 32 * 1024, f"{LANE_WINDOW} steps left {left_alive} bytes alive"
    assert grown < 200, f"{LANE_STEPS} steps left {grown} more gc-tracked objects"
