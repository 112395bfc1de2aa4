"""One step at a time, in arrival order: ``Turns``, a mixin of a monitored session with one
lane (``_monitored.py``; the attributes it reads are declared in ``_state.py``).

With ``max_in_flight=1`` a ``run()`` or ``run_step_fn()`` from another task while a step is
in progress waits for that step, as a caller waits for a free lane with lanes: the
callers waiting queue in the session's ``_lifetime.waiting``, and the step's end hands the
lane (``_busy`` stays true) to the first of them, so that a task looping on ``run()`` never
overtakes a caller waiting. A caller woken once the session stopped holds the lane only
to pass it on, and is refused as it would be if it called then. A close refuses every
caller waiting at once (``refuse_all``: they are woken without the lane), and a clean
close from another task then waits for the step in progress like a caller
(``_steps_ended``). Two ``run_with_hooks`` of one step function from two tasks queue the
same way, in ``_lifetime.hooked``: the second runs once the first ended.

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

import anyio

from ._state import SessionAttributes, State, refuse_step

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


class Turns(SessionAttributes):
    """The callers waiting for the step in progress of a session with one lane (a mixin)."""

    async def _wait_turn(self, what: str) -> None:
        """Wait for the step in progress (another task's: ``_admit`` said so), in arrival
        order; then hold the lane, or refuse ``what`` as a call now would be."""
        await self._take_turn(self._lifetime.waiting, self._pass_turn, what)

    async def _take_turn(self, waiting: deque[Turn], pass_on: Callable[[], None], what: str) -> None:
        """Wait in ``waiting``; then hold the turn, or (the session stopped or closed
        meanwhile) pass it on with ``pass_on`` and refuse ``what`` as a call now would be."""
        handed = await wait_turn(waiting, pass_on)
        if self._state is not _OPEN:
            if handed:
                pass_on()
            refuse_step(self, self._state, what)

    def _pass_turn(self) -> None:
        """The step in progress ended: the lane passes to the first caller waiting (``_busy``
        stays true), else it is free."""
        if not hand_on(self._lifetime.waiting):
            self._busy = False

    async def _steps_ended(self) -> None:
        """A clean close from another task waits for the step in progress (the close refused
        the callers waiting already: nobody is queued before it, and nobody after). With
        steps in flight: for them all to end (``InFlight.end`` sets ``step_done``)."""
        lifetime = self._lifetime
        if self._in_flight is None:
            if await wait_turn(lifetime.waiting, self._pass_turn):
                self._pass_turn()
            return
        lifetime.step_done = done = anyio.Event()
        try:
            await done.wait()
        finally:
            lifetime.step_done = None

    async def _hooked_turn(self) -> None:
        """A step function's ``run_with_hooks`` while another of its hooked runs is in
        progress (from another task): wait for it, in arrival order; then run, or refuse
        as a call now would be."""
        await self._take_turn(self._lifetime.hooked, self._pass_hooked, "run_with_hooks()")

    def _pass_hooked(self) -> None:
        """A hooked run of the step function ended: the next one waiting goes, else none runs."""
        if not hand_on(self._lifetime.hooked):
            self._lane.hooked_run = False
