"""The states of a monitored session, what each allows, and the one place that changes them.

=============  ====================================================================
state          meaning
=============  ====================================================================
NEW            built, not entered yet
ENTERING       ``__aenter__`` is running ``begin`` or creating the lanes' sessions;
               no step may start yet (from another task), a close wins
OPEN           the coordinator exists; steps run on the lanes (a lane whose session
               failed is replaced by the next step on it: ``Lane.failed``)
CLOSED         closed for good (``aclose``/``__aexit__``)
=============  ====================================================================

What each state allows (``ALLOWS``; a step refused says why: ``refuse_step``):

=============  ======  =========  =======  ===========================
state          run     iterate    close    recover a lane
=============  ======  =========  =======  ===========================
NEW            no      no         nothing  no
ENTERING       no      no         yes      (creating the first ones)
OPEN           yes     yes        yes      yes
CLOSED         no      no         nothing  no
=============  ======  =========  =======  ===========================

Every change of state goes through :func:`move`, which refuses any change not in
``TRANSITIONS`` (a bug in the runtime, never a user error):

* NEW → ENTERING → OPEN: ``__aenter__`` (``_lifecycle.py``) runs ``begin``, then
  creates every lane's session;
* ENTERING or OPEN → CLOSED: closing (``_lifecycle.py``), also when entering fails.

Recovery is not a state of the session: a lane's session is replaced while the other
lanes go on (``_recovering.py``, ``_lane_sessions.py``).
"""

from __future__ import annotations

import enum

from .._errors import RunAfterStopError, SessionClosedError

__all__ = ["ALLOWS", "CLOSABLE", "STEPPABLE", "TRANSITIONS", "State", "move", "refuse_step"]


class State(enum.Enum):
    """The states of a monitored session (see the module docstring)."""

    NEW = "new"
    ENTERING = "entering"
    OPEN = "open"
    CLOSED = "closed"


#: What each state allows: a step (``run``, ``iterate``, ``run_step_fn``), a close that
#: has something to do, a lane's recovery.
ALLOWS: dict[State, frozenset[str]] = {
    State.NEW: frozenset(),
    State.ENTERING: frozenset({"close"}),
    State.OPEN: frozenset({"step", "close", "recover"}),
    State.CLOSED: frozenset(),
}

#: States in which a step may start.
STEPPABLE = frozenset(state for state, allowed in ALLOWS.items() if "step" in allowed)

#: States a close has something to do in.
CLOSABLE = frozenset(state for state, allowed in ALLOWS.items() if "close" in allowed)

#: The changes of state that exist: from each state, the states it may change to.
TRANSITIONS: dict[State, frozenset[State]] = {
    State.NEW: frozenset({State.ENTERING}),
    State.ENTERING: frozenset({State.OPEN, State.CLOSED}),
    State.OPEN: frozenset({State.CLOSED}),
    State.CLOSED: frozenset(),
}


def move(current: State, new: State) -> State:
    """``new``, once checked to be a change ``TRANSITIONS`` allows from ``current``."""
    if new not in TRANSITIONS[current]:
        raise RuntimeError(f"hookrun: a monitored session cannot go from {current.name} to {new.name}")
    return new


def refuse_step(session: object, state: State, what: str) -> None:
    """Raise why ``what`` (``run()``, ``iterate()``, ...) may not start a step of ``session``
    in ``state``; a state that allows steps refuses it only after a hook requested stop.
    The one wording of the admission rule, at every ``max_in_flight``."""
    name = type(session).__name__
    if state is State.NEW:
        raise SessionClosedError(f"{name}.{what} called outside 'async with'")
    if state is State.ENTERING:
        raise SessionClosedError(f"{name}.{what} called while the session is being entered (from another task)")
    if state is State.CLOSED:
        raise SessionClosedError(f"{name}.{what} called after the session closed")
    raise RunAfterStopError(f"{name}.{what} called after a hook requested stop")
