"""Timing machinery shared by the benchmark runner and the peer benchmarks.

Method: every case is an async *sampler*
``sample(n) -> ns`` that sets itself up, runs ``gc.collect()``, and times a loop of
``n`` steps with ``time.perf_counter_ns`` (set-up and tear-down excluded). Each case
is calibrated once so that one sample lasts about ``sample_ms``; then every round
samples every case once, in an order that rotates from round to round.
Differences and ratios are taken pair-wise within a round, and only then is the
median taken over the rounds.
"""

from __future__ import annotations

import datetime
import importlib.metadata
import json
import math
import os
import platform
import statistics
import sys
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple

__all__ = [
    "CLOCKS",
    "Case",
    "Measurement",
    "RoundFn",
    "Stats",
    "Timing",
    "calibrate",
    "clock",
    "emit",
    "machine_info",
    "measure",
    "pin_cpu",
    "stats",
    "timed",
]

class Timing(NamedTuple):
    """What one sample took: wall time, and the CPU time of the calling thread."""

    wall_ns: int
    cpu_ns: int


Sampler = Callable[[int], Awaitable[Timing]]
#: The clocks a measurement can be analysed with.
CLOCKS = ("wall", "cpu")
#: A per-round value computed from the round's per-step µs of every case.
RoundFn = Callable[[Mapping[str, float]], float]
Stats = dict[str, float]


@dataclass(frozen=True)
class Case:
    """One timed loop: ``sample(n)`` returns the :class:`Timing` of ``n`` steps.

    ``n`` fixes the step count (no calibration); otherwise it is calibrated within
    ``[min_n, max_n]``.
    """

    name: str
    sample: Sampler
    n: int | None = None
    min_n: int = 10
    max_n: int = 500_000


@dataclass
class Measurement:
    """Per-step µs of every case, one value per round, and the calibrated step counts.

    ``rounds`` holds the figures of the chosen ``clock`` (wall or thread CPU time);
    ``cpu_share`` holds CPU time / wall time per case and round: well below 1, the
    process was not running for part of the sample (another process had the CPU).
    """

    clock: str = "wall"
    steps: dict[str, int] = field(default_factory=dict)
    rounds: list[dict[str, float]] = field(default_factory=list)
    cpu_share: list[dict[str, float]] = field(default_factory=list)

    def per_step(self, name: str, scale: float = 1.0) -> Stats:
        """Stats of one case's per-step µs (times ``scale``)."""
        return stats([r[name] * scale for r in self.rounds])

    def derive(self, fn: RoundFn) -> Stats:
        """Stats of ``fn`` evaluated round by round (pair-wise within a round)."""
        return stats([fn(r) for r in self.rounds])

    def share(self, name: str) -> Stats:
        """Stats of one case's CPU time / wall time."""
        return stats([r[name] for r in self.cpu_share])


def stats(values: Sequence[float]) -> Stats:
    """Median and range of ``values``."""
    return {
        "median": statistics.median(values),
        "min": min(values),
        "max": max(values),
        "n": len(values),
    }


def clock() -> tuple[int, int]:
    """Start a timing: ``perf_counter_ns`` and ``thread_time_ns`` now."""
    return time.perf_counter_ns(), time.thread_time_ns()


def timed(start: tuple[int, int]) -> Timing:
    """The :class:`Timing` since ``start`` (a :func:`clock` reading)."""
    cpu = time.thread_time_ns()
    wall = time.perf_counter_ns()
    return Timing(wall - start[0], cpu - start[1])


async def calibrate(case: Case, sample_ms: float) -> int:
    """A step count for which one sample of ``case`` lasts about ``sample_ms``."""
    if case.n is not None:
        await case.sample(case.n)  # warm-up
        return case.n
    target_ns = sample_ms * 1e6
    n = 1
    while True:
        elapsed = max((await case.sample(n)).wall_ns, 1)
        if elapsed >= target_ns / 8 or n >= case.max_n:
            break
        n = min(case.max_n, n * max(2, int(target_ns / 8 / elapsed)))
    n = math.ceil(n * target_ns / elapsed)
    return max(case.min_n, min(case.max_n, n))


async def measure(
    cases: Sequence[Case],
    rounds: int,
    sample_ms: float,
    progress: Callable[[str], None] | None = None,
    into: Measurement | None = None,
    clock: str = "wall",
) -> Measurement:
    """Sample each case once per round, in an order that rotates from round to round.

    Cases are calibrated (on wall time) first unless ``into`` (a measurement to add
    rounds to) already holds their step counts; rotation carries on from ``into``'s
    rounds, so rounds can be spread over several calls (and event loops).
    """
    result = into if into is not None else Measurement(clock)
    for case in cases:
        if case.name not in result.steps:
            result.steps[case.name] = await calibrate(case, sample_ms)
    for _ in range(rounds):
        shift = len(result.rounds) % len(cases)
        order = [*cases[shift:], *cases[:shift]]
        this_round: dict[str, float] = {}
        shares: dict[str, float] = {}
        for case in order:
            n = result.steps[case.name]
            timing = await case.sample(n)
            chosen = timing.cpu_ns if result.clock == "cpu" else timing.wall_ns
            this_round[case.name] = chosen / n / 1000.0
            shares[case.name] = timing.cpu_ns / max(timing.wall_ns, 1)
        result.rounds.append(this_round)
        result.cpu_share.append(shares)
        if progress is not None:
            progress(f"round {len(result.rounds)}")
    return result


def pin_cpu(enabled: bool) -> list[int] | None:
    """Pin this process (and threads it starts later) to the last allowed CPU."""
    if not enabled or not hasattr(os, "sched_setaffinity"):
        return None
    cpu = max(os.sched_getaffinity(0))
    os.sched_setaffinity(0, {cpu})
    return sorted(os.sched_getaffinity(0))


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            info = f.read()
    except OSError:
        return platform.processor() or "unknown"
    fields: dict[str, str] = {}
    for line in info.splitlines():
        key, _, value = line.partition(":")
        fields.setdefault(key.strip(), value.strip())
    model = fields.get("model name", "unknown")
    extra = [f"{k} {fields[k]}" for k in ("cpu family", "model", "cpu MHz") if k in fields]
    return f"{model} ({', '.join(extra)})" if extra else model


def _version(dist: str) -> str | None:
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return None


def machine_info(packages: Sequence[str] = ("anyio", "trio", "uvloop", "hookrun")) -> dict[str, Any]:
    """Where and with what the figures were measured."""
    return {
        "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "python": sys.version.split()[0],
        "implementation": platform.python_implementation(),
        "versions": {name: _version(name) for name in packages},
        "cpu_model": _cpu_model(),
        "cpus": os.cpu_count(),
        "platform": platform.platform(),
        "load_average": list(os.getloadavg()) if hasattr(os, "getloadavg") else None,
    }


def emit(result: Mapping[str, Any], table: str, json_path: str | None) -> None:
    """Print a benchmark's outcome: the JSON document on stdout and the table on stderr,
    or, with ``json_path``, the document to that file and the table on stdout."""
    document = json.dumps(result, indent=2)
    if json_path:
        with open(json_path, "w", encoding="utf-8") as f:
            f.write(document + "\n")
        print(table)
    else:
        print(table, file=sys.stderr)
        print(document)
