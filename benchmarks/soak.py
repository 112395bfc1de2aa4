"""Soak: a long run of a monitored session with 10 hooks on each backend.

``python -m benchmarks.soak [--steps N] [--backend asyncio|trio|both]`` prints one
JSON object per backend. Method (as in ``benchmarks/memory.py``):

* a warm-up of ``max(1_000, steps // 100)`` steps;
* a ``tracemalloc`` window of ``max(1_000, steps // 50)`` steps (tracemalloc slows a
  step ten-fold, so it does not run for the whole soak): the bytes the window left
  alive (tracemalloc starts at zero right after warm-up) and its peak;
* the soak itself, ``steps`` steps without tracemalloc, with eleven records (start,
  after every tenth, end) of the process RSS (``VmRSS``), the number of objects the
  garbage collector tracks, ``sys.getallocatedblocks()`` and the number of running
  tasks, each after a full ``gc.collect()``.

The ten hooks mix every kind the dispatcher distinguishes: plain functions, async
functions that finish without suspending, async functions that suspend (a
checkpoint), hooks that fetch nested structures, feed a key, or only count.
"""

from __future__ import annotations

import argparse
import gc
import importlib.metadata
import json
import sys
import time
import tracemalloc
from collections.abc import Hashable, Mapping, Sequence
from typing import Any

import anyio
import anyio.lowlevel

from hookrun import (
    MonitoredSession,
    RunMetadata,
    RunOptions,
    SessionRunArgs,
    SessionRunContext,
    SessionRunHook,
    SessionRunValues,
)

__all__ = ["main", "soak"]


class _Session:
    """Answers every fetch with the step number (no per-step record kept)."""

    def __init__(self) -> None:
        self.steps = 0

    async def run(
        self,
        fetches: Sequence[Hashable],
        feed_dict: Mapping[Hashable, Any],
        options: RunOptions,
        run_metadata: RunMetadata,
    ) -> list[Any]:
        self.steps += 1
        return [feed_dict.get(key, self.steps) for key in fetches]

    async def aclose(self) -> None:
        return None


class _Creator:
    async def create_session(self) -> _Session:
        return _Session()


class _SyncCounter(SessionRunHook):
    def __init__(self, name: str) -> None:
        self.name = name
        self.after = 0

    def after_run(self, run_context: SessionRunContext, run_values: SessionRunValues) -> None:
        self.after += 1


class _AsyncFetcher(SessionRunHook):
    def __init__(self, name: str) -> None:
        self.name = name
        self.request = SessionRunArgs({"loss": "loss", "pair": ("step", name)})
        self.seen = 0

    async def before_run(self, run_context: SessionRunContext) -> SessionRunArgs:
        return self.request

    async def after_run(self, run_context: SessionRunContext, run_values: SessionRunValues) -> None:
        self.seen = run_values.results["pair"][0]


class _Suspender(SessionRunHook):
    def __init__(self, name: str) -> None:
        self.name = name

    async def before_run(self, run_context: SessionRunContext) -> None:
        await anyio.lowlevel.checkpoint()


class _Feeder(SessionRunHook):
    def __init__(self, name: str) -> None:
        self.name = name
        self.request = SessionRunArgs([name + "/fed"], {name + "/fed": 1})

    def before_run(self, run_context: SessionRunContext) -> SessionRunArgs:
        return self.request


def make_hooks() -> list[SessionRunHook]:
    """Ten hooks: 3 plain counters, 4 async fetchers, 2 suspending, 1 feeder."""
    hooks: list[SessionRunHook] = [_SyncCounter(f"count{i}") for i in range(3)]
    hooks += [_AsyncFetcher(f"fetch{i}") for i in range(4)]
    hooks += [_Suspender(f"suspend{i}") for i in range(2)]
    hooks.append(_Feeder("feed"))
    return hooks


def _rss_kib() -> int:
    try:
        with open("/proc/self/status", encoding="ascii") as status:
            for line in status:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return -1


def _record(step: int) -> dict[str, int]:
    gc.collect()
    return {
        "step": step,
        "rss_kib": _rss_kib(),
        "gc_objects": len(gc.get_objects()),
        "allocated_blocks": sys.getallocatedblocks(),
        "tasks": len(anyio.get_running_tasks()),
    }


async def _steps(sess: MonitoredSession, n: int) -> None:
    for _ in range(n):
        await sess.run("loss")


async def soak(steps: int) -> dict[str, Any]:
    """Run the soak on the current backend and return its figures."""
    warmup = max(1_000, steps // 100)
    window = max(1_000, steps // 50)
    baseline_tasks = len(anyio.get_running_tasks())
    async with MonitoredSession(_Creator(), make_hooks()) as sess:
        open_tasks = len(anyio.get_running_tasks())
        await _steps(sess, warmup)
        gc.collect()
        tracemalloc.start()
        await _steps(sess, window)
        gc.collect()
        window_current, window_peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
        records = [_record(0)]
        started = time.perf_counter()
        tenth = max(1, steps // 10)
        done = 0
        while done < steps:
            chunk = min(tenth, steps - done)
            await _steps(sess, chunk)
            done += chunk
            records.append(_record(done))
        elapsed = time.perf_counter() - started
    first, last = records[0], records[-1]
    return {
        "steps": steps,
        "hooks": 10,
        "us_per_step": round(elapsed / steps * 1e6, 2),
        "tracemalloc_window_steps": window,
        "tracemalloc_window_left_alive_bytes": window_current,
        "tracemalloc_window_peak_bytes": window_peak,
        "rss_kib_after_warmup": first["rss_kib"],
        "rss_kib_end": last["rss_kib"],
        "gc_objects_after_warmup": first["gc_objects"],
        "gc_objects_end": last["gc_objects"],
        "allocated_blocks_after_warmup": first["allocated_blocks"],
        "allocated_blocks_end": last["allocated_blocks"],
        "tasks_before_session": baseline_tasks,
        "tasks_while_open": open_tasks,
        "tasks_min_max_during_soak": [min(r["tasks"] for r in records), max(r["tasks"] for r in records)],
        "tasks_after_exit": len(anyio.get_running_tasks()),
        "records": records,
    }


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--steps", type=int, default=1_000_000, help="soak steps per backend")
    parser.add_argument("--backend", choices=["asyncio", "trio", "both"], default="both")
    args = parser.parse_args(argv)
    if args.steps < 1:
        parser.error("--steps must be >= 1")
    backends = ["asyncio", "trio"] if args.backend == "both" else [args.backend]
    out: dict[str, Any] = {
        "python": sys.version.split()[0],
        "anyio": importlib.metadata.version("anyio"),
    }
    for backend in backends:
        out[backend] = anyio.run(soak, args.steps, backend=backend)
    print(json.dumps(out, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
