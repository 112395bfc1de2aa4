"""Remote functions and actors the Ray tests run (importable by Ray's workers)."""

from __future__ import annotations

import asyncio
import os
import signal
import time
from collections.abc import Mapping, Sequence
from typing import Any

import anyio
import ray

from .. import _engine_remote
from .._engine_remote import Broken, failing, square

__all__ = ["AsyncModel", "Broken", "Latch", "Model", "Tally", "blocking", "crash_once", "failing", "square"]


class _Latch:
    """Named one-shot events between the test and remote code; ``set`` carries a value."""

    def __init__(self) -> None:
        self._events: dict[str, asyncio.Event] = {}
        self._values: dict[str, Any] = {}

    def _event(self, name: str) -> asyncio.Event:
        return self._events.setdefault(name, asyncio.Event())

    async def set(self, name: str, value: Any = None) -> None:
        self._values[name] = value
        self._event(name).set()

    async def is_set(self, name: str) -> bool:
        return self._event(name).is_set()

    async def wait(self, name: str) -> Any:
        await self._event(name).wait()
        return self._values[name]


Latch: Any = ray.remote(num_cpus=0)(_Latch)


def blocking(feed: Mapping[str, Any]) -> dict[str, Any]:
    """Says it started by creating the file ``feed["started"]``, blocks until cancelled,
    and says so by creating ``feed["cancelled"]``. Files, not calls to an actor: a
    cancel that lands while the task waits for such a call does not always interrupt it
    (and ``ray.cancel`` is recursive: it may cancel the call itself).

    ``ray.cancel`` interrupts a running task as a SIGINT would (``interrupt_main``), which
    does nothing in a worker that inherited SIGINT ignored (a test run started in the
    background of a shell): the task takes Python's handler first. The started file
    says which handler it found."""
    found = signal.getsignal(signal.SIGINT)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        with open(feed["started"], "w") as started:
            started.write(repr(found))
        for _ in range(1200):  # Python code between sleeps: where ray.cancel interrupts
            time.sleep(0.1)
    except KeyboardInterrupt:  # what ray.cancel raises in a running task
        open(feed["cancelled"], "w").close()
        raise
    return {}


def crash_once(feed: Mapping[str, Any]) -> dict[str, Any]:
    """Kills its worker process the first time (marker file), then answers."""
    marker = feed["marker"]
    if not os.path.exists(marker):
        open(marker, "w").close()
        os._exit(1)
    return {"y": 1}


class Model(_engine_remote.Model):
    """The shared session actor; a feed ``block`` (a Latch) blocks its first actor."""

    def block(self, how: Any) -> None:
        if not ray.get(how.is_set.remote("started")):
            ray.get(how.set.remote("started", os.getpid()))
            time.sleep(120)


class _AsyncModel:
    """An async session actor whose ``run`` waits until cancelled, and says so by creating
    the file ``feeds["cancelled"]`` (as ``blocking`` does)."""

    async def run(self, fetches: Sequence[str], feeds: Mapping[str, Any]) -> list[Any]:
        latch = feeds["latch"]
        await latch.set.remote("started", os.getpid())
        try:
            await asyncio.sleep(120)
        except asyncio.CancelledError:
            await anyio.Path(feeds["cancelled"]).touch()
            raise
        return [None for _ in fetches]


AsyncModel: Any = ray.remote(_AsyncModel)


class Tally:
    """A checkpointable session actor: adds up the feeds ``x``; a feed ``die`` (a marker
    file's path) kills its process the first time."""

    def __init__(self) -> None:
        self.total = 0

    def run(self, fetches: Sequence[str], feeds: Mapping[str, Any]) -> list[Any]:
        marker = feeds.get("die")
        if marker and not os.path.exists(marker):
            open(marker, "w").close()
            os._exit(1)
        self.total += feeds["x"]
        return [{"total": self.total, "pid": os.getpid()}[key] for key in fetches]

    def state_dict(self) -> dict[str, int]:
        return {"total": self.total}

    def load_state_dict(self, state: Mapping[str, int]) -> None:
        self.total = state["total"]
