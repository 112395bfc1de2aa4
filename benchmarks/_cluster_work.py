"""The work ``benchmarks.cluster`` runs on the clusters' nodes: a step that sleeps ``s`` seconds.

The same work for every contestant: hookrun's sessions and the engines' own pools
(``SleepWorker`` for actors, ``sleep_task`` / ``sleep_plain`` for tasks).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Mapping
from typing import Any

__all__ = ["AsyncSleepWorker", "SleepWorker", "sleep_plain", "sleep_task"]


class SleepWorker:
    """An actor whose ``run`` sleeps ``feed_dict["s"]`` seconds (a synchronous method)."""

    def run(self, fetches: list[str], feed_dict: Mapping[str, Any]) -> list[Any]:
        time.sleep(feed_dict["s"])
        return [feed_dict["x"] for _ in fetches]


class AsyncSleepWorker:
    """The same as a coroutine method (a Dask actor runs those side by side on its worker)."""

    async def run(self, fetches: list[str], feed_dict: Mapping[str, Any]) -> list[Any]:
        await asyncio.sleep(feed_dict["s"])
        return [feed_dict["x"] for _ in fetches]


def sleep_task(feed_dict: Mapping[str, Any]) -> dict[str, Any]:
    """A step task: sleeps ``feed_dict["s"]`` seconds, answers ``x``."""
    time.sleep(feed_dict["s"])
    return {"x": feed_dict["x"]}


def sleep_plain(x: int, s: float) -> int:
    """The same work as a plain task (for ``as_completed``)."""
    time.sleep(s)
    return x
