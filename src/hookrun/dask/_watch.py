"""``WorkerWatch``: the workers a ``DaskActorSessionCreator`` lost actors on.

A call to an actor on a worker that was killed may not fail at once: one under way
when the worker died fails as its connection closes, but one that starts afterwards
retries connecting for Dask's connect timeout (30 s by default), and with steps in
flight the other lanes then wait behind that step. So a call that finds a worker
unreachable tells the watch (``suspect``), which confirms the loss first: the worker
is gone if the scheduler no longer lists it or its address refuses a connection
(``worker_gone``, a few milliseconds, on the client's IO loop). A lost worker's
calls still waiting end at once (they raise ``UnavailableError`` and their lanes are
re-created), and the calls that sessions made before the loss would start on it are
refused. A worker the scheduler lists and that accepts a connection had a passing
comm error: only the call that met it fails, the other lanes on it go on.

Invariants: a worker is reported lost once (one warning); a session made after the
loss is not refused (a new worker may have the same address); the watch holds only
the calls waiting now; a loss the scheduler reports itself (the actor's future lost)
needs no confirmation (``lost``).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable

from distributed import Client
from distributed.comm.addressing import get_address_host_port

from .._log import logger
from ..remote._waiting import PlacedWaits, Waiting

__all__ = ["WorkerWatch", "worker_gone"]

#: Seconds to wait for the scheduler's list of workers, and for the worker to accept a connection.
CONFIRM_TIMEOUT = 1.0


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

    async def suspect(self, address: str, gone: Callable[[], Awaitable[bool]]) -> bool:
        """A call could not reach the worker at ``address``: if ``gone()`` confirms the
        loss, end the calls still waiting on it (``lost``). Whether it was lost."""
        if not await gone():
            logger().info("Dask worker %s failed a call but is alive: only that call's lane is re-created", address)
            return False
        self.lost(address)
        return True

    def lost(self, address: str) -> None:
        """The worker at ``address`` is gone: end the calls still waiting on it."""
        first = address not in self._lost
        self._lost[address] = time.monotonic()
        ended = self._waits.end(address)
        if first:
            logger().warning(
                "Dask worker %s is gone: the %d other calls waiting on its actors end, and their "
                "lanes are re-created", address, ended,
            )


async def worker_gone(client: Client, address: str) -> bool:
    """On the client's IO loop: whether the worker at ``address`` is gone, i.e. the scheduler
    no longer lists it, or it refuses a connection (or accepts none within
    ``CONFIRM_TIMEOUT``). A scheduler that does not answer leaves it to the connection."""
    info = None
    if client.scheduler is not None:
        try:
            info = await asyncio.wait_for(client.scheduler.identity(n_workers=-1), CONFIRM_TIMEOUT)
        except (TimeoutError, OSError):
            info = None
    if isinstance(info, dict) and address not in info.get("workers", {}):
        return True
    try:
        host, port = get_address_host_port(address)
    except ValueError:  # not a host and port (an in-process worker): the scheduler's word stands
        return False
    try:
        _, writer = await asyncio.wait_for(asyncio.open_connection(host, port), CONFIRM_TIMEOUT)
    except (TimeoutError, OSError):
        return True
    writer.close()
    return False
