"""``RayStepCounter``: a global step shared by every worker of a job, in a named Ray actor.

The counter lives in a detached async actor (``num_cpus=0``) that every worker creates
or joins by name. ``wait_for`` is one actor call parked on the actor's event loop until
the value reaches the target: nothing polls, on either side, and cancelling the caller
cancels the parked call. Invariants: the value only changes through ``increment`` and
``set``; a counter actor that died surfaces as ``UnavailableError`` (never silently
restarted at its initial value), and the next call joins or re-creates it.
``recent()`` answers, without a round trip, with a value this counter read or wrote
itself within ``max_staleness`` seconds (what a monitored session takes as a step's
``run_context.global_step``); ``get()`` always asks the actor.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
import math
import time
from types import TracebackType
from typing import Any, cast

import anyio
import ray
from ray.actor import ActorHandle

from .._errors import UnavailableError
from .._global_step import check_step_value
from .._validate import check_seconds
from ._errors import await_ref
from ._runtime import RayLease

__all__ = ["RayStepCounter"]

DEFAULT_NAMESPACE = "hookrun"


class _GlobalStep:
    """The actor: a value and the waiters parked on it, woken in order of their target."""

    def __init__(self, value: int) -> None:
        self.value = value
        self._waiters: list[tuple[int, int, asyncio.Future[int]]] = []
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

    async def wait_until(self, target: int) -> int:
        if self.value >= target:
            return self.value
        waiter: asyncio.Future[int] = asyncio.get_running_loop().create_future()
        heapq.heappush(self._waiters, (target, next(self._order), waiter))
        return await waiter

    def _wake(self) -> None:
        while self._waiters and self._waiters[0][0] <= self.value:
            _, _, waiter = heapq.heappop(self._waiters)
            if not waiter.done():  # a cancelled wait_until leaves a cancelled future
                waiter.set_result(self.value)


_GlobalStepActor = ray.remote(_GlobalStep)


class RayStepCounter:
    """A ``StepCounter`` shared by every process of a Ray job, found by ``name``.

    The first counter to be used creates the actor with ``initial``; the others join
    it and ``initial`` is ignored. The actor is detached (it outlives the driver that
    created it), so call ``delete()`` once at the end of the job; a counter left from an
    earlier job is joined with its value. ``namespace`` defaults to ``"hookrun"`` so that
    separate driver processes find each other without configuring a Ray namespace.

    If Ray is not initialised, first use starts a local Ray on 127.0.0.1 (without a
    dashboard), which ``aclose()`` shuts down again.

    ``recent()`` is the value this counter last read or wrote (``get``,
    ``increment``, ``set``) if that call was sent at most ``max_staleness`` seconds
    ago, else ``None``. A monitored session uses it for each step's
    ``run_context.global_step``, so a worker's step makes one round trip to the
    counter (the increment), not two; steps that follow each other closely see the
    value their previous step's increment returned. ``max_staleness=0`` makes every
    step read the counter afresh.
    """

    def __init__(
        self,
        name: str = "global_step",
        namespace: str | None = None,
        *,
        initial: int = 0,
        max_staleness: float = 0.05,
    ) -> None:
        if not isinstance(name, str) or not name:
            raise ValueError(f"RayStepCounter: name must be a non-empty string, got {name!r}")
        if namespace is not None and (not isinstance(namespace, str) or not namespace):
            raise ValueError(f"RayStepCounter: namespace must be a non-empty string, got {namespace!r}")
        check_step_value("RayStepCounter(initial=...)", initial)
        check_seconds("RayStepCounter: max_staleness", max_staleness, allow_zero=True)
        if not math.isfinite(max_staleness):
            raise ValueError(f"RayStepCounter: max_staleness must be a finite number of seconds, got {max_staleness!r}")
        self.max_staleness = float(max_staleness)
        self._seen: tuple[int, float] | None = None  # (value, when the call that returned it was sent)
        self.name = name
        self.namespace = namespace or DEFAULT_NAMESPACE
        self.initial = initial
        self._actor: ActorHandle[Any] | None = None
        self._joining = anyio.Lock()
        self._lease = RayLease()

    def __repr__(self) -> str:
        return f"RayStepCounter({self.name!r}, namespace={self.namespace!r})"

    def recent(self) -> int | None:
        """The value last read or written by this counter, if sent within ``max_staleness`` seconds."""
        seen = self._seen
        if seen is None or time.monotonic() - seen[1] > self.max_staleness:
            return None
        return seen[0]

    async def get(self) -> int:
        return await self._call("get")

    async def increment(self, n: int = 1) -> int:
        check_step_value("RayStepCounter.increment(n)", n)
        return await self._call("increment", n)

    async def set(self, value: int) -> None:
        check_step_value("step counter value", value)
        await self._call("set", value)

    async def wait_for(self, target: int) -> int:
        check_step_value("RayStepCounter.wait_for(target)", target)
        return await self._call("wait_until", target, remember=False)  # woken late, maybe

    async def delete(self) -> None:
        """Kill the shared actor: the counter ends for every worker (once, at job end)."""
        actor = await self._join()
        self._actor, self._seen = None, None
        ray.kill(actor, no_restart=True)

    async def aclose(self) -> None:
        """Let go of the actor (it keeps running); shut down a Ray this counter started."""
        self._actor, self._seen = None, None
        await self._lease.release()

    async def __aenter__(self) -> RayStepCounter:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()

    async def _call(self, method: str, *args: int, remember: bool = True) -> int:
        actor = self._actor or await self._join()
        sent = time.monotonic()
        try:
            value: int = await await_ref(getattr(actor, method).remote(*args), repr(self))
        except UnavailableError:
            self._seen = None
            if self._actor is actor:
                self._actor = None  # the next call joins (or re-creates) the counter
            raise
        if remember:
            self._seen = (value, sent)
        return value

    async def _join(self) -> ActorHandle[Any]:
        async with self._joining:
            if self._actor is None:
                await self._lease.acquire()
                self._actor = await anyio.to_thread.run_sync(self._get_or_create)
            return self._actor

    def _get_or_create(self) -> ActorHandle[Any]:
        options = _GlobalStepActor.options(
            name=self.name,
            namespace=self.namespace,
            lifetime="detached",
            get_if_exists=True,
            num_cpus=0,
            max_restarts=0,
        )
        return cast("ActorHandle[Any]", options.remote(self.initial))

