"""Functions and actors the Dask tests run on the cluster's workers."""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from distributed import Event, Variable

from .. import _engine_remote
from .._engine_remote import Broken, failing, square

__all__ = ["Broken", "Gate", "Model", "blocking", "failing", "sleepy", "square"]


def blocking(feed: Mapping[str, Any]) -> dict[str, Any]:
    """Signals ``<name>-started``, then waits for ``<name>-go``."""
    name = feed["name"]
    Event(f"{name}-started").set()
    Event(f"{name}-go").wait(120)
    return {}


class Model(_engine_remote.Model):
    """The shared session actor; a feed ``block=<name>`` blocks its first call until ``<name>-go``."""

    def block(self, how: Any) -> None:
        if not Event(f"{how}-started").is_set():
            Variable(f"{how}-pid").set(os.getpid())
            Event(f"{how}-started").set()
            Event(f"{how}-go").wait(120)


def sleepy(feed: Mapping[str, Any]) -> dict[str, Any]:
    """A step that takes a while (for the scheduler-loss test)."""
    import time

    time.sleep(feed.get("seconds", 30))
    return {"slept": True}


class Gate:
    """A session actor whose every call says it started (a ``<name>-started`` queue item),
    then waits for ``<name>-go``; a synchronous step method, as most users write."""

    def run(self, fetches: list[str], feed_dict: Mapping[str, Any]) -> list[Any]:
        from distributed import Queue

        name = feed_dict["name"]
        Queue(f"{name}-started").put(os.getpid())
        Event(f"{name}-go").wait(120)
        return [os.getpid() for _ in fetches]

    def where(self) -> int:
        return os.getpid()
