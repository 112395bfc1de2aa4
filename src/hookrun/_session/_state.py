"""The states of a monitored session, what each allows, and the one place that changes them.

=============  ====================================================================
state          meaning
=============  ====================================================================
NEW            built, not entered yet
ENTERING       ``__aenter__`` is running ``begin`` or creating the lanes' sessions;
               no step may start yet (from another task), a close wins
OPEN           the coordinator exists; steps run on the lanes (a lane whose session
               failed is replaced by the next step on it: ``Lane.failed``)
STOPPED        open, and a hook (or a step function) requested stop: no new step
               starts, the steps running end, a lane may still be recovered
CLOSED         closed for good (``aclose``/``__aexit__``)
=============  ====================================================================

What each state allows (``ALLOWS``; a step refused says why: ``refuse_step``):

=============  ======  =========  =======  ===========================
state          run     iterate    close    recover a lane
=============  ======  =========  =======  ===========================
NEW            no      no         nothing  no
ENTERING       no      no         yes      (creating the first ones)
OPEN           yes     yes        yes      yes
STOPPED        no      (ends)     yes      yes
CLOSED         no      no         nothing  no
=============  ======  =========  =======  ===========================

Every change of state goes through :func:`move`, which refuses any change not in
``TRANSITIONS`` (a bug in the runtime, never a user error):

* NEW → ENTERING → OPEN: ``__aenter__`` (``enter``, ``_lifecycle.py``) runs ``begin``, then
  creates every lane's session;
* OPEN → STOPPED: a hook's ``request_stop`` (``_set_hook_stop``, ``_base.py``); sticky;
* ENTERING, OPEN or STOPPED → CLOSED: closing (``_lifecycle.py``), also when entering fails.

Orthogonal to the state: whether a step is running (the session's ``_busy``; a clean
close from another task waits for it, and with one lane a step from another task too),
as a hook may request stop, and a close may start, while one runs.

Recovery is not a state of the session: a lane's session is replaced while the other
lanes go on (``_recovering.py``, ``_lane_sessions.py``).

What a session carries besides its state is declared here too, once: ``SessionAttributes``.
"""

from __future__ import annotations

import enum
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, ClassVar

from .._errors import RunAfterStopError, SessionClosedError

if TYPE_CHECKING:

    from .._coordinator._tasks import Coordinator
    from .._dispatch._dispatcher import Dispatcher
    from .._dispatch._plan import PhasePlan
    from .._global_step import LocalStepCounter
    from .._observe._statistics import Collector
    from ._in_flight import InFlight
    from ._lanes import Lane
    from ._lifecycle import Lifetime, Setup
    from ._turns import Turns

__all__ = [
    "ALLOWS", "CLOSABLE", "OPENED", "STEPPABLE", "TRANSITIONS", "SessionAttributes", "State", "move", "refuse_step",
]


class State(enum.Enum):
    """The states of a monitored session (see the module docstring)."""

    NEW = "new"
    ENTERING = "entering"
    OPEN = "open"
    STOPPED = "stopped"
    CLOSED = "closed"


#: What each state allows: a step (``run``, ``iterate``, ``run_step_fn``), a close that
#: has something to do, a lane's recovery.
ALLOWS: dict[State, frozenset[str]] = {
    State.NEW: frozenset(),
    State.ENTERING: frozenset({"close"}),
    State.OPEN: frozenset({"step", "close", "recover"}),
    State.STOPPED: frozenset({"close", "recover"}),
    State.CLOSED: frozenset(),
}

#: States in which a step may start.
STEPPABLE = frozenset(state for state, allowed in ALLOWS.items() if "step" in allowed)

#: States of an entered session not closed yet: a step may be running (one started before a
#: stop was requested), ``iterate()`` is allowed (it ends at once once stopped).
OPENED = frozenset(state for state, allowed in ALLOWS.items() if "recover" in allowed)

#: States a close has something to do in.
CLOSABLE = frozenset(state for state, allowed in ALLOWS.items() if "close" in allowed)

#: The changes of state that exist: from each state, the states it may change to.
TRANSITIONS: dict[State, frozenset[State]] = {
    State.NEW: frozenset({State.ENTERING}),
    State.ENTERING: frozenset({State.OPEN, State.CLOSED}),
    State.OPEN: frozenset({State.STOPPED, State.CLOSED}),
    State.STOPPED: frozenset({State.CLOSED}),
    State.CLOSED: frozenset(),
}


