"""Steady-state memory of long runs, and the wall time of ``import hookrun``.

Memory: a monitored session runs a warm-up, then two phases:

* a ``tracemalloc`` window (``steps / 50`` steps, at least 1,000): tracemalloc's
  current bytes after the window (it starts at zero right after warm-up, so this
  is what the window left alive) and its peak (the transient memory of a step);
  tracemalloc slows a step ten-fold, so it does not run for the whole run;
* the long run (``steps`` steps) without tracemalloc: after every tenth we record
  the process RSS (``VmRSS`` of ``/proc/self/status``), the number of objects the
  garbage collector tracks and ``sys.getallocatedblocks()`` (live pymalloc
  blocks, an exact leak detector for Python objects), each after a full
  ``gc.collect()``.

Growth is the last record minus the first. A run is *flat* when the window left
at most ``FLAT_BYTES`` alive, and the long run grew by at most ``FLAT_OBJECTS``
gc objects and ``FLAT_BLOCKS`` blocks.

Import time: paired subprocess runs of ``python -c "import hookrun"``,
``python -c "import anyio"`` and ``python -c pass``, in rotating order, with a
bytecode cache of their own (``PYTHONPYCACHEPREFIX``, warmed first), and
``import hookrun`` once more in the environment as it is.
"""

from __future__ import annotations

import gc
import os
import subprocess
import sys
import tempfile
import time
import tracemalloc
from collections.abc import Mapping
from typing import Any

import hookrun

from ._harness import stats
from .cases import AsyncFetch, AsyncNoop, HookFactory, PlainNoop, SuspendOnce, TrivialCreator

__all__ = ["FLAT_BLOCKS", "FLAT_BYTES", "FLAT_OBJECTS", "import_times", "memory_run", "workloads"]

#: Largest tracemalloc growth (bytes) after warm-up that still counts as flat.
FLAT_BYTES = 64 * 1024
#: Largest growth of the gc-tracked object count that still counts as flat.
FLAT_OBJECTS = 200
#: Largest growth of live pymalloc blocks that still counts as flat.
FLAT_BLOCKS = 1000
#: Records taken after warm-up.
CHUNKS = 10


