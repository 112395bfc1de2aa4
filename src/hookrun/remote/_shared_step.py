"""``SharedStep``: the actor behind a shared step counter, whichever engine hosts it.

An engine runs one instance as an async actor (Ray: a named detached actor; Dask: an
actor on one worker) and every worker's counter calls its methods. ``wait_until`` parks
the call on an ``anyio.Event`` until the value reaches the target: nothing polls.

Invariants: the value only changes through ``increment``, ``set`` and ``lift`` (which
only raises it), and each change wakes, in order of their target, exactly the waiters
it satisfies, each with the value that satisfied it; a waiter that ends without being
woken (its call was cancelled by the engine, or withdrawn with ``forget``) leaves
nothing behind. An increment sent again with the same ``key`` (its caller never heard
the answer) is applied once: the actor remembers the newest ``REMEMBERED`` keys and
answers a repeat with the value the first one reached.
"""

from __future__ import annotations

import heapq
import itertools
from collections import OrderedDict

import anyio

__all__ = ["REMEMBERED", "SharedStep"]

#: How many increment keys the actor remembers (a resent increment is older than that
#: only if this many others came in between, far more than a client's retries take).
REMEMBERED = 4096


class _Waiter:
    """One parked ``wait_until``: the event that wakes it and the value it wakes with."""

    __slots__ = ("event", "value")

    def __init__(self) -> None:
        self.event = anyio.Event()
        self.value: int | None = None


class SharedStep:
    """The actor: a value and the waiters parked on it, woken in order of their target."""

    def __init__(self, value: int) -> None:
        self.value = value
        self._waiters: list[tuple[int, int, _Waiter]] = []  # a heap: (target, arrival, waiter)
        self._by_token: dict[int, _Waiter] = {}
        self._order = itertools.count()
        self._applied: OrderedDict[str, int] = OrderedDict()  # increment key -> the value it reached

    def __repr__(self) -> str:
        return f"SharedStep({self.value}, waiters={len(self._waiters)})"

    async def get(self) -> int:
        return self.value

    async def increment(self, n: int, key: str | None = None) -> int:
        """Add ``n``; an increment whose ``key`` was applied already returns what it reached."""
        if key is not None:
            reached = self._applied.get(key)
            if reached is not None:
                return reached
        self.value += n
        if key is not None:
            self._applied[key] = self.value
            if len(self._applied) > REMEMBERED:
                self._applied.popitem(last=False)
        self._wake()
        return self.value

    async def lift(self, floor: int) -> int:
        """Raise the value to ``floor`` if it is below (a client that saw ``floor`` re-joined)."""
        if self.value < floor:
            self.value = floor
            self._wake()
        return self.value

    async def set(self, value: int) -> int:
        self.value = value
        self._wake()
        return value

    async def wait_until(self, target: int, token: int | None = None) -> int:
        """The value once it is at least ``target``; ``forget(token)`` withdraws the wait.

        A withdrawn wait returns the value as it is (its caller has gone).
        """
        if self.value >= target:
            return self.value
        waiter = _Waiter()
        entry = (target, next(self._order), waiter)
        heapq.heappush(self._waiters, entry)
        if token is not None:
            self._by_token[token] = waiter
        try:
            await waiter.event.wait()
        finally:
            if token is not None and self._by_token.get(token) is waiter:
                del self._by_token[token]
            if waiter.value is None:  # cancelled or withdrawn: not in the heap any more
                self._remove(entry)
        return self.value if waiter.value is None else waiter.value

    async def forget(self, token: int) -> None:
        """Withdraw the waiter of the ``wait_until`` call with ``token`` (its caller was cancelled)."""
        waiter = self._by_token.pop(token, None)
        if waiter is not None:
            waiter.event.set()

    def _wake(self) -> None:
        while self._waiters and self._waiters[0][0] <= self.value:
            _, _, waiter = heapq.heappop(self._waiters)
            waiter.value = self.value
            waiter.event.set()

    def _remove(self, entry: tuple[int, int, _Waiter]) -> None:
        try:
            self._waiters.remove(entry)
        except ValueError:  # already popped
            return
        heapq.heapify(self._waiters)
