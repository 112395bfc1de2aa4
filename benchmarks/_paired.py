"""Paired sampling for the remote benchmarks: a case and its baseline, interleaved block by block.

A remote step's time drifts by tens of percent from second to second on a shared
machine, far more than what hooks add to it. So each case is timed against its own
baseline in the same window: ``steps`` steps of each, in alternating blocks of
``block`` steps (baseline, case, case, baseline, ...), both open side by side. The
figures of one sample are the two mean step times over the whole window; their
ratio is what the load cannot skew.
"""

from __future__ import annotations

import math
import time
from collections.abc import Awaitable, Callable, Sequence
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass

from ._harness import Measurement

__all__ = ["Pair", "Step", "measure_pairs", "sample_pair"]

Step = Callable[[], Awaitable[object]]
Opener = Callable[[], AbstractAsyncContextManager[Step]]


@dataclass(frozen=True)
class Pair:
    """A case (``name``) and the baseline it is compared with (``base``); each opener
    yields the step function, with whatever it needs open around it."""

    name: str
    base: str
    open_case: Opener
    open_base: Opener


async def sample_pair(pair: Pair, steps: int, block: int) -> tuple[float, float]:
    """Per-step µs of (baseline, case), over ``steps`` steps of each, interleaved."""
    blocks = max(2, 2 * math.ceil(steps / block / 2))  # even: each side leads as often
    async with pair.open_base() as base, pair.open_case() as case:
        for _ in range(block):  # warm-up: first calls, caches, layouts
            await base()
            await case()
        spent = [0, 0]
        for i in range(blocks):
            for which in ((0, 1) if i % 2 == 0 else (1, 0)):
                step = base if which == 0 else case
                start = time.perf_counter_ns()
                for _ in range(block):
                    await step()
                spent[which] += time.perf_counter_ns() - start
    n = blocks * block
    return spent[0] / n / 1000.0, spent[1] / n / 1000.0


async def measure_pairs(pairs: Sequence[Pair], steps: int, block: int, into: Measurement) -> None:
    """One round: every pair once, in an order that rotates from round to round.

    The round records ``name`` (the case's per-step µs) and ``base@name`` (its
    baseline's, from the same window).
    """
    shift = len(into.rounds) % len(pairs)
    this_round: dict[str, float] = {}
    for pair in (*pairs[shift:], *pairs[:shift]):
        base_us, case_us = await sample_pair(pair, steps, block)
        this_round[pair.name] = case_us
        this_round[f"{pair.base}@{pair.name}"] = base_us
        into.steps[pair.name] = into.steps[f"{pair.base}@{pair.name}"] = 2 * math.ceil(steps / block / 2) * block
    into.rounds.append(this_round)
