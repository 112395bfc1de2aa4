"""The lanes of a monitored session: ``Lane`` (one raw session, and the fetch layout of
its last step), and with steps in flight
``LanePool`` (the free lanes, handed out first come first served), ``Occupancy`` (how many
steps were in flight and lanes occupied over time), ``Tickets`` (the steps admitted and
not yet ended), ``PhaseLock`` (one hook phase at a time), ``Turnstile`` (lets the
``after_run`` phases through in step order).

Invariants: a lane serves one step's run at a time (it is in the pool or held by exactly
one step); a caller waiting for a lane (or a ticket, or the phase lock) is served in
arrival order, and one cancelled while it waits gives back a lane (or a ticket) it was
handed; the turnstile lets number ``n`` through only once every number before it went
through or was given up.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from .._dispatch._merge import FetchLayout
from .._dispatch._wake import Waker, Wakers

if TYPE_CHECKING:
    from .._dispatch._plan import Call

__all__ = ["Lane", "LanePool", "Occupancy", "PhaseLock", "Tickets", "Turnstile"]


class Lane:
    """One lane: its raw session and whether it must be (re)created before its next step.

    ``raw`` is ``None`` while the lane has no session (not created yet, closed, or
    re-creating it failed: ``broken`` says with what). ``renew`` is true until a session
    is created, and again from the moment a step on it fails with a recoverable error,
    before anything is awaited: a recovery that is interrupted (cancelled) leaves it
    set, so the next step on the lane replaces the session first.
    """

    __slots__ = ("broken", "hooked_run", "index", "layout", "raw", "renew")

    def __init__(self, index: int) -> None:
        self.index = index
        self.raw: Any = None
        self.renew = True
        self.broken: BaseException | None = None
        #: A step function's hooked run is under way on this lane (one lane: one at a
        #: time, whichever attempt of the step function started it).
        self.hooked_run = False
        #: The fetch layout of the last step on this lane, reused while it fits (``layout_for``).
        self.layout: FetchLayout | None = None

    def layout_for(self, fetches: object, calls: Sequence[Call], requests: Sequence[Any]) -> FetchLayout:
        """The fetch layout for the caller's ``fetches`` and the hooks' ``requests``
        (``calls``: the before_run phase's): the last step's on this lane while they fit
        it (its keys and shapes shared, not made anew by each step), else a new one, kept."""
        layout = self.layout
        if layout is None or not layout.fits(fetches, requests):
            layout = self.layout = FetchLayout(fetches, calls, requests)
        return layout

    def __repr__(self) -> str:
        state = "no session" if self.raw is None else type(self.raw).__name__ + (", failed" if self.renew else "")
        return f"Lane({self.index}, {state})"


class _Waiter:
    __slots__ = ("event", "lane")

    def __init__(self, event: Waker) -> None:
        self.event = event
        self.lane: Lane | None = None


class Occupancy:
    """How many steps are in flight (admitted and not yet ended) and how many lanes they
    occupy (a step holds its lane from its admission until its raw run returned),
    integrated over time for the statistics: the lanes' mean is ``mean_in_flight`` (at most
    N), the steps' tells how many shared a timed step's time (up to the window, 2 N)."""

    __slots__ = ("_area", "_clock", "_lane_area", "_since", "_started", "busy", "occupied")

    def __init__(self, clock: Callable[[], float]) -> None:
        self._clock = clock
        self.busy = 0  # steps in flight now
        self.occupied = 0  # lanes occupied now
        self._started: float | None = None  # when the first step was admitted
        self._since = 0.0
        self._area = 0.0  # steps in flight, integrated over time
        self._lane_area = 0.0  # lanes occupied, integrated over time

    def change(self, steps: int, lanes: int) -> None:
        """``steps`` more steps in flight and ``lanes`` more lanes occupied (or fewer), now."""
        now = self._clock()
        if self._started is None:
            self._started = self._since = now
        elapsed = now - self._since
        self._area += self.busy * elapsed
        self._lane_area += self.occupied * elapsed
        self._since = now
        self.busy += steps
        self.occupied += lanes

    def mean_in_flight(self) -> float:
        """The mean number of lanes occupied (runs in flight) since the first step started
        (0.0: none yet)."""
        if self._started is None:
            return 0.0
        now = self._clock()
        elapsed = now - self._started
        area = self._lane_area + self.occupied * (now - self._since)
        return area / elapsed if elapsed > 0 else float(self.occupied)

    def integral(self) -> float:
        """The steps in flight, integrated over time up to now (0 before the first)."""
        if self._started is None:
            return 0.0
        return self._area + self.busy * (self._clock() - self._since)


class LanePool:
    """The free lanes; ``acquire`` waits for one (back-pressure), ``release`` gives it back."""

    __slots__ = ("_wakers", "idle", "lanes", "waiters")

    def __init__(self, lanes: list[Lane], wakers: Wakers) -> None:
        self.lanes = lanes
        #: The free lanes, and the callers waiting for any lane: ``acquire`` returns at once
        #: when a lane is free and no one waits (then a lane may be taken straight from ``idle``).
        self.idle: deque[Lane] = deque(lanes)
        self.waiters: deque[_Waiter] = deque()
        self._wakers = wakers

    async def acquire(self) -> Lane:
        """A free lane, waiting for one in arrival order."""
        if self.idle and not self.waiters:
            return self.idle.popleft()
        waiter = _Waiter(self._wakers())
        self.waiters.append(waiter)
        try:
            await waiter.event.wait()
        except BaseException:
            if waiter.lane is not None:  # handed one as it was cancelled: pass it on
                lane, waiter.lane = waiter.lane, None
                self.release(lane)
            else:
                self.waiters.remove(waiter)
            raise
        assert waiter.lane is not None
        lane, waiter.lane = waiter.lane, None
        return lane

    def take(self, lane: Lane) -> bool:
        """``lane`` itself, if it is free and nobody waits for a lane (else False: taken)."""
        if lane in self.idle and not self.waiters:
            self.idle.remove(lane)
            return True
        return False

    def release(self, lane: Lane) -> None:
        """Give ``lane`` back: to the first caller waiting for a lane, else to the pool."""
        if self.waiters:
            waiter = self.waiters.popleft()
            waiter.lane = lane
            waiter.event.set()
            return
        self.idle.append(lane)


class _LockWaiter:
    __slots__ = ("event", "handed")

    def __init__(self, event: Waker) -> None:
        self.event = event
        self.handed = False


class Tickets:
    """``size`` tickets, taken without suspending or a checkpoint while one is free; else
    waited for in arrival order, ``release`` handing a ticket straight to the first waiter.

    ``PhaseLock`` is one ticket. With ``max_in_flight=N`` the steps admitted and not yet
    ended (through their ``after_run`` or given up) hold one of ``2 N``: a run that ended
    early frees its lane for the next admission while its ``after_run`` waits its turn, and
    a slow step holds back at most that many steps.
    """

    __slots__ = ("_waiters", "_wakers", "size", "used")

    def __init__(self, size: int, wakers: Wakers) -> None:
        #: A ticket is free while ``used < size`` (then ``acquire`` returns at once: taking one
        #: is ``used += 1``).
        self.size = size
        self.used = 0
        self._waiters: deque[_LockWaiter] = deque()
        self._wakers = wakers

    def try_take(self) -> bool:
        """Take a ticket if one is free, without a coroutine (``acquire`` waits otherwise):
        ``if not t.try_take(): await t.acquire()``."""
        if self.used < self.size:
            self.used += 1
            return True
        return False

    async def acquire(self) -> None:
        if self.used < self.size:
            self.used += 1  # no waiter is left behind: release hands a ticket on
            return
        waiter = _LockWaiter(self._wakers())
        self._waiters.append(waiter)
        try:
            await waiter.event.wait()
        except BaseException:
            if waiter.handed:  # handed a ticket as it was cancelled: pass it on
                self.release()
            else:
                self._waiters.remove(waiter)
            raise

    def release(self) -> None:
        """Hand a ticket to the first task waiting, else put it back."""
        if self._waiters:
            waiter = self._waiters.popleft()
            waiter.handed = True
            waiter.event.set()
        else:
            self.used -= 1


class PhaseLock(Tickets):
    """The phase lock: one hook phase at a time (``async with lock:``), one ticket.

    It replaces ``anyio.Lock``, which on trio costs a checkpoint and a parking-lot breaker
    per acquisition: with 64 steps in flight, about a tenth of a step's time (the ``run()``
    from 64 tasks row of the in-flight benchmark).
    """

    __slots__ = ()

    def __init__(self, wakers: Wakers) -> None:
        super().__init__(1, wakers)

    def locked(self) -> bool:
        return self.used > 0

    async def __aenter__(self) -> None:
        await self.acquire()

    async def __aexit__(self, *exc_info: object) -> None:
        self.release()


class Turnstile:
    """Lets step numbers through one at a time, in increasing order; a number waiting for
    its turn has a wake-up of its own.

    When a number's turn comes it is woken with every consecutive number waiting behind
    it: their runs are done too, and they usually follow one another in the same pass of
    the event loop. Woken one at a time, a run of ``k`` steps whose runs ended together
    takes ``k`` passes; and trio runs each batch of woken tasks in reverse order half the
    time, so nearly every step of a full stream waits on it (about 1 a step with 64 in
    flight, against none on asyncio). Woken together, one that runs before its turn waits
    again, and the run goes through in two passes on average: with 64 steps of 1 ms in
    flight ``iterate`` made 0.82-0.86 of the hand-written loop on trio, against
    0.74-0.79 waking one (the in-flight benchmark's 1 ms row, side by side).
    """

    __slots__ = ("_given_up", "_waiting", "_wakers", "next")

    def __init__(self, wakers: Wakers) -> None:
        self.next = 1  # the number whose turn it is
        self._given_up: set[int] = set()
        self._waiting: dict[int, Waker] = {}  # the numbers waiting for their turn
        self._wakers = wakers

    def restart(self, number: int) -> None:
        """Nothing is in flight: the next step admitted is ``number``."""
        self.next = number
        self._given_up.clear()
        waiting, self._waiting = self._waiting, {}
        for event in waiting.values():  # none expected; they look again
            event.set()

    async def wait(self, number: int) -> None:
        """Wait until it is ``number``'s turn (a caller checks ``next`` first: when it is
        already, no coroutine is needed)."""
        waiting = self._waiting
        while self.next != number:
            event = waiting[number] = self._wakers()  # one wait, one wake-up
            try:
                await event.wait()
            finally:
                if waiting.get(number) is event:  # cancelled before its turn
                    del waiting[number]
            waiting = self._waiting

    def done(self, number: int) -> None:
        """``number`` went through (it had its turn) or was given up (it never will)."""
        if number != self.next:
            if number > self.next:
                self._given_up.add(number)
            return
        self.next = number = number + 1
        given_up = self._given_up
        while number in given_up:
            given_up.discard(number)
            self.next = number = number + 1
        waiting = self._waiting
        event = waiting.pop(number, None)
        while event is not None:  # its turn, and the consecutive numbers waiting behind it
            event.set()
            number += 1
            event = waiting.pop(number, None)
