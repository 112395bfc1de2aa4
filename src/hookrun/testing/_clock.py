"""``MockClock``: a clock tests move by hand, on asyncio and trio alike.

A clock in the timers' sense: calling it returns the current time in seconds.
It is not the event loop's clock: ``anyio.sleep`` and ``anyio.fail_after`` keep
running on real time, so a test stays bounded while the code under test sees
only the time the test gives it. Code that must *wait* for the clock (the
coordinator's ``loop``) awaits ``sleep_until``, which parks on an
``anyio.Event``; ``jump`` wakes every sleeper that became due, ``advance``
stops at each deadline on the way. Nothing polls.

Invariants: time never goes backwards; a sleeper wakes exactly when the clock
reaches its deadline, never before; a cancelled sleeper is forgotten.
"""

from __future__ import annotations

import heapq
import itertools
import math

import anyio
import anyio.lowlevel

__all__ = ["MockClock"]


class MockClock:
    """A controllable clock: ``clock()`` is the time, ``clock.jump(s)`` moves it on.

    Pass it wherever hookrun takes a ``clock=`` (``SecondOrStepTimer``, the
    built-in hooks, ``Coordinator.loop``, ``hookrun.testing.drive``). It
    works on any backend because it never touches the event loop's clock:
    waiting on it (``sleep``, ``sleep_until``) parks on an event that
    ``jump`` sets.

    Args:
        start: The time the clock starts at, in seconds.
    """

    __slots__ = ("_counter", "_now", "_sleepers")

    def __init__(self, start: float = 0.0) -> None:
        self._now = _check_finite("MockClock(start=...)", start)
        self._sleepers: list[tuple[float, int, anyio.Event]] = []
        self._counter = itertools.count()

    def __repr__(self) -> str:
        return f"MockClock(now={self._now:g}, sleepers={len(self._sleepers)})"

    def __call__(self) -> float:
        return self._now

    @property
    def now(self) -> float:
        """The current time in seconds."""
        return self._now

    @property
    def sleepers(self) -> int:
        """How many tasks are waiting for the clock to reach a deadline."""
        return len(self._sleepers)

    def next_deadline(self) -> float | None:
        """The earliest deadline a task is waiting for, or ``None``."""
        return self._sleepers[0][0] if self._sleepers else None

    def jump(self, seconds: float) -> None:
        """Move the clock ``seconds`` (>= 0) forward at once and wake every sleeper now due.

        The woken tasks run at their next turn, all seeing the new time; ``advance``
        instead passes through each deadline in turn.
        """
        seconds = _check_finite("MockClock.jump(seconds)", seconds)
        if seconds < 0:
            raise ValueError(
                f"MockClock.jump(seconds) must be >= 0 (time never goes back), got {seconds!r}"
            )
        self._move_to(self._now + seconds)

    async def advance(self, seconds: float) -> None:
        """Let ``seconds`` (>= 0) pass: stop at each sleeper's deadline on the way, wake it
        and wait until every other task is blocked again, then move to the end."""
        seconds = _check_finite("MockClock.advance(seconds)", seconds)
        if seconds < 0:
            raise ValueError(
                f"MockClock.advance(seconds) must be >= 0 (time never goes back), got {seconds!r}"
            )
        target = self._now + seconds
        while self._sleepers and self._sleepers[0][0] <= target:
            self._move_to(self._sleepers[0][0])
            await anyio.wait_all_tasks_blocked()
        self._move_to(target)
        await anyio.wait_all_tasks_blocked()

    def _move_to(self, when: float) -> None:
        self._now = max(self._now, when)
        sleepers = self._sleepers
        while sleepers and sleepers[0][0] <= self._now:
            heapq.heappop(sleepers)[2].set()

    async def sleep_until(self, deadline: float) -> None:
        """Wait until the clock reads at least ``deadline``; always a checkpoint."""
        deadline = _check_finite("MockClock.sleep_until(deadline)", deadline)
        if deadline <= self._now:
            await anyio.lowlevel.checkpoint()
            return
        entry = (deadline, next(self._counter), anyio.Event())
        heapq.heappush(self._sleepers, entry)
        try:
            await entry[2].wait()
        finally:
            if not entry[2].is_set():  # cancelled: forget it
                self._sleepers.remove(entry)
                heapq.heapify(self._sleepers)

    async def sleep(self, seconds: float) -> None:
        """Wait until the clock has moved ``seconds`` on."""
        await self.sleep_until(self._now + _check_finite("MockClock.sleep(seconds)", seconds))


def _check_finite(what: str, value: object) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise ValueError(f"{what} must be a finite number of seconds, got {value!r}")
    return float(value)
