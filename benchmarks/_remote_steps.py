"""What the remote benchmarks run on the engines' workers (importable there, engine-free).

* ``trivial_step``: the remote step whose round trip the hooks are compared with.
* ``CounterWorker``: an async actor body (Ray) incrementing a shared ``RayStepCounter``.
* ``SleepActor``: a session actor whose calls sleep (the steps-in-flight benchmark).
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from typing import Any

__all__ = ["CounterWorker", "SleepActor", "trivial_step"]


def trivial_step(feed: Mapping[str, Any]) -> dict[str, Any]:
    """A step that does no work: the feed's ``x`` back as ``y``."""
    return {"y": feed["x"]}


class CounterWorker:
    """One worker of the counter benchmark: increments the job's shared counter ``n`` times."""

    def __init__(self, name: str, namespace: str) -> None:
        self.name, self.namespace = name, namespace
        self.counter: Any = None

    async def warm(self) -> int:
        """Join the counter (so that joining is not timed) and return its value."""
        from hookrun.ray import RayStepCounter

        self.counter = RayStepCounter(self.name, self.namespace)
        value: int = await self.counter.get()
        return value

    async def run(self, n: int) -> float:
        """Increment ``n`` times, one after the other; return the seconds it took."""
        start = time.perf_counter()
        for _ in range(n):
            await self.counter.increment()
        return time.perf_counter() - start


class SleepActor:
    """A session actor whose every call sleeps ``seconds`` (the remote work) and returns
    the feed's ``x`` for every fetch."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds

    def run(self, fetches: Sequence[str], feed_dict: Mapping[str, Any]) -> list[Any]:
        time.sleep(self.seconds)
        return [feed_dict["x"] for _ in fetches]
