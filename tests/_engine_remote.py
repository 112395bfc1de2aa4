"""Step functions and actor classes both engines' tests run remotely (importable by the
engines' worker processes). An engine's ``_remote`` module re-exports them and adds
what only it needs (Ray's and Dask's ways of blocking an actor call)."""

from __future__ import annotations

import os
import uuid
from collections.abc import Mapping, Sequence
from typing import Any


def square(feed: Mapping[str, Any]) -> dict[str, Any]:
    """A step: y = x * x, where it ran, and a token unique to this execution."""
    return {"y": feed["x"] ** 2, "pid": os.getpid(), "token": uuid.uuid4().hex}


def failing(feed: Mapping[str, Any]) -> dict[str, Any]:
    raise ValueError(f"bad feed x={feed['x']}")


class Model:
    """A session actor counting its calls; a feed ``block`` blocks its first call the way
    the engine's subclass does (``block``)."""

    def __init__(self, offset: int = 0) -> None:
        self.offset = offset
        self.calls = 0

    def run(
        self, fetches: Sequence[str], feeds: Mapping[str, Any], tags: Mapping[str, Any] | None = None
    ) -> list[Any]:
        self.calls += 1
        if "fail" in feeds:
            raise ValueError(f"model cannot take {feeds['fail']!r}")
        if feeds.get("block") is not None:
            self.block(feeds["block"])
        values = {"y": feeds.get("x", 0) + self.offset, "calls": self.calls, "pid": os.getpid(), "tags": tags}
        return [values[key] for key in fetches]

    def predict(self, fetches: Sequence[str], feeds: Mapping[str, Any]) -> list[Any]:
        return [f"predict:{key}" for key in fetches]

    def block(self, how: Any) -> None:
        """Block the first call that gets here, and say so (the engine's subclass)."""
        raise NotImplementedError


class Broken:
    def __init__(self) -> None:
        raise RuntimeError("cannot build the model")

    def run(self, fetches: Sequence[str], feeds: Mapping[str, Any]) -> list[Any]:
        return []
