"""One step at a time, in arrival order: ``Turns``, which a monitored session with one lane
holds (``_turns``).

With ``max_in_flight=1`` a ``run()`` or ``run_step_fn()`` from another task while a step is
in progress waits for that step, as a caller waits for a free lane with lanes: the
callers waiting queue in its ``waiting``, and the step's end hands the
lane (``_busy`` stays true) to the first of them, so that a task looping on ``run()`` never
overtakes a caller waiting. A caller woken once the session stopped holds the lane only
to pass it on, and is refused as it would be if it called then. A close refuses every
caller waiting at once (``refuse_all``: they are woken without the lane), and a clean
close from another task then waits for the step in progress like a caller
(``step_ended``). Two ``run_with_hooks`` of one step function from two tasks queue the
same way, in ``hooked``: the second runs once the first ended.

A call from inside one of the session's own steps is refused at once (it would wait for
itself): ``_admit``.

Invariants: callers wait only while the lane is held (``_busy``, or ``Lane.hooked_run``);
whoever holds it when it is handed on, a caller cancelled just after being handed it
included, hands it on (to the next caller waiting, else frees it), so a queued caller is
woken, in order, once each one before it let go.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from typing import TYPE_CHECKING

import anyio

from ._state import State, refuse_step

if TYPE_CHECKING:
    from ._base import _MonitoredSessionBase

__all__ = ["Turn", "Turns", "hand_on", "refuse_all", "wait_turn"]

_OPEN = State.OPEN


class Turn:
    """A caller's place in a queue: set when the turn is handed to it, or when it is
    ``refused`` (the session closed without the turn coming to it)."""

    __slots__ = ("event", "refused")

    def __init__(self) -> None:
        self.event = anyio.Event()
        self.refused = False


async def wait_turn(waiting: deque[Turn], pass_on: Callable[[], None]) -> bool:
    """Wait in ``waiting`` until the holder hands its turn on (``hand_on``): True; False when
    refused (``refuse_all``: the caller holds nothing). Cancelled once it was handed on,
    pass it on with ``pass_on``."""
    turn = Turn()
    waiting.append(turn)
    try:
        await turn.event.wait()
    except BaseException:
        if not turn.event.is_set():
            waiting.remove(turn)
        elif not turn.refused:  # handed the turn as it was cancelled: pass it on
            pass_on()
        raise
    return not turn.refused


def hand_on(waiting: deque[Turn]) -> bool:
    """Hand the turn to the first caller waiting in ``waiting``: whether there was one."""
    if waiting:
        waiting.popleft().event.set()
        return True
    return False


def refuse_all(waiting: deque[Turn]) -> None:
    """Wake every caller waiting in ``waiting`` without handing the turn on (the session
    closed and will not wait for the step in progress)."""
    while waiting:
        turn = waiting.popleft()
        turn.refused = True
        turn.event.set()


class Turns:
    """The callers waiting for the step in progress of a session with one lane, and a step
    function's hooked runs waiting for the one in progress (see the module docstring)."""

    __slots__ = ("hooked", "s", "waiting")

    def __init__(self, session: _MonitoredSessionBase) -> None:
        self.s = session
        #: In arrival order, the callers from other tasks waiting for the step in progress
        #: (or a clean close, once it refused them); the step's end hands the lane to the
        #: first (``pass_on``).
        self.waiting: deque[Turn] = deque()
        #: A step function's ``run_with_hooks`` calls waiting for the one in progress.
        self.hooked: deque[Turn] = deque()

    async def wait(self, what: str) -> None:
        """Wait for the step in progress (another task's: ``_admit`` said so), in arrival
        order; then hold the lane, or refuse ``what`` as a call now would be."""
        await self._take(self.waiting, self.pass_on, what)

    async def _take(self, waiting: deque[Turn], pass_on: Callable[[], None], what: str) -> None:
        """Wait in ``waiting``; then hold the turn, or (the session stopped or closed
        meanwhile) pass it on with ``pass_on`` and refuse ``what`` as a call now would be."""
        handed = await wait_turn(waiting, pass_on)
        s = self.s
        if s._state is not _OPEN:
            if handed:
                pass_on()
            refuse_step(s, s._state, what)

    def pass_on(self) -> None:
        """The step in progress ended: the lane passes to the first caller waiting (``_busy``
        stays true), else it is free."""
        if not hand_on(self.waiting):
            self.s._busy = False

    async def step_ended(self) -> None:
        """A clean close from another task waits for the step in progress (the close refused
        the callers waiting already: nobody is queued before it, and nobody after)."""
        if await wait_turn(self.waiting, self.pass_on):
            self.pass_on()

    def refuse_all(self) -> None:
        """The session closed: every caller waiting for the step in progress is refused now."""
        refuse_all(self.waiting)

    async def wait_hooked(self) -> None:
        """A step function's ``run_with_hooks`` while another of its hooked runs is in
        progress (from another task): wait for it, in arrival order; then run, or refuse
        as a call now would be."""
        await self._take(self.hooked, self.pass_hooked, "run_with_hooks()")

    def pass_hooked(self) -> None:
        """A hooked run of the step function ended: the next one waiting goes, else none runs."""
        if not hand_on(self.hooked):
            self.s._lane.hooked_run = False
