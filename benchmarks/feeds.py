"""Feeds of ``iterate()`` with one lane, run on demand: what an async feed costs per step.

    python -m benchmarks.feeds [--quick] [--backends asyncio,trio] [--clock wall|cpu] [--json PATH]

Per backend, ``async for ... in session.iterate(fetches, feeds)`` on a monitored session
with one async no-op hook over a session that returns at once, ``max_in_flight=1``:

* ``list``: the feed dicts in a list;
* ``agen``: the same feed dicts from an async generator that never waits;
* ``agen_wait``: from an async generator that passes one checkpoint before each item
  (a feed that waits: ``iterate`` waits for it under a cancel scope of its own).

The figure is each async feed's per-step time over the list's, pair-wise within a round;
rounds rotate the order of the cases. Like the other benchmarks the JSON goes to stdout
and the table to stderr, or the JSON to ``--json PATH`` and the table to stdout.
"""

from __future__ import annotations

import argparse
import gc
import os
import sys
from collections.abc import AsyncIterator, Sequence
from typing import Any

if __package__ in (None, ""):  # run as a script: make ``benchmarks`` and ``hookrun`` importable
    _root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    sys.path[:0] = [_root, os.path.join(_root, "src")]
    __package__ = "benchmarks"

import anyio
import anyio.lowlevel

from hookrun import MonitoredSession

from ._harness import (
    CLOCKS,
    Case,
    Measurement,
    Timing,
    clock,
    emit,
    machine_info,
    measure,
    pin_cpu,
    timed,
)
from .cases import TrivialCreator, hooks_of
from .report import fmt_stats

__all__ = ["main"]

FETCHES = ["y"]
KINDS = ("list", "agen", "agen_wait")


async def _agen(n: int, wait: bool) -> AsyncIterator[dict[str, int]]:
    for i in range(n):
        if wait:
            await anyio.lowlevel.checkpoint()
        yield {"x": i}


def _case(kind: str) -> Case:
    async def sample(n: int) -> Timing:
        feeds: Any = [{"x": i} for i in range(n)] if kind == "list" else _agen(n, kind == "agen_wait")
        steps = 0
        async with MonitoredSession(TrivialCreator(), hooks_of("async", 1)()) as session:
            gc.collect()
            start = clock()
            async for _ in session.iterate(FETCHES, feeds):
                steps += 1
            elapsed = timed(start)
        if steps != n:
            raise RuntimeError(f"{kind}: {steps} of {n} steps ran")
        return elapsed

    return Case(kind, sample)


def _over_list(kind: str) -> Any:
    return lambda r: r[kind] / r["list"]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="fewer and shorter rounds")
    parser.add_argument("--backends", default="asyncio,trio")
    parser.add_argument("--clock", choices=CLOCKS, default="wall")
    parser.add_argument("--no-pin", action="store_true", help="do not pin the process to one CPU")
    parser.add_argument("--json", dest="json_path")
    args = parser.parse_args(argv)
    rounds, sample_ms = (3, 40.0) if args.quick else (9, 150.0)
    pinned = pin_cpu(not args.no_pin)
    backends = args.backends.split(",")
    cases = [_case(kind) for kind in KINDS]
    measurements = {backend: Measurement(args.clock) for backend in backends}
    for _ in range(rounds):  # backends alternate, one round each at a time
        for backend in backends:
            anyio.run(measure, cases, 1, sample_ms, None, measurements[backend], args.clock, backend=backend)
    result: dict[str, Any] = {"machine": machine_info(), "pinned": pinned, "clock": args.clock, "backends": {}}
    lines = ["iterate() at max_in_flight=1, one async no-op hook: per-step us, median [min-max]"]
    for backend, m in measurements.items():
        per_step = {kind: m.per_step(kind) for kind in KINDS}
        ratios = {kind: m.derive(_over_list(kind)) for kind in KINDS[1:]}
        result["backends"][backend] = {"steps": m.steps, "per_step_us": per_step, "over_list": ratios}
        lines.append(f"  {backend}")
        for kind in KINDS:
            ratio = f"   x{fmt_stats(ratios[kind])} of list" if kind in ratios else ""
            lines.append(f"    {kind:<10} {fmt_stats(per_step[kind])}{ratio}")
    emit(result, "\n".join(lines), args.json_path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