def move(current: State, new: State) -> State:
    """``new``, once checked to be a change ``TRANSITIONS`` allows from ``current``."""
    if new not in TRANSITIONS[current]:
        raise RuntimeError(f"hookrun: a monitored session cannot go from {current.name} to {new.name}")
    return new


def refuse_step(session: object, state: State, what: str) -> None:
    """Raise why ``what`` (``run()``, ``iterate()``, ...) may not start a step of ``session``
    in ``state`` (one that allows steps is never refused here). The one wording of the
    admission rule, at every ``max_in_flight``."""
    name = type(session).__name__
    if state is State.NEW:
        raise SessionClosedError(f"{name}.{what} called outside 'async with'")
    if state is State.ENTERING:
        raise SessionClosedError(f"{name}.{what} called while the session is being entered (from another task)")
    if state is State.CLOSED:
        raise SessionClosedError(f"{name}.{what} called after the session closed")
    if state is State.STOPPED:
        raise RunAfterStopError(f"{name}.{what} called after a hook requested stop")
    raise RuntimeError(f"hookrun: {name}.{what} refused in state {state.name}, which allows it")


class SessionAttributes:
    """What a monitored session carries, declared once: the session (``_base.py``) has it as
    its one base, and the parts it composes (``_lifecycle.py``, ``_recovering.py``,
    ``_stepping.py``, ``_turns.py``, the steps in flight) read it through the session they
    are given; the public ``hooks`` and ``max_in_flight`` are plain attributes.

    The attributes live in slots, the ones a step reads first side by side, so that they
    share a few cache lines. Past about 30 attributes CPython keeps an instance's
    attributes in a full dict, and each read of a step is a probe into a table spread over
    a kilobyte: on a step that waits (its caches cold), slots take a fifth off one plain
    hook's step. Anything else set on a session (a subclass's own attributes) goes to its
    ``__dict__``. What is read only at entry, on a retry or a recovery and at close is
    grouped: ``_setup`` (fixed by the constructor: the lanes' sessions, the recovery) and
    ``_lifetime`` (entering and closing's bookkeeping). A step reads ``_turns`` only to see
    whether a caller (or a close) waits for it.
    """

    __slots__ = (  # noqa: RUF023  # the ones a step reads first, not sorted
        # read by every step, in about this order
        "_state", "_busy", "_plain", "_stats", "_step", "_coord", "_lane", "_local", "_on_stop",
        "_before", "_after", "_dispatcher", "_turns",
        # the steps-in-flight engine, and the cold groups
        "_in_flight", "_setup", "_lifetime",
    )

    #: Whether recoverable errors re-create the session (MonitoredSession) or propagate:
    #: read once, by the constructor, into ``_setup.recovery.recovers``. (An instance's read
    #: of a class attribute is not specialized on CPython 3.11 and cost a plain hook's step
    #: about 5 %: no step reads it.)
    _RECOVERS: ClassVar[bool] = False

    #: NEW, ENTERING, OPEN, STOPPED or CLOSED (the table above); changed by ``move`` only.
    _state: State
    #: A step is running (one at a time), or steps are in flight (``_in_flight.py``).
    _busy: bool
    #: Whether ``run`` steps itself: every hook call a plain function (``_run.py``).
    _plain: bool
    _stats: Collector
    #: The step body the constructor chose: a function of ``_stepping.py``, called with the session.
    _step: Callable[..., Awaitable[Any]]
    #: The one coordinator, once it exists (``LaneSessions`` sets it).
    _coord: Coordinator | None
    #: The lane a step of one lane at a time runs on (its raw session: ``_lane.raw``).
    _lane: Lane
    #: The step counter when it is a ``LocalStepCounter`` (read without awaiting), else None.
    _local: LocalStepCounter | None
    #: The hooks' ``request_stop`` (``_set_hook_stop``), bound once.
    _on_stop: Callable[[], None]
    _before: PhasePlan
    _after: PhasePlan
    _dispatcher: Dispatcher
    #: With one lane, the callers from other tasks waiting for the step in progress (``_turns.py``).
    _turns: Turns
    #: With steps in flight, the engine the entry points go to (``_in_flight.py``).
    _in_flight: InFlight | None
    #: What the constructor fixed for entering, recovering and closing (``_lifecycle.py``):
    #: the lanes and their raw sessions (``sessions``), the step counter when it is not
    #: read as ``_local``, the recovery (``_recovering.py``), the hooks' ``step_context``s...
    _setup: Setup
    #: The task group, the close under way, and what it waits on (``_lifecycle.py``).
    _lifetime: Lifetime
