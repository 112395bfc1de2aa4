"""``RemoteStepCounter``: the client side of a step counter held by a remote actor.

What every engine's counter shares, engine-free: checking its arguments, the
``StepCounter`` methods (each one call to the ``SharedStep`` actor), joining the actor
once (under a lock: concurrent first calls join it once), getting past a lost actor,
and ``recent()``. An adapter says only how to find or create its engine's actor
(``_open``) and how to make one call to it (``_invoke``).

Invariants: the shared step never goes back because its actor was lost. The client
keeps a floor, the highest value it saw since it last ``set`` the counter; an adapter
reports a lost actor as ``UnavailableError``, and then the client drops the handle,
joins the actor again (an adapter creates a new one seeded with the floor) and lifts
it to the floor before anything else, retrying for ``reconnect_timeout`` seconds and
then raising ``ConnectionError`` (not recoverable: a session must not go on counting
from a value nobody vouches for). Every increment carries a key of its own, so one
sent again after a loss is counted once by an actor that saw it. ``recent()`` is a
value this counter itself read or wrote (``get``, ``increment``, ``set``) whose call
was sent at most ``max_staleness`` seconds ago, else ``None``; ``wait_for`` is not
remembered (it may wake late). Each ``wait_for`` call carries a token of its own, so
an engine that cannot cancel a parked call can withdraw it (``forget``).
"""

from __future__ import annotations

import itertools
import time
import uuid
from collections.abc import Awaitable
from typing import ClassVar, Generic, TypeVar

import anyio

from .._errors import UnavailableError
from .._global_step import check_step_value
from .._log import logger
from .._validate import check_seconds
from ._closeable import AsyncCloseable

__all__ = ["RemoteStepCounter"]

HandleT = TypeVar("HandleT")

#: The clock ``recent()`` measures staleness with (a module attribute, so tests can drive it).
_now = time.monotonic

#: The pause before joining a lost actor again: first, then at most (doubling in between).
_BACKOFF = (0.05, 1.0)


class RemoteStepCounter(AsyncCloseable, Generic[HandleT]):
    """A ``StepCounter`` whose value lives in a ``SharedStep`` actor (see the module docstring).

    Subclasses set ``_kind`` (the name in messages) and implement ``_open`` and ``_invoke``.
    """

    _kind: ClassVar[str] = "RemoteStepCounter"

    def __init__(self, name: str, *, initial: int, max_staleness: float, reconnect_timeout: float) -> None:
        kind = self._kind
        if not isinstance(name, str) or not name:
            raise ValueError(f"{kind}: name must be a non-empty string, got {name!r}")
        check_step_value(f"{kind}(initial=...)", initial)
        check_seconds(f"{kind}: max_staleness", max_staleness, allow_zero=True)
        check_seconds(f"{kind}: reconnect_timeout", reconnect_timeout, allow_zero=True)
        self.name = name
        self.initial = initial
        self.max_staleness = float(max_staleness)
        self.reconnect_timeout = float(reconnect_timeout)
        self._handle: HandleT | None = None
        self._seen: tuple[int, float] | None = None  # (value, when the call that returned it was sent)
        #: The highest value seen since this counter last set it (None: nothing seen yet).
        self._floor: int | None = None
        self._joining = anyio.Lock()
        self._tokens = itertools.count()
        self._keys = f"{uuid.uuid4().hex}:"  # + a number: each increment's key

    @property
    def floor(self) -> int | None:
        """The highest value this counter saw since it last set it (``None``: none yet).

        A counter that joins its actor again after losing it lifts the actor to this value.
        """
        return self._floor

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
        return await self._call("increment", n, f"{self._keys}{next(self._tokens)}")

    async def set(self, value: int) -> None:
        check_step_value("step counter value", value)
        self._floor = None  # a set may go back (a restored checkpoint): the floor starts again
        await self._call("set", value)

    async def wait_for(self, target: int) -> int:
        check_step_value(f"{self._kind}.wait_for(target)", target)
        return await self._call("wait_until", target, remember=False, waits=True)

    async def aclose(self) -> None:
        """Let go of the actor (it keeps counting for the other workers)."""
        self._drop()

    async def delete(self) -> None:
        """Remove the shared counter for every worker (once, at the end of the job)."""
        raise NotImplementedError

    async def _call(self, method: str, *args: object, remember: bool = True, waits: bool = False) -> int:
        """One call of ``method`` on the actor, past lost actors (see the module docstring)."""
        deadline: float | None = None
        pause = _BACKOFF[0]
        while True:
            handle = self._handle
            token = next(self._tokens) if waits else None
            sent = _now()
            try:
                if handle is None:
                    handle = await self._join()
                value = await self._invoke(handle, method, args, token)
            except UnavailableError as exc:
                self._lost(handle)
                now = anyio.current_time()
                deadline = now + self.reconnect_timeout if deadline is None else deadline
                if now >= deadline:
                    raise self._gone(exc) from exc
                logger().warning("%r: %s; joining the counter again", self, exc)
                await anyio.sleep(min(pause, max(0.0, deadline - now)))
                pause = min(2 * pause, _BACKOFF[1])
                continue
            self._saw(value)
            if remember:
                self._seen = (value, sent)
            return value

    def _saw(self, value: int) -> None:
        if self._floor is None or value > self._floor:
            self._floor = value

    def _lost(self, handle: HandleT | None) -> None:
        self._seen = None
        if handle is not None and self._handle is handle:
            self._handle = None

    def _gone(self, exc: UnavailableError) -> ConnectionError:
        return ConnectionError(
            f"{self!r}: the counter's actor was lost and could not be joined again within "
            f"reconnect_timeout={self.reconnect_timeout:g} s ({exc}); the shared step is unknown, "
            f"and this counter last saw {self._floor}"
        )

    async def _join(self) -> HandleT:
        async with self._joining:
            if self._handle is None:
                floor = self._floor
                handle = await self._open(self.initial if floor is None else max(self.initial, floor))
                if floor is not None:  # a counter re-joined: never below what was seen
                    value = await self._invoke(handle, "lift", (floor,), None)
                    logger().warning("%r: joined the counter again at step %d (this counter saw %d)", self, value, floor)
                self._handle = handle
            return self._handle

    def _drop(self) -> HandleT | None:
        """Let go of the actor's handle (returned) and of the remembered value."""
        handle, self._handle, self._seen = self._handle, None, None
        return handle

    async def _open(self, seed: int) -> HandleT:
        """Join the engine's counter actor, creating it at ``seed`` if there is none."""
        raise NotImplementedError

    def _invoke(
        self, handle: HandleT, method: str, args: tuple[object, ...], token: int | None
    ) -> Awaitable[int]:
        """One call to the actor. ``token`` (``wait_until`` only): the waiter's token, for an
        engine that must ``forget`` it when the call is cancelled.

        A lost actor raises ``UnavailableError``; anything else propagates as it is.
        """
        raise NotImplementedError
