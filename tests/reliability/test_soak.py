"""Short soak: 10 hooks of every kind for thousands of steps on each backend, one step at a
time and four steps in flight; memory (tracemalloc), gc object counts and task counts stay
flat after warm-up.

The memory measured is what the session leaves behind, whatever runs beside it: a line
tracer in this thread (coverage's, started in every process by the CI's test command) is
paused over the measured windows, since it allocates its own records of the lines and arcs
it sees (a set of arcs that grows past its table in a window counts its whole new table,
tens of kilobytes, depending on which tests ran before in that process); only what was
allocated under hookrun, anyio, trio, asyncio or this file counts (another thread, such as
pytest-xdist's, allocates meanwhile too); and what counts is the growth from one window
to the next, the median of three, so what is made once (the tasks an ``iterate`` keeps for
its lanes, a table that grows once) is not taken for a leak, which grows in every window.
(``benchmarks/soak.py`` is the long version: 1M steps, JSON figures.)"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import gc
import itertools
import os
import sys
import tracemalloc
from collections.abc import Awaitable, Callable, Iterator
from types import FrameType

import anyio
import anyio.lowlevel
import coverage
import pytest
import trio

import hookrun
from hookrun import (
    MonitoredSession,
    SessionRunArgs,
    SessionRunContext,
    SessionRunHook,
    SessionRunValues,
)
from hookrun._observe._statistics import _FOLD

WARMUP, WINDOW, STEPS = 2_000, 1_000, 10_000
#: Four lanes: fewer steps (each costs more); a raw run's schedule points (so runs overlap).
LANE_WARMUP, LANE_WINDOW, LANE_STEPS, RUN_POINTS = 1_000, 500, 4_000, 20
#: Frames kept per allocation: one of them under OURS is enough to count it (an allocation in
#: the standard library on behalf of hookrun counts).
FRAMES = 2
#: Memory is measured over WINDOWS windows in a row; the median window must leave less than
#: LEFT_ALIVE bytes alive (a leak grows every window; a table that grows once does not).
WINDOWS, LEFT_ALIVE = 3, 8 * 1024
OURS = [
    tracemalloc.Filter(True, pattern, all_frames=True)
    for pattern in [
        *(os.path.join(os.path.dirname(str(m.__file__)), "*") for m in (hookrun, anyio, trio, asyncio)),
        __file__,
    ]
]


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


@contextlib.contextmanager
def _untraced() -> Iterator[None]:
    """No line tracer over the block: this thread's trace function is set aside (coverage's
    C or Python tracer, a debugger's), or coverage on ``sys.monitoring`` is stopped."""
    tracer = sys.gettrace()
    cov = coverage.Coverage.current() if tracer is None else None
    if cov is not None:
        cov.stop()
    sys.settrace(None)
    try:
        yield
    finally:
        sys.settrace(tracer)
        if cov is not None:
            cov.start()


async def _growth(sess: MonitoredSession, window: Callable[[], Awaitable[object]]) -> list[int]:
    """The bytes each of ``WINDOWS`` windows in a row left alive (allocated under ``OURS``),
    untraced, after one window that only starts the count (what is made once, such as the
    tasks that one ``iterate`` keeps for its lanes, is made there and replaced later)."""
    alive: list[int] = []
    with _untraced():
        tracemalloc.start(FRAMES)
        try:
            for _ in range(WINDOWS + 1):
                await window()
                _settle(sess)
                alive.append(sum(trace.size for trace in tracemalloc.take_snapshot().filter_traces(OURS).traces))
        finally:
            tracemalloc.stop()
    return [after - before for before, after in itertools.pairwise(alive)]


@pytest.mark.anyio
async def test_soak_memory_objects_and_tasks_stay_flat() -> None:
    """After warm-up, windows of 1k steps leave no memory behind, nor 10k steps objects or tasks."""
    with anyio.fail_after(120):
        async with MonitoredSession(_LeanCreator(), _hooks()) as sess:
            for _ in range(WARMUP):
                await sess.run("a")
            tasks = len(anyio.get_running_tasks())
            _settle(sess)
            growth = await _growth(sess, functools.partial(_runs, sess, WINDOW))
            _settle(sess)
            objects = len(gc.get_objects())
            for step in range(STEPS):
                await sess.run("a")
                if step % 1_000 == 0:
                    assert len(anyio.get_running_tasks()) == tasks
                    assert len(sess._stats.records) <= _FOLD
            _settle(sess)
            grown = len(gc.get_objects()) - objects
    assert sorted(growth)[WINDOWS // 2] < LEFT_ALIVE, f"windows of {WINDOW} steps left {growth} bytes alive"
    assert grown < 200, f"{STEPS} steps left {grown} more gc-tracked objects"


async def _runs(sess: MonitoredSession, n: int) -> None:
    for _ in range(n):
        await sess.run("a")


async def _steps(sess: MonitoredSession, n: int) -> None:
    async for _ in sess.iterate("a", itertools.repeat(None, n)):
        pass


@pytest.mark.anyio
async def test_soak_with_four_steps_in_flight_stays_flat() -> None:
    """Four lanes, iterate() windows: after warm-up, windows of 500 steps leave no memory
    behind, nor 4k steps objects or tasks, and the runs really overlapped four at a time."""
    creator = _OverlappingCreator()
    with anyio.fail_after(120):
        async with MonitoredSession(creator, _hooks(), max_in_flight=4) as sess:
            await _steps(sess, LANE_WARMUP)
            tasks = len(anyio.get_running_tasks())
            _settle(sess)
            growth = await _growth(sess, functools.partial(_steps, sess, LANE_WINDOW))
            _settle(sess)
            objects = len(gc.get_objects())
            for _ in range(LANE_STEPS // 500):
                await _steps(sess, 500)
                assert len(anyio.get_running_tasks()) == tasks
                assert len(sess._stats.records) <= _FOLD
            _settle(sess)
            grown = len(gc.get_objects()) - objects
    assert creator.shared[1] == 4, f"at most {creator.shared[1]} runs overlapped"
    assert sorted(growth)[WINDOWS // 2] < LEFT_ALIVE, f"windows of {LANE_WINDOW} steps left {growth} bytes alive"
    assert grown < 200, f"{LANE_STEPS} steps left {grown} more gc-tracked objects"



def test_the_windows_run_without_this_threads_line_tracer() -> None:
    """A line tracer of this thread (coverage's, as CI runs) is off over the windows, back after."""

    def tracer(frame: FrameType, event: str, arg: object) -> None:
        return None

    seen: list[object] = []
    before = sys.gettrace()
    sys.settrace(tracer)
    try:
        with _untraced():
            seen.append(sys.gettrace())
        seen.append(sys.gettrace())
    finally:
        sys.settrace(before)
    assert seen == [None, tracer]
