"""A fixed-size latency histogram: log-spaced buckets, quantiles read from them.

Buckets cover 100 ns to 1000 s with ten buckets per decade (each bucket's upper
edge is 1.26 times its lower one), plus one bucket below and one above. A
quantile is the geometric middle of the bucket it falls in, clamped to the
smallest and largest value seen, so it is within about 12 % of the true value.
Memory is the same after ten steps or ten million.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

__all__ = ["Histogram", "Latency"]

_PER_DECADE = 10
_LOW = 1e-7  # seconds: the lower edge of the first regular bucket
_DECADES = 10
_REGULAR = _PER_DECADE * _DECADES
_SCALE = _PER_DECADE / math.log(10.0)
_LOG_LOW = math.log(_LOW)


@dataclass(frozen=True, slots=True)
class Latency:
    """Latency figures in seconds: ``count`` timed calls, their ``total``, ``max`` and
    quantiles (``None`` when nothing was timed)."""

    count: int = 0
    total: float = 0.0
    max: float | None = None
    p50: float | None = None
    p90: float | None = None
    p99: float | None = None

    @property
    def mean(self) -> float | None:
        """The mean of the timed calls, or ``None``."""
        return self.total / self.count if self.count else None


class Histogram:
    """Counts of durations (seconds) per log-spaced bucket, with count, total, min and max."""

    __slots__ = ("buckets", "count", "max", "min", "total")

    def __init__(self) -> None:
        self.buckets = [0] * (_REGULAR + 2)
        self.count = 0
        self.total = 0.0
        self.min = math.inf
        self.max = 0.0

    def add(self, seconds: float) -> None:
        """Count one duration (negative ones, from a clock stepping back, count as 0)."""
        if seconds < 0.0:
            seconds = 0.0
        self.count += 1
        self.total += seconds
        if seconds > self.max:
            self.max = seconds
        if seconds < self.min:
            self.min = seconds
        self.buckets[_bucket(seconds)] += 1

    def quantile(self, q: float) -> float | None:
        """The ``q``-quantile (0 < q <= 1), or ``None`` if empty."""
        if not self.count:
            return None
        rank = max(1, math.ceil(q * self.count))
        seen = 0
        for index, n in enumerate(self.buckets):
            seen += n
            if seen >= rank:
                return min(self.max, max(self.min, _middle(index)))
        return self.max  # pragma: no cover - the buckets hold every count

    def latency(self) -> Latency:
        """The frozen figures of this histogram."""
        if not self.count:
            return Latency()
        return Latency(
            self.count, self.total, self.max, self.quantile(0.5), self.quantile(0.9), self.quantile(0.99)
        )


def _bucket(seconds: float) -> int:
    if seconds < _LOW:
        return 0
    index = int((math.log(seconds) - _LOG_LOW) * _SCALE) + 1
    return index if index <= _REGULAR else _REGULAR + 1


def _middle(index: int) -> float:
    """The geometric middle of a bucket (the edge for the two open-ended ones)."""
    if index == 0:
        return _LOW
    if index > _REGULAR:
        return _LOW * 10.0**_DECADES
    return math.exp(_LOG_LOW + (index - 0.5) / _SCALE)
