"""``DaskStepCounter``: a global step shared across Dask clients, held by an async actor.

The counter is an async actor on one worker; its future is published on the
scheduler as a named dataset, so every client finds the same actor (a ``Lock``
makes create-or-join atomic). ``wait_for`` is one actor call parked on the
worker's event loop until the target is reached: nothing polls, and cancelling the
caller also withdraws the parked waiter. Invariants: the value only changes through
``increment`` and ``set``; a counter whose worker died surfaces as
``UnavailableError``, and the next call creates a new one (with ``initial``).
"""

from __future__ import annotations

import asyncio
import contextlib
import heapq
import itertools
from typing import Any

import anyio
from distributed import Client, Future, Lock

from .._errors import UnavailableError
from .._global_step import check_step_value
from ._client import ClientSource
from ._errors import DaskActorLostError, await_actor_call, is_unreachable, unavailable

__all__ = ["DaskStepCounter"]

_ALIVE = ("finished", "pending")


class _GlobalStep:
    """The actor: a value and the waiters parked on it, woken in order of their target."""

    def __init__(self, value: int) -> None:
        self.value = value
        self._waiters: list[tuple[int, int, asyncio.Future[int]]] = []
        self._by_token: dict[int, asyncio.Future[int]] = {}
        self._order = itertools.count()

    async def get(self) -> int:
        return self.value

    async def increment(self, n: int) -> int:
        self.value += n
        self._wake()
        return self.value

    async def set(self, value: int) -> int:
        self.value = value
        self._wake()
        return value

    async def wait_until(self, target: int, token: int) -> int:
        if self.value >= target:
            return self.value
        waiter: asyncio.Future[int] = asyncio.get_running_loop().create_future()
        heapq.heappush(self._waiters, (target, next(self._order), waiter))
        self._by_token[token] = waiter
        try:
            return await waiter
        finally:
            self._by_token.pop(token, None)

    async def forget(self, token: int) -> None:
        """Withdraw a waiter whose caller was cancelled."""
        waiter = self._by_token.pop(token, None)
        if waiter is not None:
            waiter.cancel()

    def _wake(self) -> None:
        while self._waiters and self._waiters[0][0] <= self.value:
            _, _, waiter = heapq.heappop(self._waiters)
            if not waiter.done():
                waiter.set_result(self.value)


class DaskStepCounter:
    """A ``StepCounter`` shared by every client of a Dask cluster that uses ``name``.

    The first counter to be used creates the actor with ``initial``; the others join
    it and ``initial`` is ignored. ``client`` is a synchronous ``distributed.Client``
    and is never closed here. Call ``delete()`` once at the end of the job.
    """

    def __init__(self, client: Client, name: str = "global_step", *, initial: int = 0) -> None:
        if not isinstance(name, str) or not name:
            raise ValueError(f"DaskStepCounter: name must be a non-empty string, got {name!r}")
        check_step_value("DaskStepCounter(initial=...)", initial)
        if not isinstance(client, Client):
            raise TypeError(f"DaskStepCounter: client must be a distributed.Client, got {type(client).__name__}")
        self._source = ClientSource(f"DaskStepCounter({name!r})", client, None)
        self.client = client
        self.name = name
        self.initial = initial
        self._future: Future[Any] | None = None
        self._actor: Any = None
        self._joining = anyio.Lock()
        self._tokens = itertools.count()

    def __repr__(self) -> str:
        return f"DaskStepCounter({self.name!r})"

    async def get(self) -> int:
        return await self._call("get")

    async def increment(self, n: int = 1) -> int:
        check_step_value("DaskStepCounter.increment(n)", n)
        return await self._call("increment", n)

    async def set(self, value: int) -> None:
        check_step_value("step counter value", value)
        await self._call("set", value)

    async def wait_for(self, target: int) -> int:
        check_step_value("DaskStepCounter.wait_for(target)", target)
        token = next(self._tokens)
        return await self._call("wait_until", target, token, forget=token)

    async def delete(self) -> None:
        """Remove the shared counter for every client (once, at the end of the job)."""
        future, self._future, self._actor = self._future, None, None
        await anyio.to_thread.run_sync(self._unpublish)
        if future is not None:
            future.release()

    async def aclose(self) -> None:
        """Let go of the actor (it keeps counting for the other clients)."""
        self._future = self._actor = None

    async def _call(self, method: str, *args: int, forget: int | None = None) -> int:
        actor, future = await self._join()
        on_cancel = None if forget is None else (lambda: actor.forget(forget))
        try:
            value: int = await await_actor_call(
                self.client, lambda: getattr(actor, method)(*args), on_cancel=on_cancel
            )
        except (OSError, RuntimeError) as exc:
            if is_unreachable(exc) or future.status not in _ALIVE:
                if self._future is future:
                    self._future = self._actor = None  # the next call creates a new counter
                raise unavailable(repr(self), DaskActorLostError(str(exc))) from exc
            raise
        return value

    async def _join(self) -> tuple[Any, Future[Any]]:
        async with self._joining:
            if self._future is not None and self._future.status not in _ALIVE:
                self._future = self._actor = None
                raise UnavailableError(f"{self!r}: the worker holding the counter was lost")
            if self._future is None:
                self._future, self._actor = await anyio.to_thread.run_sync(self._get_or_create)
            assert self._future is not None
            return self._actor, self._future

    @property
    def _dataset(self) -> str:
        return f"hookrun-step-{self.name}"

    def _unpublish(self) -> None:
        with contextlib.suppress(KeyError):
            self.client.unpublish_dataset(self._dataset)

    def _get_or_create(self) -> tuple[Future[Any], Any]:
        """Join the published counter, or create and publish one (under a cluster-wide lock)."""
        with self.client.as_current(), Lock(f"hookrun-step-{self.name}"):
            future = self.client.get_dataset(self._dataset, default=None)
            if not isinstance(future, Future) or future.status not in _ALIVE:
                future = self.client.submit(_GlobalStep, self.initial, actor=True, pure=False)
                self.client.publish_dataset(future, name=self._dataset, override=True)
            return future, future.result()

