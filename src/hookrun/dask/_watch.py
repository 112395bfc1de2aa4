"""``WorkerWatch``: the workers a ``DaskActorSessionCreator`` lost actors on.

A call to an actor on a worker that was killed may not fail at once: one under way
when the worker died fails as its connection closes, but one that starts afterwards
retries connecting for Dask's connect timeout (30 s by default), and with steps in
flight the other lanes then wait behind that step. So the first call that finds a
worker unreachable tells the watch, which ends every call still waiting on an actor
of that worker (they raise ``UnavailableError`` and their lanes are re-created) and
refuses the calls that sessions made before the loss would start on it.

Invariants: a worker is reported lost once (one warning); a session made after the
loss is not refused (a new worker may have the same address); the watch holds only
the calls waiting now.
"""

from __future__ import annotations

import time

from .._log import logger
from ..remote._waiting import PlacedWaits, Waiting

__all__ = ["WorkerWatch"]


class WorkerWatch:
    """The workers found lost, when, and the calls waiting on each (see the module docstring)."""

    __slots__ = ("_lost", "_waits")

    def __init__(self) -> None:
        self._lost: dict[str, float] = {}  # worker address -> when it was found lost
        self._waits = PlacedWaits()  # by worker address

    def calls(self, address: str) -> set[Waiting]:
        """The calls waiting on actors of the worker at ``address`` (each call is in it
        while it waits); ended when that worker is found lost."""
        return self._waits.calls(address)

    def lost_since(self, address: str, made: float) -> bool:
        """Whether the worker at ``address`` was found lost after ``made`` (``time.monotonic``)."""
        return self._lost.get(address, float("-inf")) >= made

    def lost(self, address: str) -> None:
        """The worker at ``address`` did not answer: end the calls still waiting on it."""
        first = address not in self._lost
        self._lost[address] = time.monotonic()
        ended = self._waits.end(address)
        if first:
            logger().warning(
                "Dask worker %s is gone: the %d other calls waiting on its actors end, and their "
                "lanes are re-created", address, ended,
            )