def workloads(steps: int) -> dict[str, tuple[HookFactory, int]]:
    """The memory workloads: name -> (hooks, steps).

    ``inline_mix``: 4 async no-op, 3 plain and 3 fetching hooks; none suspends, so
    no task is ever made. ``suspending_mix``: the same with one suspend-once hook in
    front, so every phase starts a child task (a tenth of the steps: it is slower).
    """

    def inline() -> list[hookrun.SessionRunHook]:
        return [
            *(AsyncNoop() for _ in range(4)),
            *(PlainNoop() for _ in range(3)),
            *(AsyncFetch(i) for i in range(3)),
        ]

    def suspending() -> list[hookrun.SessionRunHook]:
        return [SuspendOnce(), *inline()]

    return {"inline_mix": (inline, steps), "suspending_mix": (suspending, max(steps // 10, 1000))}


def rss_kib() -> int | None:
    """Resident set size from ``/proc/self/status``, in KiB."""
    try:
        with open("/proc/self/status", encoding="ascii") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return None


def _record(step: int) -> dict[str, Any]:
    gc.collect()
    return {
        "step": step,
        "rss_kib": rss_kib(),
        "gc_objects": len(gc.get_objects()),
        "allocated_blocks": sys.getallocatedblocks(),
    }


async def _steps(session: hookrun.MonitoredSession, n: int) -> None:
    for _ in range(n):
        await session.run()


async def memory_run(make_hooks: HookFactory, steps: int) -> dict[str, Any]:
    """Warm up, trace a window with tracemalloc, then run ``steps`` steps recording memory."""
    warmup = min(10_000, max(steps // 10, 100))
    window = max(steps // 50, 1000)
    chunk = max(steps // CHUNKS, 1)
    started = time.perf_counter()
    async with hookrun.MonitoredSession(TrivialCreator(), make_hooks()) as session:
        await _steps(session, warmup)
        gc.collect()
        tracemalloc.start()
        try:
            await _steps(session, window)
            gc.collect()
            current, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
        records = [_record(0)]
        done = 0
        while done < steps:
            todo = min(chunk, steps - done)
            await _steps(session, todo)
            done += todo
            records.append(_record(done))
    traced = {"steps": window, "current_bytes": current, "peak_bytes": peak}
    return _summary(records, warmup, traced, time.perf_counter() - started)


def _summary(records: list[dict[str, Any]], warmup: int, traced: dict[str, int], seconds: float) -> dict[str, Any]:
    first, last = records[0], records[-1]
    rss = None if first["rss_kib"] is None or last["rss_kib"] is None else last["rss_kib"] - first["rss_kib"]
    objects = last["gc_objects"] - first["gc_objects"]
    blocks = last["allocated_blocks"] - first["allocated_blocks"]
    growth = {"rss_kib": rss, "gc_objects": objects, "allocated_blocks": blocks}
    flat = traced["current_bytes"] <= FLAT_BYTES and objects <= FLAT_OBJECTS and blocks <= FLAT_BLOCKS
    return {
        "steps": last["step"],
        "warmup_steps": warmup,
        "seconds": round(seconds, 2),
        "tracemalloc": traced,
        "growth": growth,
        "flat": flat,
        "records": records,
    }


#: name -> (code, bytecode cache): "cached" runs with a warmed bytecode cache of its own
#: (what an installed package gets); "env" runs in the environment as it is (with
#: ``PYTHONDONTWRITEBYTECODE=1`` and an editable install, hookrun is compiled every time).
IMPORT_COMMANDS: Mapping[str, tuple[str, str]] = {
    "import_hookrun": ("import hookrun", "cached"),
    "import_anyio": ("import anyio", "cached"),
    "python_pass": ("pass", "cached"),
    "import_hookrun_env": ("import hookrun", "env"),
}


def import_times(runs: int) -> dict[str, Any]:
    """Wall ms of each command (median of ``runs``) and pair-wise differences."""
    base = dict(os.environ)
    src = os.path.dirname(os.path.dirname(os.path.abspath(hookrun.__file__)))
    base["PYTHONPATH"] = os.pathsep.join(filter(None, [src, base.get("PYTHONPATH")]))
    with tempfile.TemporaryDirectory(prefix="hookrun-bench-pycache-") as cache:
        cached = {k: v for k, v in base.items() if k != "PYTHONDONTWRITEBYTECODE"}
        cached["PYTHONPYCACHEPREFIX"] = cache
        envs = {"cached": cached, "env": base}
        names = list(IMPORT_COMMANDS)
        for name in names:  # warm the bytecode cache and the OS file cache
            code, env = IMPORT_COMMANDS[name]
            _wall_ms(code, envs[env])
        samples: list[dict[str, float]] = []
        for r in range(runs):
            order = names[r % len(names):] + names[: r % len(names)]
            samples.append({name: _wall_ms(IMPORT_COMMANDS[name][0], envs[IMPORT_COMMANDS[name][1]]) for name in order})
    result: dict[str, Any] = {
        "runs": runs,
        "dont_write_bytecode_in_env": bool(base.get("PYTHONDONTWRITEBYTECODE")),
        "wall_ms": {n: stats([s[n] for s in samples]) for n in names},
    }
    result["diff_ms"] = {
        "hookrun_minus_pass": stats([s["import_hookrun"] - s["python_pass"] for s in samples]),
        "anyio_minus_pass": stats([s["import_anyio"] - s["python_pass"] for s in samples]),
        "hookrun_minus_anyio": stats([s["import_hookrun"] - s["import_anyio"] for s in samples]),
    }
    return result


def _wall_ms(code: str, env: Mapping[str, str]) -> float:
    start = time.perf_counter_ns()
    subprocess.run([sys.executable, "-c", code], env=env, check=True)
    return (time.perf_counter_ns() - start) / 1e6
