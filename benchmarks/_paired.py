"""Paired sampling for the remote benchmarks: a case and its baseline, interleaved step by step.

A remote step's time drifts by tens of percent from second to second on a shared
machine, and now and then a step waits for a CPU that another process holds: both
are far more than what hooks add to it. So each case is timed against its own
baseline in the same window: ``steps`` steps of each, alternating in blocks of
``block`` steps (baseline, case, case, baseline, ...), both open side by side,
every step timed. A sample gives, per side, the mean step time without that side's
slowest ``TRIM`` share of steps (the steps another process preempted, which land on
either side alike) and the plain mean.
"""

from __future__ import annotations

import math
import statistics
import time
from collections.abc import Awaitable, Callable, Sequence
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass

from ._harness import Measurement

__all__ = ["MEAN", "TRIM", "Pair", "Step", "measure_pairs", "sample_pair"]

Step = Callable[[], Awaitable[object]]
Opener = Callable[[], AbstractAsyncContextManager[Step]]
#: The share of each side's slowest steps left out of its trimmed mean.
TRIM = 0.1
#: The suffix of a round's plain-mean figures (``name~mean``).
MEAN = "~mean"


@dataclass(frozen=True)
class Pair:
    """A case (``name``) and the baseline it is compared with (``base``); each opener
    yields the step function, with whatever it needs open around it."""

    name: str
    base: str
    open_case: Opener
    open_base: Opener


def _trimmed_mean(values: list[int]) -> float:
    kept = sorted(values)[: max(1, math.ceil(len(values) * (1 - TRIM)))]
    return statistics.fmean(kept)


async def sample_pair(pair: Pair, steps: int, block: int) -> tuple[tuple[float, float], tuple[float, float]]:
    """Per-step µs of the baseline and of the case, each ``(trimmed mean, mean)``,
    over ``steps`` steps of each, interleaved."""
    blocks = max(2, 2 * math.ceil(steps / block / 2))  # even: each side leads as often
    times: tuple[list[int], list[int]] = ([], [])
    async with pair.open_base() as base, pair.open_case() as case:
        for _ in range(max(block, 5)):  # warm-up: first calls, caches, layouts
            await base()
            await case()
        for i in range(blocks):
            for which in ((0, 1) if i % 2 == 0 else (1, 0)):
                step, into = (base, case)[which], times[which]
                for _ in range(block):
                    start = time.perf_counter_ns()
                    await step()
                    into.append(time.perf_counter_ns() - start)
    base_t, case_t = ((_trimmed_mean(t) / 1000.0, statistics.fmean(t) / 1000.0) for t in times)
    return base_t, case_t


async def measure_pairs(pairs: Sequence[Pair], steps: int, block: int, into: Measurement) -> None:
    """One round: every pair once, in an order that rotates from round to round.

    The round records ``name`` and ``base@name`` (the case's and its baseline's
    trimmed mean per step, µs, from the same window), and the plain means under
    the same keys with ``MEAN`` appended.
    """
    shift = len(into.rounds) % len(pairs)
    this_round: dict[str, float] = {}
    for pair in (*pairs[shift:], *pairs[:shift]):
        (base_trim, base_mean), (case_trim, case_mean) = await sample_pair(pair, steps, block)
        base = f"{pair.base}@{pair.name}"
        this_round.update({pair.name: case_trim, base: base_trim, pair.name + MEAN: case_mean, base + MEAN: base_mean})
        into.steps[pair.name] = into.steps[base] = 2 * math.ceil(steps / block / 2) * block
    into.rounds.append(this_round)
