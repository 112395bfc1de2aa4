"""``RemoteStepCounter``: the client side of a step counter held by a remote actor.

What every engine's counter shares, engine-free: checking its arguments, the
``StepCounter`` methods (each one call to the ``SharedStep`` actor), joining the actor
once (under a lock: concurrent first calls join it once), forgetting an actor that was
lost, and ``recent()``. An adapter says only how to find or create its engine's actor
(``_open``) and how to make one call to it (``_invoke``).

Invariants: an adapter reports a lost actor as ``UnavailableError``; then the handle
and the remembered value are dropped, and the next call joins (or re-creates) the
actor, so the counter never answers from a dead one. ``recent()`` is a value this
counter itself read or wrote (``get``, ``increment``, ``set``) whose call was sent at
most ``max_staleness`` seconds ago, else ``None``; ``wait_for`` is not remembered (it
may wake late). Each ``wait_for`` call carries a token of its own, so an engine that
cannot cancel a parked call can withdraw it (``forget``).
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Awaitable
from typing import ClassVar, Generic, TypeVar

import anyio

from .._errors import UnavailableError
from .._global_step import check_step_value
from .._validate import check_seconds
from ._closeable import AsyncCloseable

__all__ = ["RemoteStepCounter"]

HandleT = TypeVar("HandleT")

#: The clock ``recent()`` measures staleness with (a module attribute, so tests can drive it).
_now = time.monotonic


class RemoteStepCounter(AsyncCloseable, Generic[HandleT]):
    """A ``StepCounter`` whose value lives in a ``SharedStep`` actor (see the module docstring).

    Subclasses set ``_kind`` (the name in messages) and implement ``_open`` and ``_invoke``.
    """

    _kind: ClassVar[str] = "RemoteStepCounter"

    def __init__(self, name: str, *, initial: int, max_staleness: float) -> None:
        kind = self._kind
        if not isinstance(name, str) or not name:
            raise ValueError(f"{kind}: name must be a non-empty string, got {name!r}")
        check_step_value(f"{kind}(initial=...)", initial)
        check_seconds(f"{kind}: max_staleness", max_staleness, allow_zero=True)
        self.name = name
        self.initial = initial
        self.max_staleness = float(max_staleness)
        self._handle: HandleT | None = None
        self._seen: tuple[int, float] | None = None  # (value, when the call that returned it was sent)
        self._joining = anyio.Lock()
        self._tokens = itertools.count()

    def recent(self) -> int | None:
        """The value last read or written by this counter, if sent within ``max_staleness`` seconds."""
        seen = self._seen
        if seen is None or _now() - seen[1] > self.max_staleness:
            return None
        return seen[0]

    async def get(self) -> int:
        return await self._call("get")

    async def increment(self, n: int = 1) -> int:
        check_step_value(f"{self._kind}.increment(n)", n)
        return await self._call("increment", n)

    async def set(self, value: int) -> None:
        check_step_value("step counter value", value)
        await self._call("set", value)

    async def wait_for(self, target: int) -> int:
        check_step_value(f"{self._kind}.wait_for(target)", target)
        token = next(self._tokens)
        return await self._call("wait_until", target, remember=False, token=token)

    async def aclose(self) -> None:
        """Let go of the actor (it keeps counting for the other workers)."""
        self._drop()

    async def delete(self) -> None:
        """Remove the shared counter for every worker (once, at the end of the job)."""
        raise NotImplementedError

    async def _call(
        self, method: str, *args: int, remember: bool = True, token: int | None = None
    ) -> int:
        """One call of ``method`` on the actor; a lost actor is dropped (the next call rejoins)."""
        handle = self._handle
        if handle is None:
            handle = await self._join()
        sent = _now()
        try:
            value = await self._invoke(handle, method, args, token)
        except UnavailableError:
            self._seen = None
            if self._handle is handle:
                self._handle = None
            raise
        if remember:
            self._seen = (value, sent)
        return value

    async def _join(self) -> HandleT:
        async with self._joining:
            if self._handle is None:
                self._handle = await self._open()
            return self._handle

    def _drop(self) -> HandleT | None:
        """Let go of the actor's handle (returned) and of the remembered value."""
        handle, self._handle, self._seen = self._handle, None, None
        return handle

    async def _open(self) -> HandleT:
        """Join the engine's counter actor, creating it with ``initial`` if there is none."""
        raise NotImplementedError

    def _invoke(
        self, handle: HandleT, method: str, args: tuple[int, ...], token: int | None
    ) -> Awaitable[int]:
        """One call to the actor. ``token`` (``wait_until`` only): the waiter's token, for an
        engine that must ``forget`` it when the call is cancelled.

        A lost actor raises ``UnavailableError``; anything else propagates as it is.
        """
        raise NotImplementedError
