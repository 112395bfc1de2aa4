"""The timed loops of ``python -m benchmarks.in_flight``: hookrun with steps in flight (its
``iterate``, and ``run`` awaited from N tasks), and the hand-written anyio loop it is
compared with.

Both drive the same raw session (``SleepSession``: each run is an in-process sleep
standing for a remote step) under the same hooks (``hook_set``: 10 async no-op
hooks and a ``StepCounterHook``), keep up to ``n`` steps in flight and hand the
results on in feed order, checking each one. Each sampler opens what it needs,
runs ``gc.collect()``, times ``steps`` steps, and closes what it opened (untimed).
"""

from __future__ import annotations

import gc
import random
from collections.abc import Hashable, Mapping, Sequence
from typing import Any

import anyio

from hookrun import (
    MonitoredSession,
    RunMetadata,
    RunOptions,
    SessionRunArgs,
    SessionRunContext,
    SessionRunHook,
    SessionRunValues,
)
from hookrun.hooks import StepCounterHook

from ._harness import Case, Timing, clock, timed

__all__ = ["NOOP_HOOKS", "VARIED", "NoopHook", "SleepSession", "baseline_case", "hook_set", "hookrun_case", "mean_latency", "tasks_case"]

#: The async no-op hooks of every case (a ``StepCounterHook`` comes on top).
NOOP_HOOKS = 10
FETCHES = ["y"]


class NoopHook(SessionRunHook):
    """An async hook whose ``before_run`` and ``after_run`` return at once."""

    overlapping_steps = True

    async def before_run(self, run_context: SessionRunContext) -> None:
        return None

    async def after_run(self, run_context: SessionRunContext, run_values: SessionRunValues) -> None:
        return None


def _hooks() -> tuple[list[NoopHook], StepCounterHook]:
    return [NoopHook() for _ in range(NOOP_HOOKS)], StepCounterHook(every_n_steps=100)


def hook_set() -> list[SessionRunHook]:
    """``NOOP_HOOKS`` async no-op hooks and a ``StepCounterHook`` (last)."""
    noop, counter_hook = _hooks()
    return [*noop, counter_hook]


class SleepSession:
    """A raw session whose ``run`` sleeps ``seconds`` (a remote step's wait) and returns
    the feed's ``x`` for every fetch."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds

    async def run(
        self,
        fetches: Sequence[Hashable],
        feed_dict: Mapping[Any, Any],
        options: RunOptions,
        run_metadata: RunMetadata,
    ) -> list[Any]:
        await anyio.sleep(feed_dict.get("s", self.seconds))
        x = feed_dict["x"]
        return [x for _ in fetches]


#: A varied step's latency is drawn from this range, seconds (``seconds=None``).
VARIED = (0.002, 0.020)


def _feeds(steps: int, seconds: float | None) -> list[dict[str, Any]]:
    """The feeds: ``x`` is the index; with ``seconds=None`` each carries its step's latency
    ``s``, drawn from ``VARIED`` seeded by the index, so every case sees the same ones."""
    if seconds is not None:
        return [{"x": i} for i in range(steps)]
    return [{"x": i, "s": random.Random(i).uniform(*VARIED)} for i in range(steps)]


def mean_latency(seconds: float | None, steps: int) -> float:
    """The mean latency of the first ``steps`` steps (``seconds`` when it is fixed)."""
    if seconds is not None:
        return seconds
    return float(sum(feed["s"] for feed in _feeds(steps, None))) / steps


def _session(seconds: float | None) -> SleepSession:
    return SleepSession(seconds if seconds is not None else sum(VARIED) / 2)


def _wrong(i: int, got: object) -> RuntimeError:
    return RuntimeError(f"result {i} came out of order or wrong: {got!r}")


def hookrun_case(name: str, seconds: float | None, in_flight: int, steps: int) -> Case:
    """``MonitoredSession(..., max_in_flight=in_flight)`` iterating ``steps`` feeds, in order."""

    async def sample(n: int) -> Timing:
        feeds = _feeds(n, seconds)
        session = MonitoredSession(lambda: _session(seconds), hook_set(), max_in_flight=in_flight)
        async with session:
            gc.collect()
            start = clock()
            i = 0
            async for (y,) in session.iterate(FETCHES, feeds):
                if y != i:
                    raise _wrong(i, y)
                i += 1
            elapsed = timed(start)
        if i != n:
            raise RuntimeError(f"{name}: {i} of {n} steps ran")
        return elapsed

    return Case(name, sample, n=steps)


def tasks_case(name: str, seconds: float | None, in_flight: int, steps: int) -> Case:
    """The same session driven by ``in_flight`` tasks, each awaiting ``session.run`` on the
    next feed (results as each run returns, not re-ordered)."""

    async def sample(n: int) -> Timing:
        feeds = iter(_feeds(n, seconds))
        ran = 0

        async def caller() -> None:
            nonlocal ran
            for feed in feeds:
                (y,) = await session.run(FETCHES, feed)
                if y != feed["x"]:
                    raise _wrong(feed["x"], y)
                ran += 1

        session = MonitoredSession(lambda: _session(seconds), hook_set(), max_in_flight=in_flight)
        async with session:
            gc.collect()
            start = clock()
            async with anyio.create_task_group() as tg:
                for _ in range(in_flight):
                    tg.start_soon(caller)
            elapsed = timed(start)
        if ran != n:
            raise RuntimeError(f"{name}: {ran} of {n} steps ran")
        return elapsed

    return Case(name, sample, n=steps)


def baseline_case(name: str, seconds: float | None, in_flight: int, steps: int) -> Case:
    """The hand-written loop: a task group, a semaphore of ``in_flight``, the same hooks
    awaited inline before and after each run, results re-ordered by index (the step
    counter hook sees them in that order, with the step count as its global step)."""

    async def sample(n: int) -> Timing:
        feeds = _feeds(n, seconds)
        noop, counter_hook = _hooks()
        await counter_hook.begin()  # the no-op hooks have no begin
        session = _session(seconds)
        options, args = RunOptions(), SessionRunArgs(FETCHES)
        slots = anyio.Semaphore(in_flight)
        done: dict[int, Any] = {}
        emitted = 0

        async def one(i: int, feed: dict[str, Any]) -> None:
            nonlocal emitted
            try:
                ctx = SessionRunContext(args, session, i)
                for hook in noop:
                    await hook.before_run(ctx)
                metadata = RunMetadata()
                results = await session.run(FETCHES, feed, options, metadata)
                values = SessionRunValues(None, options, metadata, i + 1)
                for hook in noop:
                    await hook.after_run(ctx, values)
                done[i] = (results, ctx, values)
                while emitted in done:  # hand the results on in feed order
                    (y,), first_ctx, first_values = done.pop(emitted)
                    if y != emitted:
                        raise _wrong(emitted, y)
                    counter_hook.after_run(first_ctx, first_values)
                    emitted += 1
            finally:
                slots.release()

        gc.collect()
        start = clock()
        async with anyio.create_task_group() as tg:
            for i, feed in enumerate(feeds):
                await slots.acquire()
                tg.start_soon(one, i, feed)
        elapsed = timed(start)
        await counter_hook.end(session)
        if emitted != n:
            raise RuntimeError(f"{name}: {emitted} of {n} steps ran")
        return elapsed

    return Case(name, sample, n=steps)
