"""Functions and actors the Dask tests run on the cluster's workers."""

from __future__ import annotations

import os
import uuid
from collections.abc import Mapping, Sequence
from typing import Any

from distributed import Event, Variable


def square(feed: Mapping[str, Any]) -> dict[str, Any]:
    """A step: y = x * x, where it ran, and a token unique to this execution."""
    return {"y": feed["x"] ** 2, "pid": os.getpid(), "token": uuid.uuid4().hex}


def failing(feed: Mapping[str, Any]) -> dict[str, Any]:
    raise ValueError(f"bad feed x={feed['x']}")


def blocking(feed: Mapping[str, Any]) -> dict[str, Any]:
    """Signals ``<name>-started``, then waits for ``<name>-go``."""
    name = feed["name"]
    Event(f"{name}-started").set()
    Event(f"{name}-go").wait(120)
    return {}


class Model:
    """A session actor counting its calls; feed ``block=<name>`` blocks its first call."""

    def __init__(self, offset: int = 0) -> None:
        self.offset = offset
        self.calls = 0

    def run(
        self, fetches: Sequence[str], feeds: Mapping[str, Any], tags: Mapping[str, Any] | None = None
    ) -> list[Any]:
        self.calls += 1
        if "fail" in feeds:
            raise ValueError(f"model cannot take {feeds['fail']!r}")
        name = feeds.get("block")
        if name is not None and not Event(f"{name}-started").is_set():
            Variable(f"{name}-pid").set(os.getpid())
            Event(f"{name}-started").set()
            Event(f"{name}-go").wait(120)
        values = {"y": feeds.get("x", 0) + self.offset, "calls": self.calls, "pid": os.getpid(), "tags": tags}
        return [values[key] for key in fetches]

    def predict(self, fetches: Sequence[str], feeds: Mapping[str, Any]) -> list[Any]:
        return [f"predict:{key}" for key in fetches]


class Broken:
    def __init__(self) -> None:
        raise RuntimeError("cannot build the model")

    def run(self, fetches: Sequence[str], feeds: Mapping[str, Any]) -> list[Any]:
        return []


def sleepy(feed: Mapping[str, Any]) -> dict[str, Any]:
    """A step that takes a while (for the scheduler-loss test)."""
    import time

    time.sleep(feed.get("seconds", 30))
    return {"slept": True}
