"""What the always-on statistics cost: ``python -m benchmarks.statistics``.

K = 10 async no-op hooks, a monitored session with ``statistics=True`` (the default)
and one with ``statistics=False``, sampled in interleaved rounds (the order rotates
each round) on asyncio and trio. Prints JSON: per backend, the per-step us of both
and the median of the per-round ratio on / off.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from typing import Any

import anyio

from hookrun import MonitoredSession

from ._harness import CLOCKS, Case, Timing, measure, pin_cpu
from .cases import TrivialCreator, _time_steps, hooks_of

K = 10


def stats_step(enabled: bool) -> Any:
    hooks = hooks_of("async", K)()

    async def sample(n: int) -> Timing:
        async with MonitoredSession(TrivialCreator(), hooks, statistics=enabled) as session:
            elapsed = await _time_steps(session, n)
        return elapsed

    return sample


async def _measure(rounds: int, sample_ms: float, clock: str) -> dict[str, Any]:
    cases = [Case("statistics_on", stats_step(True)), Case("statistics_off", stats_step(False))]
    result = await measure(cases, rounds, sample_ms, clock=clock)
    return {
        "on_us": result.per_step("statistics_on"),
        "off_us": result.per_step("statistics_off"),
        "ratio": result.derive(lambda r: r["statistics_on"] / r["statistics_off"]),
        "steps": result.steps,
    }


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m benchmarks.statistics", description=__doc__)
    p.add_argument("--rounds", type=int, default=7)
    p.add_argument("--sample-ms", type=float, default=120.0)
    p.add_argument("--backends", default="asyncio,trio")
    p.add_argument("--clock", choices=CLOCKS, default="wall", help="wall time, or the thread's CPU time")
    p.add_argument("--pin", action=argparse.BooleanOptionalAction, default=True)
    args = p.parse_args(argv)
    pin_cpu(args.pin)
    out: dict[str, Any] = {"hooks": K, "kind": "async no-op", "clock": args.clock}
    for backend in args.backends.split(","):
        out[backend] = anyio.run(_measure, args.rounds, args.sample_ms, args.clock, backend=backend)
    json.dump(out, sys.stdout, indent=2)
    print()
    return 0


if __name__ == "__main__":
    sys.exit(main())
