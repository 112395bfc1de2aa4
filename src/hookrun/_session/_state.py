"""The states of a monitored session and the one place that changes them.

=============  ====================================================================
state          meaning
=============  ====================================================================
NEW            built, not entered yet
ENTERING       ``__aenter__`` is running ``begin`` or creating the first session; no
               step may start yet (from another task), a close wins
OPEN           a raw session and its coordinator exist; steps run on them
RECOVERING     the current session failed with a recoverable error: it is still
               there, to be closed (no ``end``) and replaced before the next step
BROKEN         no session: re-creating it failed or was interrupted; the next
               step of a ``MonitoredSession`` creates it again
CLOSED         closed for good (``aclose``/``__aexit__``)
=============  ====================================================================

Every change of state goes through :func:`move`, which refuses any change not in
``TRANSITIONS`` (a bug in the runtime, never a user error):

* NEW → ENTERING → OPEN: ``__aenter__`` (``_lifecycle.py``) runs ``begin``, then
  creates the first session;
* OPEN → RECOVERING: the moment a step fails with a recoverable error, before
  anything is awaited, so a recovery that is interrupted (cancelled) is resumed by
  the next ``run()`` (``_recovering.py``);
* RECOVERING → BROKEN once the failed session is closed, BROKEN → OPEN once a new
  one is created (``_recover`` in ``_recovering.py``, the only way back);
* ENTERING, OPEN, RECOVERING or BROKEN → CLOSED: closing (``_lifecycle.py``), also
  when entering fails.
"""

from __future__ import annotations

import enum

__all__ = ["CLOSABLE", "STEPPABLE", "TRANSITIONS", "State", "move"]


class State(enum.Enum):
    """The states of a monitored session (see the module docstring)."""

    NEW = "new"
    ENTERING = "entering"
    OPEN = "open"
    RECOVERING = "recovering"
    BROKEN = "broken"
    CLOSED = "closed"


#: States in which a step may start (RECOVERING and BROKEN: after recovering first).
STEPPABLE = frozenset({State.OPEN, State.RECOVERING, State.BROKEN})

#: States a close has something to do in: every state but NEW and CLOSED.
CLOSABLE = STEPPABLE | {State.ENTERING}

#: The changes of state that exist: from each state, the states it may change to.
TRANSITIONS: dict[State, frozenset[State]] = {
    State.NEW: frozenset({State.ENTERING}),
    State.ENTERING: frozenset({State.OPEN, State.CLOSED}),
    State.OPEN: frozenset({State.RECOVERING, State.CLOSED}),
    State.RECOVERING: frozenset({State.BROKEN, State.CLOSED}),
    State.BROKEN: frozenset({State.OPEN, State.CLOSED}),
    State.CLOSED: frozenset(),
}


def move(current: State, new: State) -> State:
    """``new``, once checked to be a change ``TRANSITIONS`` allows from ``current``."""
    if new not in TRANSITIONS[current]:
        raise RuntimeError(f"hookrun: a monitored session cannot go from {current.name} to {new.name}")
    return new
