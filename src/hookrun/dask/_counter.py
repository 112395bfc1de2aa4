"""``DaskStepCounter``: a global step shared across Dask clients, held by the scheduler.

Every counter of a cluster lives in a scheduler plugin (``_scheduler_steps``) that the
first client installs; each call is one RPC to the scheduler, answered on its event
loop, and ``wait_for`` is one RPC parked there until the target is reached: nothing
polls, and cancelling the caller withdraws the parked waiter. No worker holds the
counter, so losing workers never touches it. Invariants: the value only changes
through ``increment``, ``set`` and ``lift``; a scheduler connection that is lost
surfaces as ``UnavailableError`` to the shared client logic, which joins again
(a new scheduler gets the plugin again, seeded and lifted to the highest value this
client saw). ``recent()`` answers, without a round trip, with a value this counter
read or wrote itself within ``max_staleness`` seconds; ``get()`` always asks.
"""

from __future__ import annotations

import asyncio
from typing import Any, ClassVar

import anyio
from distributed import Client
from distributed.client import ClosedClientError, FutureCancelledError
from distributed.comm.core import CommClosedError

from ..remote import await_future
from ..remote._counter import RemoteStepCounter
from ..remote._lost import unavailable
from ._scheduler_steps import RPC, StepCounters

__all__ = ["DaskStepCounter"]

#: What a lost or closing scheduler connection raises from an RPC.
_LOST = (OSError, CommClosedError, ClosedClientError, FutureCancelledError)


class DaskStepCounter(RemoteStepCounter[int]):
    """A ``StepCounter`` shared by every client of a Dask cluster that uses ``name``.

    The counter lives on the scheduler (installed there by the first client as a
    scheduler plugin; the scheduler must be able to import hookrun). The first
    counter to be used creates it with ``initial``; the others join it and
    ``initial`` is ignored. ``client`` is a synchronous ``distributed.Client`` and is
    never closed here. Call ``delete()`` once at the end of the job.

    Workers may come and go: the counter is not on any of them. If the scheduler
    connection is lost, calls wait for it up to ``reconnect_timeout`` seconds (then
    raise ``ConnectionError``); a new scheduler gets a counter lifted to the highest
    value this counter saw.

    ``recent()`` is the value this counter last read or wrote (``get``,
    ``increment``, ``set``) if that call was sent at most ``max_staleness`` seconds
    ago, else ``None``. A monitored session uses it for each step's
    ``run_context.global_step``, so a step makes one round trip to the counter (the
    increment), not two. ``max_staleness=0`` makes every step read the counter afresh.

    Args:
        client: A synchronous ``distributed.Client`` (never closed here).
        name: The counter's name: every client using it shares the counter.
        initial: The value of a counter this one creates.
        max_staleness: Seconds for which the value last read or written answers
            ``recent()``.
        reconnect_timeout: Seconds a call waits for a lost counter to come back before it
            raises ``ConnectionError``.
    """

    _kind: ClassVar[str] = "DaskStepCounter"

    def __init__(
        self,
        client: Client,
        name: str = "global_step",
        *,
        initial: int = 0,
        max_staleness: float = 0.05,
        reconnect_timeout: float = 60.0,
    ) -> None:
        super().__init__(name, initial=initial, max_staleness=max_staleness, reconnect_timeout=reconnect_timeout)
        if not isinstance(client, Client):
            raise TypeError(f"DaskStepCounter: client must be a distributed.Client, got {type(client).__name__}")
        self.client = client
        self._seed = initial

    def __repr__(self) -> str:
        return f"DaskStepCounter({self.name!r})"

    async def delete(self) -> None:
        """Remove the shared counter for every client (once, at the end of the job)."""
        self._drop()
        await self._rpc("delete", ())

    async def _open(self, seed: int) -> int:
        self._seed = seed
        await anyio.to_thread.run_sync(self._install)
        return seed

    def _install(self) -> None:
        try:
            self.client.register_plugin(StepCounters())
        except _LOST as exc:
            raise unavailable(repr(self), exc) from exc

    async def _invoke(self, handle: int, method: str, args: tuple[object, ...], token: int | None) -> int:
        on_cancel = None
        if token is not None:  # a cancelled caller cannot stop the parked call: withdraw it
            args = (*args, token)
            on_cancel = lambda: self._forget(token)  # noqa: E731
        value: int = await self._rpc(method, args, on_cancel)
        return value

    async def _rpc(self, method: str, args: tuple[object, ...], on_cancel: Any = None) -> Any:
        client = self.client
        seed = self._seed

        async def call() -> Any:
            return await getattr(client.scheduler, RPC)(name=self.name, method=method, args=list(args), seed=seed)

        loop: Any = client.loop
        try:
            waiting = asyncio.run_coroutine_threadsafe(call(), loop.asyncio_loop)
        except RuntimeError as exc:  # the client's loop is closed
            raise unavailable(repr(self), ClosedClientError(str(exc))) from exc

        def cancel() -> None:
            waiting.cancel()
            if on_cancel is not None:
                on_cancel()

        try:
            return await await_future(waiting, cancel=cancel)
        except _LOST as exc:
            raise unavailable(repr(self), exc) from exc

    def _forget(self, token: int) -> None:
        loop: Any = self.client.loop
        call = getattr(self.client.scheduler, RPC)(name=self.name, method="forget", args=[token], seed=self._seed)
        asyncio.run_coroutine_threadsafe(call, loop.asyncio_loop)

